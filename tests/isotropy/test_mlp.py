"""The one MLP: initialisation scales and the shared per-input gradient routine."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from gnuq_core.isotropy.mlp import init_mlp, jacobian_rows, mlp_apply, num_params


@pytest.mark.parametrize("scale,std", [("fan_in", lambda i, o: 1 / np.sqrt(i)), ("unit", lambda i, o: 1.0),
                                       ("glorot", lambda i, o: np.sqrt(2 / (i + o)))])
def test_init_scales(scale: str, std) -> None:
    params = init_mlp(jax.random.PRNGKey(0), [200, 300, 1], scale=scale)
    w, b = params[0]
    assert float(jnp.std(w)) == pytest.approx(std(200, 300), rel=0.02)
    assert not np.any(np.asarray(b))
    with pytest.raises(ValueError, match="scale"):
        init_mlp(jax.random.PRNGKey(0), [2, 1], scale="he")


def test_jacobian_rows_are_the_per_input_gradients_in_ravel_order() -> None:
    params = init_mlp(jax.random.PRNGKey(1), [3, 5, 4, 1])
    xs = jax.random.normal(jax.random.PRNGKey(2), (7, 3))
    jac = jacobian_rows(mlp_apply, params, xs)
    assert jac.shape == (7, num_params(params))
    for i in (0, 6):
        np.testing.assert_allclose(jac[i], ravel_pytree(jax.grad(mlp_apply)(params, xs[i]))[0], rtol=1e-5, atol=1e-7)
    # chunks are the same rows: equal up to float32 rounding (a batch of another size may take
    # another vectorised kernel, which on some CPUs rounds one ulp differently)
    np.testing.assert_allclose(jacobian_rows(mlp_apply, params, xs, chunk=3), jac, rtol=1e-6, atol=1e-7)


def test_jacobian_rows_on_a_flat_parameter_vector() -> None:
    theta = jnp.arange(3.0)

    def f(t: jax.Array, x: jax.Array) -> jax.Array:
        return t[0] * x[0] + t[1] * x[1] ** 2 + t[2]

    xs = jnp.array([[1.0, 2.0], [3.0, -1.0]])
    np.testing.assert_allclose(jacobian_rows(f, theta, xs), [[1, 4, 1], [3, 1, 1]])
