"""SciPy, dense eigh, curvlinops and torch.autograd vs the project's Lanczos, SLQ and HVPs."""

from __future__ import annotations

import numpy as np
import pytest

from gnuq_core.crosscheck import spectra as xspec


def _spd(n: int = 40, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    return a @ a.T / n + np.diag(np.linspace(0, 3, n))


def test_lanczos_agrees_with_eigsh_and_eigh() -> None:
    h = _spd()
    df = xspec.lanczos_vs_eigsh(h, lambda v: h @ v, k=5)
    assert df["agrees"].all(), df[["quantity", "max_rel_error"]]


def test_a_wrong_operator_is_a_disagreement() -> None:
    h = _spd()
    df = xspec.lanczos_vs_eigsh(h, lambda v: 1.01 * (h @ v), k=5)
    assert not df.loc[df["quantity"].str.contains("vector product"), "agrees"].any()


def test_slq_and_curvlinops_same_starts() -> None:
    h = _spd(60)
    df = xspec.slq_vs_exact(h, 0.1, n_probes=8, m=20)
    assert df["agrees"].all(), df[["quantity", "max_rel_error"]]
    same = xspec.same_start_runs(h, 0.1, n_probes=4, m=20)
    assert same["trace_project"] == pytest.approx(same["trace_curvlinops"], rel=1e-10)
    # a wrong exact value (the trace of 2H) must be flagged
    from gnuq_core.crosscheck.agreement import compare
    from gnuq_core.isotropy import spectra

    res = spectra.slq(spectra.dense_matvec(h), 60, n_probes=8, m=20)
    per = np.array([60 * (w @ x) for x, w in zip(res.nodes, res.weights)])
    assert not compare("tr", per.mean(), 2 * np.trace(h), xspec.TOL_SLQ, scale=per.std(ddof=1) / np.sqrt(8))["agrees"]


def test_classifier_hessian_and_lm_block() -> None:
    hc = xspec.classifier_hessian(3, n_train=20, steps=20)
    df = xspec.lanczos_vs_eigsh(hc["hessian"], hc["hvp"], k=3)
    assert df["agrees"].all(), df[["quantity", "max_rel_error"]]
    from gnuq_core.isotropy.lm_hessian import tiny_random_llama

    lm = xspec.lm_block_hvp(tiny_random_llama(), list(range(5, 17)), n_vectors=1)
    assert lm["agrees"].all() and lm["max_rel_error"].iloc[0] < 1e-4


def test_bad_k() -> None:
    with pytest.raises(ValueError, match="k="):
        xspec.lanczos_vs_eigsh(np.eye(4), k=4)
