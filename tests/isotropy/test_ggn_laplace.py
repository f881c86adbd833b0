"""Laplace variances: Woodbury equals the direct solve; eigenspaces and angles."""

from __future__ import annotations

import numpy as np
import pytest

from gnuq_core.isotropy import ggn_laplace as curvature


@pytest.mark.parametrize("n,p", [(50, 20), (20, 50)])
def test_laplace_variance_matches_direct(n, p):
    rng = np.random.default_rng(0)
    a = curvature.ggn_factor(rng.standard_normal((n, p)), rng.random(n), scale=2.0)
    g = rng.standard_normal((7, p))
    direct = np.einsum("qp,pq->q", g, np.linalg.solve(a.T @ a + 0.3 * np.eye(p), g.T))
    np.testing.assert_allclose(curvature.laplace_variance(a, g, 0.3), direct, rtol=1e-8)
    d = np.diag(a.T @ a)
    np.testing.assert_allclose(curvature.diag_laplace_variance(a, g, 0.3), (g ** 2 / (d + 0.3)).sum(1))
    np.testing.assert_allclose(curvature.isotropic_variance(g), (g ** 2).sum(1))


@pytest.mark.parametrize("n,p", [(50, 20), (20, 50)])
def test_top_eigenspace_and_angles(n, p):
    a = np.random.default_rng(1).standard_normal((n, p))
    lam, v = curvature.top_eigenspace(a, 5)
    true = np.linalg.eigvalsh(a.T @ a)[::-1][:5]
    np.testing.assert_allclose(lam, true, rtol=1e-8)
    np.testing.assert_allclose(v.T @ v, np.eye(5), atol=1e-8)
    np.testing.assert_allclose(curvature.principal_angles(v, v @ np.diag([1, -2, 3, 1, 1])), 0, atol=1e-6)
