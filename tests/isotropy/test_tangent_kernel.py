"""Tangent kernel of a small MLP."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gnuq_core.isotropy import tangent_kernel
from gnuq_core.estimators import jax_grad_sq_norm
from gnuq_core.isotropy.mlp import init_mlp, jacobian_rows, mlp_apply, num_params


def test_diagonal_is_the_squared_gradient_norm() -> None:
    params = init_mlp(jax.random.PRNGKey(0), [2, 8, 1])
    xs = jax.random.normal(jax.random.PRNGKey(1), (5, 2))
    theta = tangent_kernel.tangent_kernel(mlp_apply, params, xs)
    assert theta.shape == (5, 5) and np.allclose(theta, theta.T)
    np.testing.assert_allclose(np.diag(theta), np.asarray(jax_grad_sq_norm(mlp_apply, params, xs)), rtol=1e-5)
    assert jacobian_rows(mlp_apply, params, xs).shape == (5, num_params(params))


def test_conditioning_on_the_query_itself_removes_its_variance() -> None:
    params = init_mlp(jax.random.PRNGKey(0), [1, 16, 1])
    xs = jnp.linspace(-1, 1, 4)[:, None]
    theta = tangent_kernel.tangent_kernel(mlp_apply, params, xs)
    left = tangent_kernel.linearised_posterior_variance(np.diag(theta), theta, theta, noise_ratio=1e-8)
    assert np.all(left < 1e-5 * np.diag(theta))
