"""The one damped quadratic form gᵀ(AᵀA + λI)⁻¹g: both branches against a dense solve."""

from __future__ import annotations

import numpy as np
import pytest

from gnuq_core.isotropy import spectra
from gnuq_core.isotropy.damped import damped_quadratic_form, kernel_residual


def _dense(a: np.ndarray, g: np.ndarray, lam: float) -> np.ndarray:
    return np.einsum("qp,pq->q", g, np.linalg.solve(a.T @ a + lam * np.eye(a.shape[1]), g.T))


@pytest.mark.parametrize("n,p", [(5, 30), (30, 5), (12, 12)])
@pytest.mark.parametrize("method", ["auto", "direct", "woodbury"])
def test_every_branch_equals_a_dense_solve(n: int, p: int, method: str) -> None:
    rng = np.random.default_rng(n * p)
    a, g = rng.standard_normal((n, p)), rng.standard_normal((7, p))
    for lam in (1e-4, 0.1, 10.0):
        np.testing.assert_allclose(damped_quadratic_form(a, g, lam, method=method), _dense(a, g, lam), rtol=1e-6)


def test_woodbury_equals_the_eigendecomposition() -> None:
    rng = np.random.default_rng(3)
    a, g = rng.standard_normal((5, 30)), rng.standard_normal((7, 30))
    w, v = np.linalg.eigh(a.T @ a)
    for lam in (1e-4, 0.1, 10.0):
        np.testing.assert_allclose(damped_quadratic_form(a, g, lam, method="woodbury"),
                                   spectra.damped_vs_isotropic(w, v, g, lam)["exact"], rtol=1e-6)


def test_kernel_residual_with_per_example_noise_is_the_weighted_ggn() -> None:
    # gᵀ(JᵀΛJ + Σ₀⁻¹)⁻¹g = gᵀΣ₀g − gᵀΣ₀Jᵀ(JΣ₀Jᵀ + Λ⁻¹)⁻¹JΣ₀g
    rng = np.random.default_rng(4)
    j, g = rng.standard_normal((6, 20)), rng.standard_normal((4, 20))
    s0, lam = rng.uniform(0.5, 2.0, 20), rng.uniform(0.1, 1.0, 6)
    want = np.einsum("qp,pq->q", g, np.linalg.solve((j * lam[:, None]).T @ j + np.diag(1 / s0), g.T))
    got = kernel_residual((g ** 2) @ s0, (g * s0) @ j.T, (j * s0) @ j.T, 1 / lam)
    np.testing.assert_allclose(got, want, rtol=1e-8)


def test_the_data_only_remove_variance() -> None:
    rng = np.random.default_rng(5)
    a, g = rng.standard_normal((8, 40)), rng.standard_normal((10, 40))
    lam = 0.3
    assert np.all(damped_quadratic_form(a, g, lam) <= (g ** 2).sum(1) / lam + 1e-12)


@pytest.mark.parametrize("kwargs,match", [({"damping": 0.0}, "damping"), ({"method": "lu"}, "method")])
def test_bad_input_is_named(kwargs: dict, match: str) -> None:
    a, g = np.ones((3, 4)), np.ones((2, 4))
    with pytest.raises(ValueError, match=match):
        damped_quadratic_form(a, g, **{"damping": 0.1, **kwargs})
    with pytest.raises(ValueError, match="grads"):
        damped_quadratic_form(a, np.ones((2, 5)), 0.1)
