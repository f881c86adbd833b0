"""Lanczos / SLQ recover known spectra; HVP adapters match explicit Hessians."""

from __future__ import annotations

import numpy as np
import pytest

from gnuq_core.isotropy import spectra


def _random_symmetric(n: int, seed: int = 0) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((n, n))
    return (a + a.T) / np.sqrt(2 * n)


def test_lanczos_full_recovers_diagonal_spectrum():
    eigs = np.concatenate([np.linspace(1e-4, 1e-2, 45), [0.5, 3.0, 10.0, 50.0, 200.0]])
    a, b = spectra.lanczos(spectra.dense_matvec(np.diag(eigs)), np.ones(eigs.size), eigs.size)
    ritz = np.linalg.eigvalsh(np.diag(a) + np.diag(b, 1) + np.diag(b, -1))
    np.testing.assert_allclose(np.sort(ritz), np.sort(eigs), rtol=1e-6, atol=1e-8)


def test_lanczos_extreme_ritz_values_random_symmetric():
    m = _random_symmetric(300)
    true = np.linalg.eigvalsh(m)
    a, b = spectra.lanczos(spectra.dense_matvec(m), np.random.default_rng(1).standard_normal(300), 80)
    ritz = np.linalg.eigvalsh(np.diag(a) + np.diag(b, 1) + np.diag(b, -1))
    assert abs(ritz.max() - true.max()) < 1e-2 and abs(ritz.min() - true.min()) < 1e-2


@pytest.mark.parametrize("kind", ["diagonal", "random"])
def test_slq_recovers_spectrum(kind):
    n = 400
    if kind == "diagonal":
        eigs = np.concatenate([np.full(380, 1e-3), np.linspace(0.1, 1.0, 15), [5, 10, 20, 40, 80]])
        mat = np.diag(eigs)
    else:
        mat = _random_symmetric(n, seed=2)
        eigs = np.linalg.eigvalsh(mat)
    res = spectra.slq(spectra.dense_matvec(mat), n, n_probes=20, m=60, seed=0)
    # trace and second moment (Lanczos quadrature is exact for low-degree polynomials)
    # (Hutchinson's error for Rademacher probes: sd ≤ √(2‖A‖_F² / probes); 0 for a diagonal A)
    tol = 4 * np.sqrt(2 * (eigs ** 2).sum() / 20) + 1e-6
    assert res.trace(lambda x: x) == pytest.approx(eigs.sum(), abs=tol)
    assert res.trace(lambda x: x ** 2) == pytest.approx((eigs ** 2).sum(), rel=0.15)
    # the CDF of the spectrum at a few points
    for t in np.quantile(eigs, [0.25, 0.5, 0.9]):
        assert res.fraction(lambda x: x <= t + 1e-12) == pytest.approx(np.mean(eigs <= t + 1e-12), abs=0.1)
    # a density integrates to about 1
    grid = np.linspace(eigs.min() - 1, eigs.max() + 1, 4000)
    assert np.trapezoid(res.density(grid, 0.05), grid) == pytest.approx(1.0, abs=0.02)


def test_lanczos_quadratic_form_matches_solve():
    m = _random_symmetric(60, 3)
    m = m @ m.T
    g = np.random.default_rng(4).standard_normal(60)
    lam = 0.1
    exact = g @ np.linalg.solve(m + lam * np.eye(60), g)
    est = spectra.lanczos_quadratic_form(spectra.dense_matvec(m), g, lambda t: 1 / (t + lam), m=60)
    assert est == pytest.approx(exact, rel=1e-6)


def test_summary_and_damped_vs_isotropic():
    eigs = np.array([-1e-5, 1e-6, 1e-4, 1e-2, 1.0, 10.0])
    s = spectra.spectrum_summary(eigs, damping=1e-3)
    assert s["n_outliers"] == 2 and s["frac_below_damping"] == pytest.approx(0.5)
    assert s["effective_dim"] == pytest.approx(sum(max(e, 0) / (max(e, 0) + 1e-3) for e in eigs))
    vecs = np.eye(6)
    g = np.random.default_rng(0).standard_normal((30, 6))
    out = spectra.damped_vs_isotropic(np.zeros(6), vecs, g, 0.5)
    np.testing.assert_allclose(out["rel_error"], 0, atol=1e-12)
    assert out["spearman"] == pytest.approx(1.0)
    out = spectra.damped_vs_isotropic(np.clip(eigs, 0, None), vecs, g, 1e-3)
    assert np.all(out["rel_error"] >= -1e-12)


def test_jax_hvp_and_ggn_vp_match_explicit_matrices():
    import jax.numpy as jnp

    from gnuq_core.isotropy import classifier
    from gnuq_core.isotropy import ggn_laplace as curvature

    rng = np.random.default_rng(0)
    x = rng.standard_normal((30, 2))
    y = (rng.random(30) < 0.5).astype(float)
    params = classifier.train(x, y, [3], seed=0, steps=50)
    xs, ys = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    loss = lambda p: classifier.nll(p, xs, ys)  # noqa: E731
    hess = spectra.jax_hessian(loss, params)
    hvp, dim = spectra.jax_hvp(loss, params)
    v = rng.standard_normal(dim)
    np.testing.assert_allclose(hvp(v), hess @ v, rtol=1e-4, atol=1e-5)
    a = curvature.ggn_factor(classifier.jacobian_rows(params, x), classifier.predict_proba(params, x), scale=1 / 30)
    gvp, _ = spectra.jax_ggn_vp(classifier.logit, params, xs)
    np.testing.assert_allclose(gvp(v), a.T @ (a @ v), rtol=1e-4, atol=1e-5)


def test_torch_hvp_matches_autograd_hessian():
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    x, y = torch.randn(20, 3, dtype=torch.float64), torch.randint(0, 2, (20,)).double()
    params = list(net.parameters())
    shapes = [p.shape for p in params]

    def loss_flat(flat):
        out, i = x, 0
        ws = []
        for s in shapes:
            n = int(np.prod(s))
            ws.append(flat[i:i + n].reshape(s))
            i += n
        h = torch.tanh(x @ ws[0].T + ws[1])
        z = (h @ ws[2].T + ws[3])[:, 0]
        return torch.nn.functional.binary_cross_entropy_with_logits(z, y)

    flat = torch.cat([p.detach().reshape(-1) for p in params])
    hess = torch.autograd.functional.hessian(loss_flat, flat).numpy()
    loss_fn = lambda: torch.nn.functional.binary_cross_entropy_with_logits(net(x)[:, 0], y)  # noqa: E731
    hvp, dim = spectra.torch_hvp(loss_fn, params)
    v = np.random.default_rng(0).standard_normal(dim)
    np.testing.assert_allclose(hvp(v), hess @ v, rtol=1e-8, atol=1e-10)



def test_slq_probe_alone_equals_that_probe_of_slq():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((30, 30))
    mv = spectra.dense_matvec(a + a.T)
    res = spectra.slq(mv, 30, n_probes=3, m=6, seed=5)
    for k in range(3):
        nodes, weights = spectra.slq_probe(mv, 30, k, m=6, seed=5)
        np.testing.assert_array_equal(nodes, res.nodes[k])
        np.testing.assert_array_equal(weights, res.weights[k])
    with pytest.raises(ValueError, match="probe index"):
        spectra.slq_probe(mv, 30, -1)
