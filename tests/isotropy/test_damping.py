"""Exact spectra across widths: shapes, ranges, and the isotropic bound."""

from __future__ import annotations

import numpy as np

from gnuq_core.isotropy import damping, spectra


def test_exact_case_tiny():
    r = damping.exact_case(2, n_train=40, steps=50, dampings=[1e-3, 1.0], n_grid=4)
    assert r["hess_eigs"].shape == (r["n_params"],) == r["ggn_eigs"].shape
    assert r["ggn_eigs"].min() > -1e-6
    # (G + λI)⁻¹ ≼ λ⁻¹ I: the isotropic value never undershoots
    assert np.all(r["isotropic"] >= r["exact"] * (1 - 1e-6))
    assert r["median_rel_error"][1] <= r["median_rel_error"][0]


def test_slq_case_exact_form_matches_the_eigendecomposition_and_bounds_lanczos():
    # Same tiny net as exact_case (same training), so the Woodbury values must equal the
    # eigendecomposition ones; Lanczos (a Gauss rule) may only undershoot them.
    kw = dict(n_train=40, steps=50, n_grid=4)
    ex = damping.exact_case(2, dampings=[1e-3], **kw)
    sl = damping.slq_case(2, n_probes=1, m=5, n_query=16, m_query=3, **kw)
    np.testing.assert_allclose(sl["exact"], ex["exact"], rtol=1e-5)
    assert np.all(sl["lanczos"] <= sl["exact"] * (1 + 1e-6))
    assert 0.0 <= sl["rank_share"] <= 1.0


def test_a_wide_net_takes_the_gram_route_to_the_same_spectrum_and_quadratic_forms():
    # more parameters than factor rows: the GGN's eigenvalues from the n × n Gram matrix (the
    # rest exactly 0) and the forms by Woodbury equal those of the P × P eigendecomposition
    rng = np.random.default_rng(0)
    a, gq = rng.standard_normal((6, 15)), rng.standard_normal((9, 15))
    eigs, curves = damping._ggn_and_forms(a, gq, [1e-3, 0.5])
    full_eigs, vecs = np.linalg.eigh(a.T @ a)
    np.testing.assert_allclose(eigs, np.clip(full_eigs, 0, None), atol=1e-10)
    assert (eigs[:9] == 0).all()
    for lam, c in zip([1e-3, 0.5], curves):
        want = spectra.damped_vs_isotropic(full_eigs, vecs, gq, lam)
        for key in ("exact", "isotropic", "median_rel_error", "spearman"):
            np.testing.assert_allclose(c[key], want[key], rtol=1e-8, err_msg=key)
