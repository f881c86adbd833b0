"""Squared gradient norms per parameter, gathered in hooks during one backward pass.

Both the generic estimator (`gnuq_core.estimators.torch_backend`) and the fast LLM scorer
(`gnuq_core.lm.scoring`) need the same bookkeeping: turn gradients on for the selected
parameters only, read ‖∂ log p/∂θ_k‖² the moment each gradient is accumulated, free it at
once (no parameter-sized buffers survive), and leave the model exactly as it was
(``requires_grad`` flags and any ``.grad`` the caller had).

The parameters whose norms need no gradient at all (ghost norms of linear layers, norm
weights, per answer of a batch) are `gnuq_core.estimators.norm_rules`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


def sq_norm(g: torch.Tensor) -> torch.Tensor:
    """``‖g‖²`` as a float64 scalar, accurate and without a float64 copy of ``g``.

    A float32 norm of a whole ~1M-entry gradient is off by ~1e-4 relative on CPU (measured
    on Gemma-3-270M against a float64 model); a float64 copy costs ~20% of the backward
    pass. So: float32 norms per row (a few thousand entries: error ~1e-7), their squares
    summed in float64. If the float32 squares could have underflowed (largest row norm
    below 1e-15) or overflowed (a non-finite row norm), the float64 path decides; the
    check reads the row norms only, not the gradient (an ``abs().max()`` over the whole
    gradient cost ~0.2 of a forward pass). 1-D tensors and float64 gradients take the
    float64 path; Apple GPUs (no float64) take float32 and convert.
    """
    if g.device.type == "mps":
        return torch.linalg.vector_norm(g.float()).cpu().double() ** 2
    if g.dim() < 2 or g.dtype == torch.float64 or g.numel() == 0:
        return torch.linalg.vector_norm(g, dtype=torch.float64) ** 2
    norms = torch.linalg.vector_norm(g.reshape(g.shape[0], -1), dim=1, dtype=torch.float32)
    top = float(norms.max())
    if not (1e-15 < top < math.inf):  # 0, tiny, huge or non-finite: let float64 decide
        return torch.linalg.vector_norm(g, dtype=torch.float64) ** 2
    return (norms.double() ** 2).sum()


@dataclass
class HookedNorms:
    """What :func:`hooked_sq_norms` gathers.

    Attributes
    ----------
    sq : dict[int, torch.Tensor]
        ``id(parameter)`` → float64 squared norm, summed over every accumulation.
    repeated : list[int]
        Parameters whose gradient was accumulated more than once in the block (reentrant
        gradient checkpointing does this; for one plain backward it stays empty).
    """

    sq: dict[int, torch.Tensor] = field(default_factory=dict)
    repeated: list[int] = field(default_factory=list)

    def floats(self) -> dict[int, float]:
        """The squared norms as Python floats."""
        return {k: float(v) for k, v in self.sq.items()}


@contextmanager
def hooked_sq_norms(params: Mapping[int, torch.nn.Parameter], selected: Collection[int]) -> Iterator[HookedNorms]:
    """Within the block, backward passes record ‖grad‖² of the ``selected`` parameters.

    Only selected parameters require grad inside the block; each gradient is read by a
    post-accumulate hook and freed. On exit the hooks are removed and every parameter's
    ``requires_grad`` and the selected ones' ``.grad`` are restored, also after an error.
    """
    chosen = set(selected)
    saved_flags = {k: p.requires_grad for k, p in params.items()}
    saved_grads = {k: params[k].grad for k in chosen}
    out = HookedNorms()
    handles = []

    def hook_for(k: int) -> Callable[[torch.Tensor], None]:
        def hook(p: torch.Tensor) -> None:
            g = sq_norm(p.grad.detach())
            if k in out.sq:
                out.repeated.append(k)
                out.sq[k] = out.sq[k] + g
            else:
                out.sq[k] = g
            p.grad = None  # free the buffer now

        return hook

    try:
        for k, p in params.items():
            p.requires_grad_(k in chosen)
        for k in chosen:
            params[k].grad = None
            handles.append(params[k].register_post_accumulate_grad_hook(hook_for(k)))
        yield out
    finally:
        for h in handles:
            h.remove()
        for k, p in params.items():
            p.requires_grad_(saved_flags[k])
        for k, g in saved_grads.items():
            params[k].grad = g


def raise_if_non_finite(sq: Mapping[int, float], selected: Collection[int], names: Mapping[int, list[str]],
                        members: Mapping[str, Collection[int]] | None, hint: str) -> None:
    """Raise ``FloatingPointError`` naming the first parameter (and its groups) with a NaN/inf norm."""
    for k in selected:
        v = sq.get(k, 0.0)
        if not math.isfinite(v):
            where = [g for g, m in (members or {}).items() if k in m]
            grp = f" (group {', '.join(map(repr, where))})" if where else ""
            raise FloatingPointError(f"non-finite gradient of log p (||grad||^2 = {v}) in parameter "
                                     f"{names[k][0]!r}{grp}; {hint}")
