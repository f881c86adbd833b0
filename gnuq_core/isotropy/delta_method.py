"""The delta method, checked by Monte Carlo: Var_θ[p(θ)] ≈ gᵀ Cov[θ] g.

With θ ~ N(θ*, σ²I) and g = ∇θ p(θ*), a first-order Taylor expansion gives
Var[p] ≈ σ² ‖g‖². The ratio Var_MC[p] / (σ² ‖g‖²) → 1 as σ → 0; the gap at larger σ
is the second-order term of the expansion.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class VarianceRatio(NamedTuple):
    """Monte Carlo check of the delta method at one input.

    Attributes
    ----------
    sigmas : np.ndarray
        Perturbation scales σ.
    ratio : np.ndarray
        Var_MC[p] / (σ² ‖g‖²) for each σ.
    ratio_se : np.ndarray
        Standard error of ``ratio`` from the sampling error of a variance, √(2/(n−1)).
    grad_sq : float
        ‖∇θ p(θ*)‖².
    """

    sigmas: np.ndarray
    ratio: np.ndarray
    ratio_se: np.ndarray
    grad_sq: float


def perturb(key: jax.Array, params: Any, sigma: float) -> Any:
    """θ* + σ ε with ε ~ N(0, I), leaf by leaf."""
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(key, len(leaves))
    noisy = [leaf + sigma * jax.random.normal(k, leaf.shape, leaf.dtype) for leaf, k in zip(leaves, keys)]
    return jax.tree_util.tree_unflatten(tree, noisy)


def grad_sq_norm(f: Callable[[Any], jax.Array], params: Any) -> float:
    """‖∇θ f(θ)‖² summed over all leaves."""
    g = jax.grad(f)(params)
    return float(sum(jnp.sum(leaf**2) for leaf in jax.tree_util.tree_leaves(g)))


def mc_variance_ratio(f: Callable[[Any], jax.Array], params: Any, sigmas: np.ndarray, n: int,
                      key: jax.Array) -> VarianceRatio:
    """Var_MC[f(θ* + σε)] / (σ²‖∇f‖²) over ``sigmas``, with ``n`` samples each.

    The same ε are reused for every σ (common random numbers), so the curve is smooth.
    """
    grad_sq = grad_sq_norm(f, params)
    keys = jax.random.split(key, n)
    eps = jax.vmap(lambda k: perturb(k, jax.tree_util.tree_map(jnp.zeros_like, params), 1.0))(keys)
    ratios = []
    for sigma in sigmas:
        values = jax.vmap(lambda e: f(jax.tree_util.tree_map(lambda p, d: p + sigma * d, params, e)))(eps)
        ratios.append(float(jnp.var(values, ddof=1)) / (sigma**2 * grad_sq))
    ratios = np.asarray(ratios)
    return VarianceRatio(np.asarray(sigmas), ratios, ratios * np.sqrt(2.0 / (n - 1)), grad_sq)
