"""A plain multilayer perceptron as pure JAX functions (parameters are a list of (W, b)).

    h₀ = x,   hₗ = act(hₗ₋₁ Wₗ + bₗ),   f(x) = h_{L-1} W_L + b_L   (a scalar logit or mean)
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

Params = list[tuple[jax.Array, jax.Array]]


def init_mlp(key: jax.Array, sizes: list[int], scale: str = "fan_in") -> Params:
    """Gaussian initialisation; ``scale="fan_in"`` uses std 1/√fan_in, ``"unit"`` std 1."""
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        key, k_w = jax.random.split(key)
        std = 1.0 / jnp.sqrt(fan_in) if scale == "fan_in" else 1.0
        params.append((std * jax.random.normal(k_w, (fan_in, fan_out)), jnp.zeros(fan_out)))
    return params


def mlp_apply(params: Params, x: jax.Array, act: Callable[[jax.Array], jax.Array] = jnp.tanh) -> jax.Array:
    """Scalar output f(x) for one input ``x`` (shape ``(d,)``)."""
    h = x
    for w, b in params[:-1]:
        h = act(h @ w + b)
    w, b = params[-1]
    return (h @ w + b)[0]


def num_params(params: Params) -> int:
    """Number of scalar parameters."""
    return sum(w.size + b.size for w, b in params)
