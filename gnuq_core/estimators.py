"""Gradient-norm uncertainty for one prediction, in PyTorch and in JAX.

For a prediction p = p(y|x, theta) at the point estimate theta*:

    epistemic = ||grad_theta p||^2          (delta method + isotropic Cov[theta] = s^2 I)
    aleatoric = p (1 - p)                   (Bernoulli variance of the point prediction)
    combined  = epistemic + aleatoric       (the paper sums the two variance terms,
                                             as in the law of total variance)

An LLM answer has p = prod_t p(y_t | y_<t, x), which underflows float32 for long
answers (log p = -200 gives p = 0). Since grad p = p grad log p,

    ||grad p||^2 = p^2 ||grad log p||^2
    log10 ||grad p||^2 = 2 log p / ln 10 + log10 ||grad log p||^2

so everything is computed from log p and ||grad log p||^2, and the log10 fields stay
finite even when p or the epistemic term underflow to 0.0. aleatoric uses
p (1 - p) = p * (-expm1(log p)), which keeps its precision near p = 1.

PyTorch: `torch_uncertainty` runs one backward pass; a per-parameter
post-accumulate-grad hook adds ||grad||^2 in float64 and frees `.grad` at once, so no
parameter-sized gradient buffers are kept. JAX: `jax_uncertainty` vmaps
`value_and_grad` over a batch of inputs under `jit`. `from_log_p_and_grad_sq` is the
pure log-space arithmetic that both use.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import torch

__all__ = [
    "Uncertainty",
    "JaxUncertainty",
    "from_log_p_and_grad_sq",
    "torch_uncertainty",
    "jax_uncertainty",
    "jax_grad_sq_norm",
]

LN10 = math.log(10.0)
# log p in (0, LOG_P_TOL] is treated as rounding error of a p that is 1 and clamped to 0.
LOG_P_TOL = 1e-6
_FIX_HINT = (
    "check the inputs for NaN/inf, and run the model in float32 or float64 rather than "
    "float16/bfloat16 (overflow in half precision is the usual cause)"
)

GroupSpec = Sequence[str] | Callable[[str], bool]


class Uncertainty(NamedTuple):
    """Uncertainty of one prediction p = p(y|x, theta*).

    Attributes
    ----------
    log_p : float
        Natural log of the prediction p.
    p : float
        ``exp(log_p)``; may be 0.0 by underflow, the log fields stay exact.
    log10_grad_log_p_sq : float
        ``log10 ||grad_theta log p||^2`` (``-inf`` if the gradient is exactly zero).
    log10_epistemic : float
        ``log10 ||grad_theta p||^2 = 2 log10 p + log10 ||grad_theta log p||^2``.
    epistemic : float
        ``||grad_theta p||^2`` (may underflow to 0.0; use `log10_epistemic`).
    aleatoric : float
        ``p (1 - p)``.
    combined : float
        ``epistemic + aleatoric``: the paper sums the two variance terms (law of total
        variance: Var[y] = E[Var[y|theta]] + Var[E[y|theta]]).
    group_sq_norms : dict[str, float]
        ``||grad_{theta_group} log p||^2`` per requested group; ``{}`` unless
        ``per_group=True``.
    """

    log_p: float
    p: float
    log10_grad_log_p_sq: float
    log10_epistemic: float
    epistemic: float
    aleatoric: float
    combined: float
    group_sq_norms: dict[str, float]


class JaxUncertainty(NamedTuple):
    """Batched uncertainty from `jax_uncertainty`: one entry per input, arrays of shape (n,).

    Attributes
    ----------
    log_p : jax.Array
        Natural log of each prediction p.
    p : jax.Array
        ``exp(log_p)`` (may underflow to 0).
    log10_grad_log_p_sq : jax.Array
        ``log10 ||grad_theta log p||^2`` (``-inf`` where the gradient is zero).
    log10_epistemic : jax.Array
        ``2 log10 p + log10 ||grad_theta log p||^2``.
    epistemic : jax.Array
        ``||grad_theta p||^2`` (may underflow to 0).
    aleatoric : jax.Array
        ``p (1 - p)``.
    combined : jax.Array
        ``epistemic + aleatoric`` (sum of the two variance terms).
    """

    log_p: jax.Array
    p: jax.Array
    log10_grad_log_p_sq: jax.Array
    log10_epistemic: jax.Array
    epistemic: jax.Array
    aleatoric: jax.Array
    combined: jax.Array


# --------------------------------------------------------------------------- log space


def from_log_p_and_grad_sq(
    log_p: float,
    grad_log_p_sq: float,
    group_sq_norms: Mapping[str, float] | None = None,
) -> Uncertainty:
    """Build an `Uncertainty` from log p and ||grad log p||^2 (pure log-space arithmetic).

    Parameters
    ----------
    log_p : float
        Natural log of the prediction, ``<= 0`` (``-inf`` allowed: p = 0).
    grad_log_p_sq : float
        ``||grad_theta log p||^2 >= 0``; 0 gives ``log10_grad_log_p_sq = -inf``.
    group_sq_norms : Mapping[str, float], optional
        Per-group ``||grad log p||^2``, copied into the result.

    Returns
    -------
    Uncertainty

    Raises
    ------
    FloatingPointError
        If `log_p` or `grad_log_p_sq` is NaN or `grad_log_p_sq` is infinite.
    ValueError
        If ``log_p > 0`` (p > 1) or ``grad_log_p_sq < 0``.
    """
    log_p = float(log_p)
    g = float(grad_log_p_sq)
    if math.isnan(log_p):
        raise FloatingPointError(f"log p is NaN; {_FIX_HINT}")
    if log_p > LOG_P_TOL:
        raise ValueError(
            f"log p = {log_p:.6g} > 0, i.e. p > 1: pass the natural log of a probability "
            "(e.g. a sum of log_softmax values), not a logit or a log-density"
        )
    log_p = min(log_p, 0.0)
    if math.isnan(g) or math.isinf(g):
        raise FloatingPointError(f"||grad log p||^2 = {g}; {_FIX_HINT}")
    if g < 0:
        raise ValueError(f"||grad log p||^2 = {g:.6g} < 0: a squared norm cannot be negative")
    log10_g = math.log10(g) if g > 0 else -math.inf
    log10_epi = 2.0 * log_p / LN10 + log10_g
    epistemic = 10.0**log10_epi if log10_epi > -math.inf else 0.0
    p = math.exp(log_p)
    aleatoric = p * -math.expm1(log_p)
    return Uncertainty(
        log_p=log_p,
        p=p,
        log10_grad_log_p_sq=log10_g,
        log10_epistemic=log10_epi,
        epistemic=epistemic,
        aleatoric=aleatoric,
        combined=epistemic + aleatoric,
        group_sq_norms=dict(group_sq_norms or {}),
    )


# --------------------------------------------------------------------------- PyTorch


def _matches(spec: GroupSpec, name: str) -> bool:
    if callable(spec):
        return bool(spec(name))
    prefixes = [spec] if isinstance(spec, str) else list(spec)
    for pre in prefixes:
        if name == pre or name.startswith(pre if pre.endswith(".") else pre + "."):
            return True
    return False


def torch_uncertainty(
    model: torch.nn.Module,
    log_prob_fn: Callable[[torch.nn.Module], torch.Tensor],
    *,
    groups: Mapping[str, GroupSpec] | None = None,
    per_group: bool = False,
) -> Uncertainty:
    """Epistemic, aleatoric and combined uncertainty of one prediction, one backward pass.

    Parameters
    ----------
    model : torch.nn.Module
        The model at its point estimate theta*. Call ``model.eval()`` first if it has
        dropout. Parameters are not changed; ``requires_grad`` flags and any existing
        ``.grad`` are restored on return.
    log_prob_fn : Callable[[torch.nn.Module], torch.Tensor]
        ``log_prob_fn(model)`` returns the scalar natural log p(y|x, theta) (e.g. the sum
        of the answer tokens' log_softmax values). Input tensors should not require
        grad (if they do, backward accumulates their ``.grad`` as usual).
    groups : Mapping[str, Sequence[str] | Callable[[str], bool]], optional
        Group name -> parameter-name prefixes or a predicate on the parameter name. A
        prefix matches a name it equals or that continues it after a dot
        (``"layers.1"`` matches ``"layers.1.w"``, not ``"layers.10.w"``). When given, the
        epistemic term uses only parameters in the union of the groups (each counted
        once); the other parameters get ``requires_grad=False`` during the pass.
    per_group : bool
        If True, fill ``group_sq_norms`` with ``||grad log p||^2`` per group (a tied or
        shared parameter counts in every group it matches, so the per-group values sum
        to the total only for disjoint groups). Without `groups` there is one group,
        ``"all"``.

    Returns
    -------
    Uncertainty

    Raises
    ------
    ValueError
        If a group matches no parameter, nothing requires a gradient, or log p > 0.
    FloatingPointError
        If log p or a gradient is NaN/inf (names the parameter and group).
    RuntimeError
        If a parameter's gradient is accumulated twice in the pass (reentrant gradient
        checkpointing with a parameter shared across segments): the per-piece squares
        would not add up to the squared norm; use ``use_reentrant=False``.
    """
    named = list(model.named_parameters(remove_duplicate=False))
    if not named:
        raise ValueError("model has no parameters")
    # Unique tensors (tied weights appear under several names), in registration order.
    params: dict[int, torch.nn.Parameter] = {}
    names: dict[int, list[str]] = {}
    for n, prm in named:
        params.setdefault(id(prm), prm)
        names.setdefault(id(prm), []).append(n)

    if groups is None:
        group_members = {"all": {k for k, prm in params.items() if prm.is_floating_point()}}
    else:
        group_members: dict[str, set[int]] = {}
        for gname, spec in groups.items():
            members = {k for k in params if any(_matches(spec, n) for n in names[k])}
            if not members:
                avail = [n for n, _ in named[:8]]
                more = f", ... ({len(named)} in all)" if len(named) > 8 else ""
                raise ValueError(
                    f"group {gname!r} matches no parameter of the model; parameter names "
                    f"look like: {', '.join(avail)}{more}"
                )
            group_members[gname] = members
    union = set().union(*group_members.values())
    selected = [k for k in params if k in union and params[k].is_floating_point()]
    if not selected:
        raise ValueError("no floating-point parameter selected: nothing to differentiate")
    sel_set = set(selected)

    saved_flags = {k: prm.requires_grad for k, prm in params.items()}
    saved_grads = {k: params[k].grad for k in selected}
    sq: dict[int, torch.Tensor] = {}
    fired_twice: list[int] = []
    handles = []

    def make_hook(k: int) -> Callable[[torch.Tensor], None]:
        def hook(prm: torch.Tensor) -> None:
            if k in sq:
                fired_twice.append(k)
            g = prm.grad.detach()
            if g.device.type == "mps":  # Apple GPUs have no float64
                norm = torch.linalg.vector_norm(g.float()).cpu().double()
            else:
                norm = torch.linalg.vector_norm(g, dtype=torch.float64)
            sq[k] = norm**2
            prm.grad = None  # free the buffer now

        return hook

    try:
        for k, prm in params.items():
            prm.requires_grad_(k in sel_set)
        for k in selected:
            params[k].grad = None
            handles.append(params[k].register_post_accumulate_grad_hook(make_hook(k)))
        with torch.enable_grad():
            log_p_t = log_prob_fn(model)
            if not isinstance(log_p_t, torch.Tensor) or log_p_t.numel() != 1:
                raise ValueError("log_prob_fn(model) must return a scalar tensor (log p)")
            log_p_t = log_p_t.reshape(())
            log_p = float(log_p_t.detach())
            if not math.isfinite(log_p):
                raise FloatingPointError(f"log p = {log_p} from log_prob_fn; {_FIX_HINT}")
            if log_p > LOG_P_TOL:
                from_log_p_and_grad_sq(log_p, 0.0)  # raises the ValueError
            if not log_p_t.requires_grad:
                raise ValueError(
                    "log p does not depend on the selected parameters (no grad_fn): do not "
                    "detach or compute it under torch.no_grad(), and check `groups`"
                )
            # Plain backward, not inputs=[...]: reentrant gradient checkpointing only
            # reaches the parameters through a nested backward that inputs= would prune.
            log_p_t.backward()
        if fired_twice:
            n = names[next(k for k in params if k in fired_twice)][0]
            raise RuntimeError(
                f"gradient of parameter {n!r} was accumulated more than once in one backward "
                "pass (reentrant gradient checkpointing?); use use_reentrant=False"
            )
        sq_f = {k: float(t) for k, t in sq.items()}  # unused parameters stay absent: 0
    finally:
        for h in handles:
            h.remove()
        for k, prm in params.items():
            prm.requires_grad_(saved_flags[k])
        for k, g in saved_grads.items():
            params[k].grad = g

    for k in selected:
        v = sq_f.get(k, 0.0)
        if not math.isfinite(v):
            where = [g for g, m in group_members.items() if k in m]
            grp = f" (group {', '.join(map(repr, where))})" if groups is not None else ""
            raise FloatingPointError(
                f"non-finite gradient of log p (||grad||^2 = {v}) in parameter "
                f"{names[k][0]!r}{grp}; {_FIX_HINT}"
            )
    total = math.fsum(sq_f.get(k, 0.0) for k in selected)
    per = (
        {g: math.fsum(sq_f.get(k, 0.0) for k in m) for g, m in group_members.items()}
        if per_group
        else None
    )
    return from_log_p_and_grad_sq(log_p, total, per)


# --------------------------------------------------------------------------- JAX


def _scaled_sq(tree: Any) -> tuple[jax.Array, jax.Array]:
    """(m, s) with ||tree||^2 = m^2 s, m = max |entry|: the squares neither under- nor overflow."""
    leaves = [jnp.ravel(x) for x in jax.tree_util.tree_leaves(tree) if jnp.size(x)]
    m = jnp.max(jnp.stack([jnp.max(jnp.abs(x)) for x in leaves]))
    safe = jnp.where(m > 0, m, jnp.ones_like(m))
    s = sum(jnp.sum(jnp.square(x / safe)) for x in leaves)
    return m, s


def _log10_sq_norm(tree: Any) -> jax.Array:
    m, s = _scaled_sq(tree)
    return jnp.where(m > 0, 2 * jnp.log10(jnp.where(m > 0, m, 1)) + jnp.log10(s), -jnp.inf)


def _leaf_finite(tree: Any) -> jax.Array:
    return jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(tree)])


@partial(jax.jit, static_argnums=0)
def _jax_uncertainty(
    fn: Callable, params: Any, xs: Any
) -> tuple[JaxUncertainty, jax.Array, jax.Array]:
    def one(x: Any) -> tuple:
        log_p, g = jax.value_and_grad(fn)(params, x)
        return log_p, _log10_sq_norm(g), _leaf_finite(g)

    raw_log_p, log10_g, finite = jax.vmap(one)(xs)
    log_p = jnp.minimum(raw_log_p, 0)  # values above LOG_P_TOL are rejected on the host
    log10_epi = 2 * log_p / jnp.log(10.0).astype(log_p.dtype) + log10_g
    epistemic = jnp.power(jnp.asarray(10, log10_epi.dtype), log10_epi)
    p = jnp.exp(log_p)
    aleatoric = p * -jnp.expm1(log_p)
    out = JaxUncertainty(log_p, p, log10_g, log10_epi, epistemic, aleatoric, epistemic + aleatoric)
    return out, raw_log_p, finite


def _is_tracer(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


def jax_uncertainty(
    log_prob_fn: Callable[[Any, Any], jax.Array], params: Any, xs: Any
) -> JaxUncertainty:
    """Batched gradient-norm uncertainty in JAX: one value-and-grad per input, vmapped.

    Parameters
    ----------
    log_prob_fn : Callable[[Params, X], jax.Array]
        Pure function ``log_prob_fn(params, x)`` returning the scalar natural log p for
        one input. Used as a static `jit` argument: pass the same function object across
        calls to avoid retracing.
    params : Params
        Pytree of parameters at theta*; their dtype (float32 or float64) is kept.
    xs : X
        Array or pytree of arrays; the leading axis indexes the inputs.

    Returns
    -------
    JaxUncertainty
        Arrays of shape ``(n,)``.

    Raises
    ------
    FloatingPointError
        If log p or a gradient is NaN/inf (names the input index and parameter leaf).
    ValueError
        If some log p > 0.

    Notes
    -----
    The checks run on the host after the computation; they are skipped when the
    function is itself traced (called inside `jit`/`vmap`).
    """
    out, raw_log_p, finite = _jax_uncertainty(log_prob_fn, params, xs)
    if _is_tracer(out.log_p):
        return out
    log_p = np.asarray(raw_log_p)
    fin = np.asarray(finite)
    bad = np.flatnonzero(~np.isfinite(log_p))
    if bad.size:
        raise FloatingPointError(f"log p is {log_p[bad[0]]} for input {bad[0]}; {_FIX_HINT}")
    pos = np.flatnonzero(log_p > LOG_P_TOL)
    if pos.size:
        raise ValueError(
            f"log p = {log_p[pos[0]]:.6g} > 0 (p > 1) for input {pos[0]}: log_prob_fn must "
            "return the natural log of a probability, not a logit or a log-density"
        )
    if not fin.all():
        i, j = np.argwhere(~fin)[0]
        path = jax.tree_util.tree_flatten_with_path(params)[0][j][0]
        raise FloatingPointError(
            f"non-finite gradient of log p for input {i} in parameter leaf "
            f"{jax.tree_util.keystr(path) or '<root>'}; {_FIX_HINT}"
        )
    return out


@partial(jax.jit, static_argnums=0)
def _jax_grad_sq_norm(f: Callable, params: Any, xs: Any) -> jax.Array:
    def one(x: Any) -> jax.Array:
        m, s = _scaled_sq(jax.grad(f)(params, x))
        return jnp.square(m) * s

    return jax.vmap(one)(xs)


def jax_grad_sq_norm(f: Callable[[Any, Any], jax.Array], params: Any, xs: Any) -> jax.Array:
    """``||grad_theta f(params, x)||^2`` for each input x (plain, not log space), vmapped.

    Parameters
    ----------
    f : Callable[[Params, X], jax.Array]
        Pure scalar function of the parameters and one input (e.g. a logit, or the mean
        of a regression model).
    params : Params
        Pytree of parameters; their dtype is kept.
    xs : X
        Array or pytree of arrays; the leading axis indexes the inputs.

    Returns
    -------
    jax.Array
        Shape ``(n,)``, in the dtype of the gradients.
    """
    return _jax_grad_sq_norm(f, params, xs)
