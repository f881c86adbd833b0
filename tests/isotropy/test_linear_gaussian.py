"""Bayesian linear regression: weight-space delta method equals the kernel-form variance."""

from __future__ import annotations

import numpy as np

from gnuq_core.isotropy import linear_gaussian


def test_weight_and_function_space_agree() -> None:
    rng = np.random.default_rng(0)
    phi, phi_q = rng.normal(size=(30, 8)), rng.normal(size=(12, 8))
    y = rng.normal(size=30)
    post = linear_gaussian.posterior(phi, y, alpha=2.0, beta=5.0)
    a = linear_gaussian.weight_space_variance(phi_q, post.cov)
    b = linear_gaussian.function_space_variance(phi_q, phi, alpha=2.0, beta=5.0)
    np.testing.assert_allclose(a, b, rtol=1e-10)
    assert np.all(a > 0)


def test_no_data_gives_the_prior() -> None:
    phi_q = np.eye(3)
    post = linear_gaussian.posterior(np.zeros((1, 3)), np.zeros(1), alpha=4.0, beta=1.0)
    np.testing.assert_allclose(linear_gaussian.weight_space_variance(phi_q, post.cov), 0.25)
