"""Small JAX MLP binary classifiers: initialise, train to θ*, and per-input gradients.

Used by the "why isotropy" chapters (proxy bias, Hessian spectra) wherever a network
whose curvature can be computed exactly is needed. Parameters are a list of
``(W, b)`` pairs; the model returns one logit per input, ``p(y=1|x) = σ(logit)``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

Params = list[tuple[jax.Array, jax.Array]]

__all__ = ["init_mlp", "logit", "nll", "train", "n_params", "flat_grads", "jacobian_rows",
           "predict_proba", "logits_of"]


def init_mlp(key: jax.Array, sizes: list[int]) -> Params:
    """Glorot-normal weights, zero biases, for layer ``sizes`` ending in 1 (the logit)."""
    params = []
    for din, dout in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (din, dout)) * jnp.sqrt(2.0 / (din + dout)),
                       jnp.zeros(dout)))
    return params


def logit(params: Params, x: jax.Array) -> jax.Array:
    """Scalar logit of one input ``x`` (tanh hidden layers)."""
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return (h @ w + b)[0]


@jax.jit
def _logits(params: Params, xs: jax.Array) -> jax.Array:
    return jax.vmap(lambda x: logit(params, x))(xs)


def predict_proba(params: Params, xs: np.ndarray) -> np.ndarray:
    """``p(y=1|x)`` for each row of ``xs`` (float64)."""
    z = np.asarray(_logits(params, jnp.asarray(xs, jnp.float32)), dtype=np.float64)
    return 1 / (1 + np.exp(-z))


def nll(params: Params, xs: jax.Array, ys: jax.Array) -> jax.Array:
    """Mean sigmoid cross-entropy (the per-example NLL) over a batch."""
    z = jax.vmap(lambda x: logit(params, x))(xs)
    return jnp.mean(jnp.logaddexp(0.0, z) - ys * z)


def n_params(params: Params) -> int:
    """Number of scalar parameters."""
    return int(ravel_pytree(params)[0].size)


@partial(jax.jit, static_argnums=(3,))
def _fit(params: Params, xs: jax.Array, ys: jax.Array, steps: int, lr: float, weight_decay: float) -> Params:
    def objective(p):
        l2 = sum(jnp.sum(w ** 2) for w, _ in p)
        return nll(p, xs, ys) + 0.5 * weight_decay * l2

    g_fn = jax.grad(objective)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)

    def step(carry, t):
        p, m, v = carry
        g = g_fn(p)
        m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
        v = jax.tree_util.tree_map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
        c1, c2 = 1 - 0.9 ** (t + 1), 1 - 0.999 ** (t + 1)
        p = jax.tree_util.tree_map(lambda a, mm, vv: a - lr * (mm / c1) / (jnp.sqrt(vv / c2) + 1e-8), p, m, v)
        return (p, m, v), None

    (params, _, _), _ = jax.lax.scan(step, (params, zeros, zeros), jnp.arange(steps, dtype=jnp.float32))
    return params


def train(xs: np.ndarray, ys: np.ndarray, hidden: list[int], seed: int = 0, steps: int = 2000,
          lr: float = 1e-2, weight_decay: float = 1e-3) -> Params:
    """Full-batch Adam on the mean NLL plus ``weight_decay/2 · Σ‖W‖²``; returns θ*.

    Parameters
    ----------
    xs, ys : ndarray
        Inputs ``(n, d)`` and 0/1 labels ``(n,)``.
    hidden : list of int
        Hidden layer widths.
    seed : int
        Initialisation seed.
    steps, lr, weight_decay : int, float, float
        Optimiser settings; the weight decay is the Gaussian prior of the Laplace model.
    """
    xs = jnp.asarray(xs, jnp.float32)
    ys = jnp.asarray(ys, jnp.float32)
    params = init_mlp(jax.random.PRNGKey(seed), [xs.shape[1], *hidden, 1])
    return _fit(params, xs, ys, steps, lr, weight_decay)


def _out(params: Params, x: jax.Array, fn: str) -> jax.Array:
    z = logit(params, x)
    return jax.nn.sigmoid(z) if fn == "prob" else z


@partial(jax.jit, static_argnums=(2,))
def _jac(params: Params, xs: jax.Array, fn: str) -> jax.Array:
    return jax.vmap(lambda x: ravel_pytree(jax.grad(_out)(params, x, fn))[0])(xs)


def jacobian_rows(params: Params, xs: np.ndarray, fn: str = "logit", chunk: int = 512) -> np.ndarray:
    """One flat gradient per input: ``∇θ logit(x)`` (``fn="logit"``) or ``∇θ p(x)`` (``"prob"``).

    Returns a float64 array of shape ``(n_inputs, n_params)``, ordered as
    ``jax.flatten_util.ravel_pytree(params)``.
    """
    if fn not in ("logit", "prob"):
        raise ValueError(f"fn must be 'logit' or 'prob', not {fn!r}")
    xs = jnp.asarray(xs, jnp.float32)
    out = [np.asarray(_jac(params, xs[i:i + chunk], fn), dtype=np.float64) for i in range(0, xs.shape[0], chunk)]
    return np.concatenate(out, axis=0)


def flat_grads(params: Params, xs: np.ndarray) -> np.ndarray:
    """``∇θ p(y=1|x)`` per input: the gradient the isotropic estimator squares."""
    return jacobian_rows(params, xs, fn="prob")


def logits_of(params: Params, xs: np.ndarray) -> np.ndarray:
    """Logits for each row of ``xs`` (float64)."""
    return np.asarray(_logits(params, jnp.asarray(xs, jnp.float32)), dtype=np.float64)

