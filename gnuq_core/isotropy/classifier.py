"""Small JAX MLP binary classifiers: train to θ*, predict, and per-input gradients.

Used by the "why isotropy" chapters (proxy bias, Hessian spectra) wherever a network
whose curvature can be computed exactly is needed. The network is the one MLP of
:mod:`gnuq_core.isotropy.mlp` (tanh hidden layers, Glorot-normal initialisation) whose
output is a logit, ``p(y=1|x) = σ(logit)``; it is trained by the one Adam,
:func:`gnuq_core.isotropy.train.fit_adam`, and differentiated per input by
:func:`gnuq_core.isotropy.mlp.jacobian_rows`.

Prior and damping: the weight decay of :func:`train` penalises the weights W only (biases
are free), while every Laplace covariance built on θ* (``(G + αI)⁻¹``,
:mod:`gnuq_core.isotropy.ggn_laplace`, :mod:`gnuq_core.isotropy.damping`) damps all
parameters, biases included. θ* is therefore the MAP of a prior without bias terms and
the Laplace covariance that of a prior with them; the two differ only in the bias
directions (one per hidden unit plus the output bias). Kept as is so that the
chapters' numbers stay comparable; state it wherever a prior is quoted.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gnuq_core.isotropy import mlp
from gnuq_core.isotropy.mlp import Params
from gnuq_core.isotropy.train import fit_adam

__all__ = ["logit", "nll", "train", "n_params", "flat_grads", "jacobian_rows",
           "predict_proba", "logits_of"]

JACOBIAN_CHUNK = 512  # inputs per Jacobian call (memory: chunk × #params floats)


def logit(params: Params, x: jax.Array) -> jax.Array:
    """Scalar logit of one input ``x`` (tanh hidden layers): :func:`~gnuq_core.isotropy.mlp.mlp_apply`."""
    return mlp.mlp_apply(params, x)


def _prob(params: Params, x: jax.Array) -> jax.Array:
    return jax.nn.sigmoid(logit(params, x))


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
    return mlp.num_params(params)


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
        Initialisation seed (Glorot-normal weights, zero biases).
    steps, lr, weight_decay : int, float, float
        Optimiser settings; the weight decay is the Gaussian prior of the Laplace model, on
        the weights only (see the module docstring for the biases).
    """
    xs = jnp.asarray(xs, jnp.float32)
    ys = jnp.asarray(ys, jnp.float32)
    params = mlp.init_mlp(jax.random.PRNGKey(seed), [xs.shape[1], *hidden, 1], scale="glorot")

    def objective(p: Params) -> jax.Array:
        l2 = sum(jnp.sum(w ** 2) for w, _ in p)
        return nll(p, xs, ys) + 0.5 * weight_decay * l2

    return fit_adam(objective, params, steps=steps, lr=lr).params


def jacobian_rows(params: Params, xs: np.ndarray, fn: str = "logit", chunk: int = JACOBIAN_CHUNK) -> np.ndarray:
    """One flat gradient per input: ``∇θ logit(x)`` (``fn="logit"``) or ``∇θ p(x)`` (``"prob"``).

    Returns a float64 array of shape ``(n_inputs, n_params)``, ordered as
    ``jax.flatten_util.ravel_pytree(params)`` (computed in float32).
    """
    if fn not in ("logit", "prob"):
        raise ValueError(f"fn must be 'logit' or 'prob', not {fn!r}")
    f = logit if fn == "logit" else _prob
    return np.asarray(mlp.jacobian_rows(f, params, jnp.asarray(xs, jnp.float32), chunk=chunk), dtype=np.float64)


def flat_grads(params: Params, xs: np.ndarray) -> np.ndarray:
    """``∇θ p(y=1|x)`` per input: the gradient the isotropic estimator squares."""
    return jacobian_rows(params, xs, fn="prob")


def logits_of(params: Params, xs: np.ndarray) -> np.ndarray:
    """Logits for each row of ``xs`` (float64)."""
    return np.asarray(_logits(params, jnp.asarray(xs, jnp.float32)), dtype=np.float64)
