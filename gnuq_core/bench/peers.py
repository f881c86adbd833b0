"""Per-answer squared gradient norms by the libraries people use for per-example norms.

gnuq's batched pass (`gnuq_core.lm.batched.batched_forward_backward`) gives, for B answers
in one forward–backward pass, each answer's ``‖∇θ Σ_t log p_t‖²``: a per-example gradient
norm problem over the *summed* answer log-probability (``‖∇θ p‖² = p²`` times it). The same
numbers from its peers, on the same right-padded batch:

- `torch_func_norms`: ``torch.func.grad`` of one answer's summed log-probability, the plain
  per-example gradient (instantiated, one answer at a time: ``vmap`` cannot run a
  transformers decoder, whose attention mask is built with data-dependent control flow);
- `opacus_norms`: Opacus's ``GradSampleModule`` (per-sample gradients instantiated by its
  per-layer rules) or, with ``ghost=True``, ``GradSampleModuleFastGradientClipping`` (ghost
  norms, two backward passes; Opacus refuses tied parameters there, such as a head tied to
  the input embedding);
- `floor_pass`: one forward and one backward of the summed log-probabilities, no norm at
  all: what any per-answer norm costs at least.

Opacus hooks record activations only in train mode, so its passes run the model in train
mode with every dropout at zero (numbers equal to eval mode) and give the mode back.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from gnuq_core.lm.anatomy import decoder_of, logit_transform, upcast

__all__ = ["Batch", "padded_batch", "answer_log_probs", "floor_pass", "torch_func_norms", "opacus_norms"]


@dataclass(frozen=True)
class Batch:
    """B (prompt, answer) pairs right-padded into one batch.

    Attributes
    ----------
    ids : torch.Tensor
        (B, T) token ids, padded with ``pad_id``.
    mask : torch.Tensor
        (B, T) 1 at real positions.
    targets : torch.Tensor
        (B, T) 1 at the positions whose *next* token is an answer token.
    """

    ids: torch.Tensor
    mask: torch.Tensor
    targets: torch.Tensor

    @property
    def size(self) -> int:
        return int(self.ids.shape[0])


def padded_batch(prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]], pad_id: int = 0) -> Batch:
    """The pairs as one right-padded `Batch` (each answer non-empty)."""
    if len(prompts) != len(answers) or not prompts:
        raise ValueError(f"give as many answers as prompts, at least one ({len(prompts)} prompts, "
                         f"{len(answers)} answers)")
    if any(not a for a in answers) or any(not p for p in prompts):
        raise ValueError("every prompt and every answer needs at least one token")
    rows = [list(p) + list(a) for p, a in zip(prompts, answers)]
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    targets = torch.zeros((len(rows), width), dtype=torch.long)
    for b, (row, p) in enumerate(zip(rows, prompts)):
        ids[b, :len(row)] = torch.tensor(row)
        mask[b, :len(row)] = 1
        targets[b, len(p) - 1:len(row) - 1] = 1  # position t predicts token t + 1
    return Batch(ids, mask, targets)


def _positions(batch: Batch) -> torch.Tensor:
    """(B, T) position ids, one row per answer: a position embedding then sees the batch (GPT-2
    builds one (1, T) row shared by all answers, which per-sample rules read as one sample)."""
    return torch.arange(batch.ids.shape[1]).expand_as(batch.ids).contiguous()


def answer_log_probs(model: Any, batch: Batch) -> torch.Tensor:
    """(B,) each answer's summed token log-probability under ``model`` (one batched forward).

    The head runs only at the positions that predict an answer token, as in gnuq's own pass:
    the decoder's last hidden states there are gathered into a (B, A, d) batch (A the longest
    answer), so every method's head stays a per-sample layer and none pays for B × T × V
    logits (Gemma's 262,144-word vocabulary made those 20 GB at B = 64)."""
    inner = getattr(model, "_module", model)  # an Opacus wrapper: its hooks sit on the modules themselves
    hidden = decoder_of(inner)(input_ids=batch.ids, attention_mask=batch.mask, position_ids=_positions(batch),
                               use_cache=False).last_hidden_state
    counts = batch.targets.sum(1)
    where = torch.argsort(-batch.targets, dim=1, stable=True)[:, :int(counts.max())]  # each row's answer positions
    valid = torch.arange(where.shape[1])[None, :] < counts[:, None]
    h = hidden.gather(1, where[..., None].expand(-1, -1, hidden.shape[-1]))
    logp = torch.log_softmax(upcast(logit_transform(inner, inner.get_output_embeddings()(h))), -1)
    nxt = batch.ids.gather(1, (where + 1).clamp(max=batch.ids.shape[1] - 1))
    return (logp.gather(-1, nxt[..., None])[..., 0] * valid).sum(1)


def floor_pass(model: Any, batch: Batch) -> torch.Tensor:
    """One forward and one backward pass of the batch's summed answer log-probabilities,
    computing no norm (the gradient of the sum goes to ``.grad``, cleared afterwards)."""
    params = [p for p in model.parameters() if p.requires_grad]
    log_p = answer_log_probs(model, batch)
    grads = torch.autograd.grad(log_p.sum(), params)
    del grads
    return log_p.detach()


def _trainable(model: Any) -> dict[str, torch.Tensor]:
    seen: set[int] = set()
    out = {}
    for name, p in model.named_parameters():
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            out[name] = p
    return out


class _SummedLogProb(torch.nn.Module):
    """``answer_log_probs(model, batch).sum()`` as a module, so ``torch.func.functional_call``
    can call it with substituted parameters (the head only at the answer's positions)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return answer_log_probs(self.model, Batch(ids, mask, targets)).sum()


def torch_func_norms(model: Any, batch: Batch) -> torch.Tensor:
    """(B,) ``‖∇θ log p_b‖²`` by ``torch.func.grad``, one answer at a time (its own padding cut)."""
    from torch.func import functional_call, grad

    params = {f"model.{k}": v.detach() for k, v in _trainable(model).items()}
    summed = _SummedLogProb(model)

    def log_p(theta: dict[str, torch.Tensor], row: Batch) -> torch.Tensor:
        return functional_call(summed, theta, args=(row.ids, row.mask, row.targets), tie_weights=True)

    norms = []
    for b in range(batch.size):
        n = int(batch.mask[b].sum())
        row = Batch(batch.ids[b:b + 1, :n], batch.mask[b:b + 1, :n], batch.targets[b:b + 1, :n])
        g = grad(log_p)(params, row)
        norms.append(sum(v.double().pow(2).sum() for v in g.values()))
    return torch.stack(norms)


@contextmanager
def _train_mode_without_dropout(model: Any) -> Iterator[None]:
    """Train mode (Opacus records activations only then) with every dropout at zero; restored after."""
    was_training = model.training
    dropouts = [(m, m.p) for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    configs = [(c, k, getattr(c, k)) for c in [getattr(model, "config", None)] if c is not None
               for k in ("attention_dropout", "attn_pdrop", "resid_pdrop", "embd_pdrop", "hidden_dropout",
                         "dropout") if isinstance(getattr(c, k, None), (int, float))]
    try:
        for m, _ in dropouts:
            m.p = 0.0
        for c, k, _ in configs:
            setattr(c, k, 0.0)
        model.train()
        yield
    finally:
        for m, p in dropouts:
            m.p = p
        for c, k, v in configs:
            setattr(c, k, v)
        model.train(was_training)


def opacus_norms(model: Any, batch: Batch, ghost: bool = False) -> torch.Tensor:
    """(B,) ``‖∇θ log p_b‖²`` by Opacus (1.6): per-sample gradients (``GradSampleModule``) or,
    with ``ghost``, ghost norms (``GradSampleModuleFastGradientClipping``, two backward passes).

    The model is wrapped for the call and unwrapped after (its hooks removed, ``.grad`` and
    ``grad_sample`` cleared)."""
    from opacus import GradSampleModule
    from opacus.grad_sample import GradSampleModuleFastGradientClipping

    params = list(_trainable(model).values())
    with _train_mode_without_dropout(model), warnings.catch_warnings():
        # Opacus's full backward hooks fire on module outputs when the inputs (token ids) need no gradient
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        wrapped = None
        try:
            if ghost:
                wrapped = GradSampleModuleFastGradientClipping(model, max_grad_norm=1e30, use_ghost_clipping=True,
                                                               loss_reduction="sum")
            else:
                wrapped = GradSampleModule(model, strict=False, loss_reduction="sum")
            log_p = answer_log_probs(wrapped, batch)
            if ghost:
                wrapped.enable_hooks()
                log_p.sum().backward(retain_graph=True)
                norms = wrapped.get_norm_sample().detach().double() ** 2
            else:
                log_p.sum().backward()
                norms = sum(p.grad_sample.detach().double().flatten(1).pow(2).sum(1) for p in params)
        finally:  # also after a refusal half-way through wrapping: the model keeps no hook
            if wrapped is not None:
                wrapped._close()
            for hook in getattr(model, "autograd_grad_sample_hooks", []):
                hook.remove()
            if hasattr(model, "autograd_grad_sample_hooks"):
                del model.autograd_grad_sample_hooks
            for p in params:
                p.grad = None
                for attr in ("grad_sample", "_forward_counter", "_current_grad_sample"):
                    if hasattr(p, attr):
                        delattr(p, attr)
    return norms
