"""The JAX half of `gnuq_core.estimators`: ``value_and_grad`` vmapped over inputs under ``jit``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gnuq_core.estimators.core import _FIX_HINT, LOG_P_TOL
from gnuq_core.options import InputTypeError

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
    if not callable(log_prob_fn):
        raise InputTypeError(f"log_prob_fn is a {type(log_prob_fn).__name__}: pass a pure function "
                             "(params, x) -> scalar log p")
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
