"""The floor of the gradient pass: what any exact ``‖∇θ log p‖²`` must at least cost.

The benchmark (`gnuq_core.bench`, pass ``backward_floor``) times `activation_backward` beside
`gnuq_core.lm.gradient.forward_backward`, so the efficiency chapter can say how much of the
gradient pass is the unavoidable forward + backward and how much the norms themselves cost.
`norm_multiply_adds` counts, from the shapes, what the norms multiply beyond that floor and
what one forward multiplies: the arithmetic any implementation of the same exact algorithm
must do, beside the times the benchmark measures; `gram_products` are the ways to form a
Gram matrix (in full, as the engine does, and symmetric) whose times the benchmark compares.
These are measurement aids beside the estimator, not part of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from gnuq_core.estimators.core import unique_params
from gnuq_core.estimators.hooks import hooked_sq_norms
from gnuq_core.estimators.norm_rules import LINEAR, choose_rules, rule_for, rule_hooks
from gnuq_core.lm.anatomy import decoder_of, device_of, logit_transform, upcast

__all__ = ["GRAM_BLOCKS", "activation_backward", "ghost_layers_of", "ruled_modules", "gram_products", "gram_widths",
           "linear_input_groups", "norm_multiply_adds"]


def ruled_modules(model: Any, rows: int) -> dict[torch.nn.Module, list[tuple[int, str]]]:
    """The modules whose norms the gradient pass over all parameters takes by their norm rule
    for a sequence of ``rows`` tokens (``ghost="auto"``): the gradient pass's own choice
    (`gnuq_core.estimators.norm_rules.choose_rules`), over every parameter but the embedding
    and the head, which it handles apart."""
    params, _ = unique_params(model)
    head = model.get_output_embeddings()
    apart = {id(model.get_input_embeddings().weight), id(head.weight), id(getattr(head, "bias", None))}
    return choose_rules(model, [k for k in params if k not in apart], rows, "auto")[0]


def ghost_layers_of(model: Any, rows: int) -> dict[int, torch.nn.Module]:
    """The linear layers of `ruled_modules` (their ghost norms' Gram matrices), by ``id`` of the weight."""
    return {id(m.weight): m for m in ruled_modules(model, rows) if rule_for(m) is LINEAR}


def activation_backward(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int], *,
                        with_grams: bool = False) -> float:
    """log p of the answer, with one backward pass into the activations only: the floor.

    Every exact ``‖∇θ log p‖²`` needs the gradient of log p at every layer's output, so one
    forward with autograd and one backward through all layers (LM head at the answer
    positions only, as in `gnuq_core.lm.gradient.forward_backward`) is the least it can cost.
    No parameter requires grad here (`gnuq_core.estimators.hooks.hooked_sq_norms` with
    nothing selected; flags and ``.grad`` restored on return), so no weight-gradient product
    and no norm is computed: what the gradient pass costs beyond this is what its norms cost.

    With ``with_grams=True`` the pass also runs the norm rules of the modules the gradient pass
    takes them for (`ruled_modules`, `gnuq_core.estimators.norm_rules.rule_hooks`: the ghost
    norms' Gram matrices) exactly as the gradient pass does, and nothing else: the floor of the gradient pass's
    own algorithm, so the benchmark can split what the pass costs above the floor into the
    Gram products and the rest (hooks, bookkeeping, the embedding and head pieces).
    """
    ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=device_of(model))
    n_p = len(prompt_ids)
    params, _ = unique_params(model)
    ruled = ruled_modules(model, ids.shape[1]) if with_grams else {}
    with hooked_sq_norms(params, selected=()), rule_hooks(ruled, torch.ones_like(ids)), torch.enable_grad():
        with torch.no_grad():
            emb = model.get_input_embeddings()(ids)
        emb.requires_grad_(True)
        h = decoder_of(model)(inputs_embeds=emb, use_cache=False).last_hidden_state[0, n_p - 1:-1]
        z = upcast(logit_transform(model, model.get_output_embeddings()(h)))
        log_p = torch.log_softmax(z, -1).gather(1, ids[0, n_p:, None]).sum()
        log_p.backward()
    return float(log_p.detach())


def linear_input_groups(model: Any) -> list[list[torch.nn.Linear]]:
    """The decoder's ``nn.Linear`` layers in call order, grouped by the input tensor they are
    called on one after the other (q/k/v, gate/up): the layers whose ghost norms share one
    input Gram matrix in `gnuq_core.estimators.norm_rules.rule_hooks`. Found by one
    no-grad forward of two tokens with forward hooks."""
    calls: list[tuple[torch.Tensor, torch.nn.Linear]] = []  # the inputs are kept: their ids stay unique
    handles = [m.register_forward_hook(lambda mod, inputs, _out: calls.append((inputs[0], mod)))
               for m in decoder_of(model).modules() if isinstance(m, torch.nn.Linear)]
    try:
        with torch.no_grad():
            decoder_of(model)(input_ids=torch.zeros((1, 2), dtype=torch.long, device=device_of(model)),
                              use_cache=False)
    finally:
        for h in handles:
            h.remove()
    groups: list[tuple[torch.Tensor, list[torch.nn.Linear]]] = []
    for x, mod in calls:
        if groups and groups[-1][0] is x:
            groups[-1][1].append(mod)
        else:
            groups.append((x, [mod]))
    return [mods for _, mods in groups]


