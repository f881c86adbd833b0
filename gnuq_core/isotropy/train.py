"""Full-batch Adam for small JAX models: the point estimate θ* the method starts from."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp


class FitResult(NamedTuple):
    """Result of :func:`fit_adam`.

    Attributes
    ----------
    params : pytree
        The final parameters θ*.
    losses : jax.Array
        Loss at every step.
    grad_norm : float
        ‖∇ loss(θ*)‖ at the end (how close to a stationary point the fit got).
    """

    params: Any
    losses: jax.Array
    grad_norm: float


def fit_adam(loss: Callable[[Any], jax.Array], params: Any, steps: int = 2000, lr: float = 1e-2,
             b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> FitResult:
    """Minimise ``loss(params)`` with Adam (Kingma & Ba, 2015), written out.

        m ← b1 m + (1−b1) g,  v ← b2 v + (1−b2) g²,  θ ← θ − lr · m̂ / (√v̂ + eps)

    The one optimiser of the small models (chapter 01's MLPs and every
    :func:`gnuq_core.isotropy.classifier.train`). ``(1−b2) g²`` is evaluated as
    ``((1−b2)·g)·g``, in this order, so that float32 runs are reproducible bit for bit.
    """
    value_and_grad = jax.value_and_grad(loss)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)

    def step(carry, t):
        theta, m, v = carry
        value, g = value_and_grad(theta)
        m = jax.tree_util.tree_map(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, g)
        v = jax.tree_util.tree_map(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, g)
        c1, c2 = 1 - b1 ** (t + 1), 1 - b2 ** (t + 1)
        theta = jax.tree_util.tree_map(lambda p, m_, v_: p - lr * (m_ / c1) / (jnp.sqrt(v_ / c2) + eps), theta, m, v)
        return (theta, m, v), value

    (theta, _, _), losses = jax.lax.scan(step, (params, zeros, zeros), jnp.arange(steps))
    g = jax.grad(loss)(theta)
    grad_norm = float(jnp.sqrt(sum(jnp.sum(leaf**2) for leaf in jax.tree_util.tree_leaves(g))))
    return FitResult(theta, losses, grad_norm)
