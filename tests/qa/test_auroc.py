"""gnuq_core.qa.auroc: AUROC (+ bootstrap), ROC, PRR, balanced accuracy against known values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from gnuq_core.qa import auroc as qa_auroc
from gnuq_core.qa.auroc import (
    _auroc_rows,
    auroc,
    balanced_accuracy,
    bootstrap_auroc,
    paired_bootstrap_difference,
    prr,
    rejection_curve,
    roc,
)


def test_auroc_known_values() -> None:
    assert auroc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert auroc([0, 0, 1, 1], [0.9, 0.8, 0.2, 0.1]) == 0.0
    assert auroc([0, 1, 0, 1], [1, 1, 1, 1]) == 0.5  # ties count half
    assert auroc([0, 1, 1], [0.3, 0.2, 0.4]) == 0.5
    assert np.isnan(auroc([1, 1], [0.1, 0.2]))


def test_rank_form_equals_sklearn_with_ties() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, (20, 30)).astype(float)
    s = rng.integers(0, 5, (20, 30)).astype(float)
    ours = _auroc_rows(y, s)
    ref = [roc_auc_score(y[i], s[i]) for i in range(20)]
    np.testing.assert_allclose(ours, ref)


def test_bootstrap_ci_contains_point_and_narrows_with_n() -> None:
    rng = np.random.default_rng(1)
    def draw(n):
        y = rng.integers(0, 2, n)
        return y, y + rng.normal(0, 1.0, n)
    small = bootstrap_auroc(*draw(40), n_boot=500)
    big = bootstrap_auroc(*draw(2000), n_boot=500)
    for r in (small, big):
        assert r.lo <= r.auroc <= r.hi
    assert (big.hi - big.lo) < (small.hi - small.lo)
    assert big.auroc == pytest.approx(0.76, abs=0.03)  # Φ(1/√2) for unit shift, unit noise
    assert bootstrap_auroc([0, 0, 1, 1], [0, 1, 2, 3], seed=3) == bootstrap_auroc([0, 0, 1, 1], [0, 1, 2, 3], seed=3)


def test_paired_difference() -> None:
    y = np.array([0, 0, 0, 1, 1, 1] * 5)
    d, lo, hi = paired_bootstrap_difference(y, y + 0.0, -y + 0.0, n_boot=200)
    assert d == 1.0 and lo == 1.0 and hi == 1.0


def test_roc_endpoints() -> None:
    fpr, tpr = roc([0, 1, 0, 1], [0.1, 0.9, 0.4, 0.3])
    assert fpr[0] == 0 and tpr[-1] == 1 and fpr[-1] == 1


def test_rejection_curve_and_prr() -> None:
    correct = np.array([1, 1, 0, 0])
    # uncertainty ranks the wrong answers as most uncertain: the oracle, PRR 1
    assert prr(correct, [0.1, 0.2, 0.8, 0.9]) == pytest.approx(1.0)
    assert prr(correct, [0.9, 0.8, 0.2, 0.1]) < 0
    # constant score: random rejection in expectation, PRR 0
    assert prr(correct, [1, 1, 1, 1]) == pytest.approx(0.0)
    np.testing.assert_allclose(rejection_curve(correct, [0.1, 0.2, 0.8, 0.9]), [0.5, 2 / 3, 1.0, 1.0])
    assert np.isnan(prr([1, 1], [0.1, 0.2]))


def test_balanced_accuracy() -> None:
    assert balanced_accuracy([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.75)
    assert balanced_accuracy([1, 0, 0, 0], [1, 1, 1, 1]) == pytest.approx(0.5)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="score 1 is nan"):
        auroc([0, 1], [0.0, float("nan")])
    with pytest.raises(ValueError, match="0/1"):
        auroc([0, 2], [0.0, 1.0])


def test_replicates_memo_computes_each_column_once_and_equals_the_functions(monkeypatch) -> None:
    t = pd.DataFrame({"incorrect": [1, 0, 1, 0, 1, 0], "a": [0.9, 0.1, 0.4, 0.5, 0.8, 0.3],
                      "b": [0.2, 0.3, 0.9, 0.1, 0.5, 0.6]})
    reps = qa_auroc.AurocReplicates(n_boot=100, seed=4)
    point, r = reps(t, "a")
    assert point == qa_auroc.auroc(t["incorrect"], t["a"])
    np.testing.assert_array_equal(r, qa_auroc.bootstrap_replicates(t["incorrect"], t["a"], n_boot=100, seed=4))
    calls = []
    original = qa_auroc._resampled_aurocs
    monkeypatch.setattr(qa_auroc, "_resampled_aurocs", lambda *a, **k: calls.append(a) or original(*a, **k))
    assert reps(t, "a")[0] == point and calls == []  # from the memo
    assert reps(t.copy(), "a")[0] == point and calls == []  # keyed by contents: another table, the same column
    reps(t, "b")
    assert len(calls) == 1  # a new column is computed


def test_shared_replicates_must_match_the_bootstrap_settings() -> None:
    from gnuq_core.qa import headline

    t = pd.DataFrame({"incorrect": [1, 0, 1, 0], "epistemic": [0.9, 0.1, 0.4, 0.5]})
    with pytest.raises(ValueError, match="n_boot=100, seed=4, not n_boot=200, seed=4"):
        headline.mean_auroc_over_models([t], "epistemic", min_per_class=1, n_boot=200, seed=4,
                                        replicates=qa_auroc.AurocReplicates(100, 4))
