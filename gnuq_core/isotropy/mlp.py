"""The one small multilayer perceptron, as pure JAX functions, and its per-input gradients.

Parameters are a list of ``(W, b)`` pairs:

    h₀ = x,   hₗ = act(hₗ₋₁ Wₗ + bₗ),   f(x) = h_{L-1} W_L + b_L   (a scalar logit or mean)

Used by chapter 01 (regression and classification toys, the tangent kernel) and by
:mod:`gnuq_core.isotropy.classifier` (the proxy-bias and spectra chapters); trained by
:func:`gnuq_core.isotropy.train.fit_adam`. :func:`jacobian_rows` is the one per-input
gradient routine: the classifier, the tangent kernel and the BNN Laplace module
(:mod:`gnuq_core.bayes.laplace`, on the flat-θ network that NUTS samples) all call it.
"""

from __future__ import annotations

import base64
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

Params = list[tuple[jax.Array, jax.Array]]

__all__ = ["Params", "INIT_SCALES", "init_mlp", "mlp_apply", "num_params", "jacobian_rows", "encode_params",
           "decode_params"]

INIT_SCALES = ("fan_in", "unit", "glorot")


def init_mlp(key: jax.Array, sizes: list[int], scale: str = "fan_in") -> Params:
    """Gaussian weights, zero biases, for layer ``sizes`` (ending in 1 for a scalar output).

    ``scale``: ``"fan_in"`` std 1/√fan_in, ``"unit"`` std 1, ``"glorot"`` std √(2/(fan_in + fan_out)).
    """
    if scale not in INIT_SCALES:
        raise ValueError(f"scale must be one of {INIT_SCALES}, not {scale!r}")
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        key, k_w = jax.random.split(key)
        if scale == "glorot":
            w = jax.random.normal(k_w, (fan_in, fan_out)) * jnp.sqrt(2.0 / (fan_in + fan_out))
        else:
            w = (1.0 / jnp.sqrt(fan_in) if scale == "fan_in" else 1.0) * jax.random.normal(k_w, (fan_in, fan_out))
        params.append((w, jnp.zeros(fan_out)))
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
    return int(sum(w.size + b.size for w, b in params))


@functools.lru_cache(maxsize=256)  # one entry per model: chapter 05 sweeps many BNN settings
def _jacobian_fn(f: Callable[[Any, jax.Array], jax.Array]) -> Callable[[Any, jax.Array], jax.Array]:
    """Jitted per-input flat gradient of ``f``, one per function (repeated calls do not recompile)."""
    return jax.jit(jax.vmap(lambda params, x: ravel_pytree(jax.grad(f)(params, x))[0], in_axes=(None, 0)))


def jacobian_rows(f: Callable[[Any, jax.Array], jax.Array], params: Any, xs: jax.Array,
                  chunk: int | None = None) -> jax.Array:
    """∇θ f(params, x) for every row x of ``xs``: shape ``(n, #params)``.

    Rows are flattened as ``jax.flatten_util.ravel_pytree(params)`` (for a flat θ, θ's own
    order); the dtype is that of ``params`` and ``xs`` (cast before calling). ``f`` should
    be a long-lived function (module level or made once): its jitted gradient is cached by
    identity. ``chunk`` bounds the inputs per call (memory: chunk × #params).
    """
    fn = _jacobian_fn(f)
    if chunk is None or len(xs) <= chunk:
        return fn(params, xs)
    return jnp.concatenate([fn(params, xs[i:i + chunk]) for i in range(0, len(xs), chunk)])


def encode_params(params: Params) -> str:
    """The parameters as text that rebuilds them bit for bit: base64 of the float32 values
    in ``ravel_pytree`` order (little-endian)."""
    flat = np.asarray(ravel_pytree(params)[0], dtype="<f4")
    return base64.b64encode(flat.tobytes()).decode("ascii")


def decode_params(text: str, sizes: list[int]) -> Params:
    """The parameters of an MLP with layer ``sizes`` from :func:`encode_params`'s text.

    Raises ``ValueError`` when the text does not hold that many parameters.
    """
    flat = np.frombuffer(base64.b64decode(text.encode("ascii")), dtype="<f4")
    template = init_mlp(jax.random.PRNGKey(0), sizes)
    want = num_params(template)
    if flat.size != want:
        raise ValueError(f"the encoded parameters hold {flat.size} values, an MLP of sizes {sizes} has {want}")
    _, unravel = ravel_pytree(template)
    return [(jnp.asarray(w, jnp.float32), jnp.asarray(b, jnp.float32))
            for w, b in unravel(jnp.asarray(flat, jnp.float32))]

