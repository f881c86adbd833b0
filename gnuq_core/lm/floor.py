"""The floor of the gradient pass: what any exact ``‖∇θ log p‖²`` must at least cost.

The benchmark (`gnuq_core.bench`, pass ``backward_floor``) times `activation_backward` beside
`gnuq_core.lm.gradient.forward_backward`, so the efficiency chapter can say how much of the
gradient pass is the unavoidable forward + backward and how much the norms themselves cost.
(A module of its own, not part of `gnuq_core.lm.gradient`: that module's code keys the QA
results store, and this function is a measurement aid, not part of the estimator.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from gnuq_core.estimators.core import unique_params
from gnuq_core.estimators.hooks import ghost_linear_sq_norms, hooked_sq_norms
from gnuq_core.lm.anatomy import decoder_of, device_of, logit_transform, upcast
from gnuq_core.lm.gradient import _ghost_layers

__all__ = ["activation_backward", "ghost_layers_of"]


def ghost_layers_of(model: Any, rows: int) -> dict[int, torch.nn.Linear]:
    """The ``nn.Linear`` layers whose norms the gradient pass over all parameters takes the
    ghost way for a sequence of ``rows`` tokens (``ghost="auto"``), by ``id`` of the weight:
    the gradient pass's own selection, over every parameter but the embedding and the head,
    which it handles apart."""
    params, _ = unique_params(model)
    apart = {id(model.get_input_embeddings().weight), id(model.get_output_embeddings().weight)}
    # the gradient module's private selection: a public name there would change the QA store's code version
    return _ghost_layers(model, [k for k in params if k not in apart], rows, "auto")


def activation_backward(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int], *,
                        with_grams: bool = False) -> float:
    """log p of the answer, with one backward pass into the activations only: the floor.

    Every exact ``‖∇θ log p‖²`` needs the gradient of log p at every layer's output, so one
    forward with autograd and one backward through all layers (LM head at the answer
    positions only, as in `gnuq_core.lm.gradient.forward_backward`) is the least it can cost.
    No parameter requires grad here (`gnuq_core.estimators.hooks.hooked_sq_norms` with
    nothing selected; flags and ``.grad`` restored on return), so no weight-gradient product
    and no norm is computed: what the gradient pass costs beyond this is what its norms cost.

    With ``with_grams=True`` the pass also forms the ghost norms' Gram matrices of the
    linear layers (`ghost_layers_of`, `gnuq_core.estimators.hooks.ghost_linear_sq_norms`)
    exactly as the gradient pass does, and nothing else: the floor of the gradient pass's
    own algorithm, so the benchmark can split what the pass costs above the floor into the
    Gram products and the rest (hooks, bookkeeping, the embedding and head pieces).
    """
    ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=device_of(model))
    n_p = len(prompt_ids)
    params, _ = unique_params(model)
    ghosted = ghost_layers_of(model, ids.shape[1]) if with_grams else {}
    with hooked_sq_norms(params, selected=()), ghost_linear_sq_norms(ghosted), torch.enable_grad():
        with torch.no_grad():
            emb = model.get_input_embeddings()(ids)
        emb.requires_grad_(True)
        h = decoder_of(model)(inputs_embeds=emb, use_cache=False).last_hidden_state[0, n_p - 1:-1]
        z = upcast(logit_transform(model, model.get_output_embeddings()(h)))
        log_p = torch.log_softmax(z, -1).gather(1, ids[0, n_p:, None]).sum()
        log_p.backward()
    return float(log_p.detach())