def gram_widths(model: Any, rows: int, *, groups: list[list[torch.nn.Linear]] | None = None) -> Counter[int]:
    """``{width: how many}`` of the T×T Gram matrices the gradient pass forms for a sequence
    of ``rows`` tokens: one of the input per group of layers sharing it (`linear_input_groups`)
    with a layer taken the ghost way, one of the output gradient per such layer (the
    embedding and head pieces, A×A, apart)."""
    ghosted = ghost_layers_of(model, rows)
    widths: Counter[int] = Counter()
    for mods in groups if groups is not None else linear_input_groups(model):
        if any(id(m.weight) in ghosted for m in mods):
            widths[mods[0].in_features] += 1  # one input Gram for the whole group
        widths.update(m.out_features for m in mods if id(m.weight) in ghosted)
    return widths


GRAM_BLOCKS = (2, 3, 4)
"""Row-block counts of the lower-triangular Gram products (`gram_products`)."""


def _triangle_in_blocks(b: int) -> Callable[[torch.Tensor], list[torch.Tensor]]:
    def gram(x: torch.Tensor) -> list[torch.Tensor]:
        ends = [round(len(x) * (i + 1) / b) for i in range(b)]
        starts = [0, *ends[:-1]]
        return [x[s:e] @ x[:e].T for s, e in zip(starts, ends)]

    return gram


def _syrk(x: torch.Tensor) -> Any:
    from scipy.linalg import blas

    a = x.numpy()
    return (blas.dsyrk if a.dtype == np.float64 else blas.ssyrk)(1.0, a)


def gram_products(device: str, threads: int = 1) -> dict[str, tuple[Callable[[torch.Tensor], Any], float]]:
    """Ways to form the Gram matrix ``X Xᵀ`` of T×d rows: ``{name: (kernel, its multiply-adds ÷
    the full product's)}`` (timed side by side by `gnuq_core.bench.grams`).

    ``full``: ``x @ x.T``, as the linear layers' norm rule (`gnuq_core.estimators.norm_rules.LINEAR`) forms it.
    ``blocks<b>``: the lower triangle in ``b`` row blocks, each block times the rows up to
    its end, ``(b + 1) / 2b`` of the multiply-adds. ``syrk``: BLAS ``?syrk`` through SciPy,
    the upper triangle, half of them; only on the CPU with torch on one thread (with more,
    SciPy's OpenBLAS threads keep spinning after each call and take the cores from torch's:
    every other product ran up to ten times slower here).
    """
    out: dict[str, tuple[Callable[[torch.Tensor], Any], float]] = {"full": (lambda x: x @ x.T, 1.0)}
    out.update({f"blocks{b}": (_triangle_in_blocks(b), (b + 1) / (2 * b)) for b in GRAM_BLOCKS})
    if device == "cpu" and threads == 1:
        out["syrk"] = (_syrk, 0.5)
    return out


def norm_multiply_adds(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int], *,
                       groups: list[list[torch.nn.Linear]] | None = None) -> dict[str, int]:
    """Multiply-adds in the matrix products of one answer's passes, counted from the shapes.

    ``forward``: one no-grad forward as `gnuq_core.lm.gradient.answer_log_probs` runs it
    (every linear layer over the T = prompt + answer rows, the attention scores and the
    weighted values in full, the LM head over the A answer rows). ``norm``: what the gradient
    pass over all parameters multiplies beyond its floor (`activation_backward`): the ghost
    norms' Gram matrices (one T×T product per shared input, one per output gradient), the
    explicit weight gradients of the layers it does not take the ghost way, and the LM-head
    and embedding pieces (two A×A Gram matrices; with a tied head, the cross term).
    ``norm_symmetric``: the same if every Gram matrix were formed as a symmetric product
    (its upper triangle only), the least an exact Gram-matrix norm can multiply.
    Elementwise work (norm weights, softmax) is not counted. ``groups``: from
    `linear_input_groups` (computed here when omitted).
    """
    t, a = len(prompt_ids) + len(answer_ids), len(answer_ids)
    groups = groups if groups is not None else linear_input_groups(model)
    ghosted = ghost_layers_of(model, t)
    forward = plain = 0  # plain: products that a symmetric form would not halve (weight gradients, cross term)
    for mods in groups:
        for m in mods:
            forward += t * m.in_features * m.out_features
            if id(m.weight) not in ghosted:
                plain += t * m.in_features * m.out_features
    # summed widths of the T×T Gram matrices: each costs T² (symmetric: T(T+1)/2) per unit
    gram_width = sum(width * n for width, n in gram_widths(model, t, groups=groups).items())
    cfg = getattr(model, "config", None)
    heads = getattr(cfg, "num_attention_heads", 0) or 0
    head_dim = getattr(cfg, "head_dim", None) or (getattr(cfg, "hidden_size", 0) // heads if heads else 0)
    forward += getattr(cfg, "num_hidden_layers", 0) * 2 * t * t * heads * head_dim  # QKᵀ and PV
    head = model.get_output_embeddings()
    vocab, width = head.out_features, head.in_features
    forward += a * width * vocab
    head_width = vocab + width  # the head's A×A Gram matrices dz dzᵀ and H Hᵀ
    if head.weight is model.get_input_embeddings().weight:  # the tied cross term: dz[:, tokens]ᵀ H
        plain += len(set(prompt_ids) | set(answer_ids)) * a * width
    return {"forward": forward, "norm": t * t * gram_width + a * a * head_width + plain,
            "norm_symmetric": t * (t + 1) // 2 * gram_width + a * (a + 1) // 2 * head_width + plain}
