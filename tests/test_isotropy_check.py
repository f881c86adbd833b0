"""Exact spectra across widths: shapes, ranges, and the isotropic bound."""

from __future__ import annotations

import numpy as np

from gnuq_core import isotropy_check


def test_exact_case_tiny():
    r = isotropy_check.exact_case(2, n_train=40, steps=50, dampings=[1e-3, 1.0], n_grid=4)
    assert r["hess_eigs"].shape == (r["n_params"],) == r["ggn_eigs"].shape
    assert r["ggn_eigs"].min() > -1e-6
    # (G + λI)⁻¹ ≼ λ⁻¹ I: the isotropic value never undershoots
    assert np.all(r["isotropic"] >= r["exact"] * (1 - 1e-6))
    assert r["median_rel_error"][1] <= r["median_rel_error"][0]
