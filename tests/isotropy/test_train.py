"""Full-batch Adam reaches a stationary point."""

from __future__ import annotations

import jax.numpy as jnp

from gnuq_core.isotropy.train import fit_adam


def test_quadratic_minimum() -> None:
    loss = lambda p: jnp.sum((p["x"] - jnp.array([1.0, -2.0])) ** 2)  # noqa: E731
    res = fit_adam(loss, {"x": jnp.zeros(2)}, steps=3000, lr=0.05)
    assert jnp.allclose(res.params["x"], jnp.array([1.0, -2.0]), atol=1e-3)
    assert res.grad_norm < 1e-2 and res.losses.shape == (3000,) and res.losses[-1] < res.losses[0]
