"""The Monte Carlo check of the delta method."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gnuq_core.isotropy import delta_method


def test_linear_function_has_ratio_one_at_every_sigma() -> None:
    params = {"w": jnp.array([1.0, -2.0, 0.5])}
    f = lambda p: jnp.dot(p["w"], jnp.array([0.3, 0.1, -1.0]))  # noqa: E731
    res = delta_method.mc_variance_ratio(f, params, np.array([1e-3, 1.0]), 4000, jax.random.PRNGKey(0))
    assert abs(res.grad_sq - (0.09 + 0.01 + 1.0)) < 1e-6
    np.testing.assert_allclose(res.ratio, 1.0, atol=4 * res.ratio_se.max())


def test_curvature_shows_at_large_sigma() -> None:
    params = {"w": jnp.array([0.5])}
    f = lambda p: p["w"][0] ** 2  # noqa: E731  Var[(w+σε)²] = 4w²σ² + 2σ⁴, ‖g‖² = 4w²
    res = delta_method.mc_variance_ratio(f, params, np.array([1e-3, 2.0]), 20000, jax.random.PRNGKey(1))
    assert abs(res.ratio[0] - 1) < 0.05
    assert abs(res.ratio[1] - 9.0) < 0.15 * 9.0  # 1 + 2σ²/(4w²) = 9 at σ = 2, w = 0.5


def test_perturb_keeps_structure() -> None:
    params = {"a": jnp.zeros(3), "b": [jnp.ones((2, 2))]}
    out = delta_method.perturb(jax.random.PRNGKey(0), params, 0.1)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(params)
