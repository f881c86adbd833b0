"""Squared gradient norms per parameter, gathered in hooks during one backward pass.

Both the generic estimator (`gnuq_core.estimators.torch_backend`) and the fast LLM scorer
(`gnuq_core.lm.scoring`) need the same bookkeeping: turn gradients on for the selected
parameters only, read ‖∂ log p/∂θ_k‖² the moment each gradient is accumulated, free it at
once (no parameter-sized buffers survive), and leave the model exactly as it was
(``requires_grad`` flags and any ``.grad`` the caller had).

`ghost_linear_sq_norms` does the same for ``nn.Linear`` weights without forming their
gradients at all (exact ghost norms, from the layer's inputs and output gradients); the
caller chooses per layer with `ghost_cost_prefers`.
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


def _at_least_float32(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def ghost_cost_prefers(rows: int, layer: torch.nn.Linear) -> bool:
    """True if the ghost norm of ``layer``'s weight is cheaper than its explicit gradient.

    With ``rows`` = T input rows, d inputs and k outputs the ghost norm costs T²(d + k)
    (two Gram matrices) and the explicit weight gradient T·d·k: ghost while
    T < d·k / (d + k).
    """
    d, k = layer.in_features, layer.out_features
    return rows * (d + k) < d * k


@contextmanager
def ghost_linear_sq_norms(layers: Mapping[int, torch.nn.Linear]) -> Iterator[HookedNorms]:
    """Within the block, backward passes record ‖∂/∂W‖² of each ``nn.Linear`` weight W exactly,
    without ever forming the weight gradient ("ghost norms").

    For a layer with input rows X (T×d) and output gradient G (T×k) the weight gradient is
    GᵀX, and ``‖GᵀX‖²_F = ⟨XXᵀ, GGᵀ⟩``. A forward hook computes the Gram matrix XXᵀ (consecutive
    calls on the same input tensor share it: q/k/v, gate/up); a hook on the layer's output
    tensor computes GGᵀ when its gradient arrives, and the inner product is summed in float64.
    The Gram matrices and their elementwise product are formed in the layer's dtype, at least
    float32 (a float32 model: relative error ~1e-7).
    Inside the block the weights do not require grad, so autograd skips the weight-gradient
    GEMMs; biases are left to the caller (plain autograd). On exit the hooks are removed and
    the ``requires_grad`` flags restored, also after an error.

    Parameters
    ----------
    layers : mapping ``id(weight)`` → ``nn.Linear``
        Each weight must belong to exactly one module that is called once per forward pass
        (a second call raises ``RuntimeError``: its cross terms would be missed).
    """
    out = HookedNorms()
    saved = {k: m.weight.requires_grad for k, m in layers.items()}
    last: list[tuple[torch.Tensor, torch.Tensor]] = []  # (input, XXᵀ) of the latest input
    calls: dict[int, int] = {}
    handles = []

    def x_gram(x: torch.Tensor) -> torch.Tensor:
        if last and last[0][0] is x:  # q/k/v, gate/up: consecutive calls on one input
            return last[0][1]
        x2 = _at_least_float32(x.detach().reshape(-1, x.shape[-1]))
        gram = x2 @ x2.T
        last[:] = [(x, gram)]
        return gram

    def hook_for(k: int) -> Callable[..., torch.Tensor | None]:
        def forward_hook(mod: torch.nn.Module, inputs: tuple[torch.Tensor, ...], y: torch.Tensor) -> torch.Tensor | None:
            if not torch.is_grad_enabled():
                return None
            calls[k] = calls.get(k, 0) + 1
            if calls[k] > 1:
                raise RuntimeError(f"ghost norms: the layer {type(mod).__name__} with weight {tuple(mod.weight.shape)} "
                                   "was called twice in one pass; compute its norm the explicit way")
            gram_x = x_gram(inputs[0])
            if not y.requires_grad:  # nothing upstream needs a gradient: make y the leaf
                y = y.detach().requires_grad_(True)

            def grad_hook(g: torch.Tensor) -> None:
                g2 = _at_least_float32(g.detach().reshape(-1, g.shape[-1]))
                v = (gram_x * (g2 @ g2.T)).sum(dtype=torch.float64)
                out.sq[k] = out.sq[k] + v if k in out.sq else v

            y.register_hook(grad_hook)
            return y

        return forward_hook

    try:
        for k, m in layers.items():
            m.weight.requires_grad_(False)
            handles.append(m.register_forward_hook(hook_for(k)))
        yield out
    finally:
        for h in handles:
            h.remove()
        for k, m in layers.items():
            m.weight.requires_grad_(saved[k])
        last.clear()


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
