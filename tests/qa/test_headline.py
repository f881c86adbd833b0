"""gnuq_core.qa.headline: mean-over-models AUROC with its CI, and the C6/C7/C9 measurements."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gnuq_core.qa import auroc, headline, scores
from gnuq_core.qa.transfer import TransferResult
from gnuq_core.repro import claims


def _table(wrong, score, name="epistemic"):
    return pd.DataFrame({"incorrect": wrong, name: score})


def test_mean_over_models_is_the_mean_of_each_models_auroc():
    a = _table([1, 1, 0, 0, 1, 0], [0.9, 0.8, 0.1, 0.3, 0.2, 0.5])
    b = _table([0, 1, 0, 1, 0, 1, 1], [0.1, 0.7, 0.2, 0.4, 0.9, 0.3, 0.8])
    p, lo, hi = headline.mean_auroc_over_models([a, b], "epistemic", min_per_class=2, n_boot=200, seed=0)
    assert p == pytest.approx((auroc.auroc(a["incorrect"], a["epistemic"]) + auroc.auroc(b["incorrect"], b["epistemic"])) / 2)
    reps = np.mean([auroc.bootstrap_replicates(t["incorrect"], t["epistemic"], n_boot=200, seed=0) for t in (a, b)], 0)
    reps = reps[np.isfinite(reps)]
    assert lo == pytest.approx(min(np.quantile(reps, 0.025), p)) and hi == pytest.approx(max(np.quantile(reps, 0.975), p))
    # a model with too few wrong answers is left out
    c = _table([0, 0, 0, 0, 1, 0], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    alone = headline.mean_auroc_over_models([a], "epistemic", min_per_class=2, n_boot=200, seed=0)
    assert headline.mean_auroc_over_models([a, c], "epistemic", min_per_class=2, n_boot=200, seed=0) == alone
    # a missing score (its pass did not run) or no usable model: NaN
    assert all(math.isnan(v) for v in headline.mean_auroc_over_models([c], "epistemic", min_per_class=2,
                                                                      n_boot=10, seed=0))
    nan = _table([1, 0], [np.nan, 0.2])
    assert math.isnan(headline.mean_auroc_over_models([a, nan], "epistemic", min_per_class=1, n_boot=10, seed=0)[0])
    with pytest.raises(KeyError, match="no score 'epistemc'"):
        headline.mean_auroc_over_models([a], "epistemc", min_per_class=1, n_boot=10, seed=0)


def test_bootstrap_replicates_are_bootstrap_aurocs_resamples():
    y, s = [1, 0, 1, 0, 1], [0.9, 0.1, 0.4, 0.5, 0.8]
    reps = auroc.bootstrap_replicates(y, s, n_boot=300, seed=3)
    ci = auroc.bootstrap_auroc(y, s, n_boot=300, seed=3)
    assert ci.n_boot == int(np.isfinite(reps).sum())
    assert ci.lo == pytest.approx(min(np.quantile(reps[np.isfinite(reps)], 0.025), ci.auroc))


def _model(n_correct: int, n_wrong: int, seed: int, signal: float = 1.0) -> pd.DataFrame:
    """A score table where every claim method is noise, and ``combined`` and ``p_true`` carry
    ``signal`` (shifted up for wrong answers)."""
    rng = np.random.default_rng(seed)
    y = np.r_[np.zeros(n_correct), np.ones(n_wrong)]
    t = pd.DataFrame({"incorrect": y})
    for name in scores.names(claim=True):
        t[name] = rng.normal(size=y.size) + (signal * y if name in ("combined", "p_true") else 0)
    return t


def test_paired_difference_is_the_mean_difference_with_a_paired_interval():
    a, b = _model(60, 60, 0), _model(50, 70, 1)
    d, lo, hi = headline.mean_difference_over_models([a, b], "combined", "epistemic", min_per_class=2, n_boot=300,
                                                     seed=0)
    assert d == pytest.approx(np.mean([auroc.auroc(t["incorrect"], t["combined"]) -
                                       auroc.auroc(t["incorrect"], t["epistemic"]) for t in (a, b)]))
    assert 0 < lo < d < hi
    # paired: a score against itself plus a tiny jitter has a tiny interval, unlike two independent AUROCs
    a["combined2"] = a["combined"] + 1e-9 * np.arange(len(a))
    _, lo2, hi2 = headline.mean_difference_over_models([a], "combined", "combined2", min_per_class=2, n_boot=300,
                                                       seed=0)
    assert hi2 - lo2 < 0.01


def test_auroc_measurement_drops_thin_models_and_reports_evidence():
    tables = {"big": _model(80, 120, 0), "thin": _model(5, 195, 1)}
    m = headline.auroc_measurement("C6", tables, {"seed": 0}, n_boot=300, seed=0)
    assert m.claim == "C6" and m.evidence == {"models": 1, "questions": 200, "correct": 80, "wrong": 120}
    assert m.details["dropped"] == {"thin": "5 correct and 195 wrong of 200 answers"}
    assert m.value == pytest.approx(auroc.auroc(tables["big"]["incorrect"], tables["big"]["combined"]))
    assert set(m.details["differences"]) == set(scores.names(claim=True)) - {"combined"}
    assert m.details["differences"]["p_true"][1] < 0 < m.details["differences"]["epistemic"][1]
    parts = headline.part_measurements("C6", tables, {"seed": 0}, n_boot=300, seed=0)
    assert set(parts) == {"C6a", "C6b", "C6c"} and parts["C6b"].value == pytest.approx(m.value)
    assert parts["C6c"].details["closest"] in ("p_true", *headline.ENTROPY_BASELINES)
    assert claims.assess(m, parts).gate_passed
    # C7 compares P(True) with every other method
    m7 = headline.auroc_measurement("C7", tables, {}, n_boot=300, seed=0)
    assert "p_true" not in m7.details["differences"] and "combined" in m7.details["differences"]
    # no model counts: the uninformative value, and the gate says how far the data is
    none = headline.auroc_measurement("C6", {"thin": tables["thin"]}, {}, n_boot=50, seed=0)
    assert (none.value, none.ci, none.evidence["models"]) == (0.5, (0.0, 1.0), 0)
    a = claims.assess(none)
    assert a.verdict == claims.INCONCLUSIVE and "0 models" in a.reason and "5 correct" in a.reason
    with pytest.raises(ValueError, match="not an AUROC claim"):
        headline.auroc_measurement("C9", tables, {}, n_boot=10, seed=0)


def test_best_score_ranks_undefined_last():
    res = {m: (0.6, 0.5, 0.7) for m in scores.names(claim=True)}
    res["epistemic"] = (float("nan"),) * 3
    assert headline.best_score(res) == "aleatoric"  # first of the ties; undefined ones rank last


def _transfer(ba: float, within: float, counts=(100, 100, 100, 100)) -> TransferResult:
    boot = np.linspace(ba - 0.1, ba + 0.1, 50)
    return TransferResult(threshold_source=0.0, threshold_target=0.0, flagged_fraction=0.5, transferred_ba=ba,
                          transferred_ci=(ba - 0.1, ba + 0.1), transferred_logistic_ba=ba, within_ba=within,
                          within_logistic_ba=within, auroc_target=0.7, boot=boot,
                          difference_boot=boot - within, counts=counts)


def test_transfer_measurement():
    r = _transfer(0.5, 0.7)
    thin = _transfer(0.9, 0.9, counts=(3, 197, 100, 100))
    m = headline.transfer_measurement([r, r, thin], {})
    assert m.claim == "C9" and m.value == pytest.approx(0.5) and m.details["within_model_balanced_accuracy"] == 0.7
    assert m.evidence == {"transfers": 2, "correct": 100, "wrong": 100} and m.details["transfers_dropped"] == 1
    d, lo, hi = m.details["difference"]
    assert d == pytest.approx(-0.2) and lo < d < hi < 0
    assert claims.judge(m) == claims.REPRODUCED
    e = headline.transfer_measurement([], {})
    assert (e.value, e.ci, e.evidence["transfers"]) == (0.5, (0.0, 1.0), 0)
    assert claims.judge(e) == claims.INCONCLUSIVE


def test_auroc_measurement_differences_equal_the_separate_paired_differences():
    # the measurement computes each method's replicates once and reuses them; the result must be
    # what the public functions give one comparison at a time
    tables = {"a": _model(70, 90, 0), "b": _model(60, 100, 1)}
    m = headline.auroc_measurement("C7", tables, {}, n_boot=200, seed=4)
    for other, got in m.details["differences"].items():
        want = headline.mean_difference_over_models(list(tables.values()), "p_true", other, min_per_class=30,
                                                    n_boot=200, seed=4)
        assert got == pytest.approx(list(want), abs=1e-15)
    for name, got in m.details["auroc"].items():
        assert got == pytest.approx(headline.mean_auroc_over_models(list(tables.values()), name, min_per_class=30,
                                                                    n_boot=200, seed=4)[0], abs=1e-15)


def test_paired_tests_adjust_over_the_baselines() -> None:
    import numpy as np
    import pandas as pd

    from gnuq_core.qa.headline import paired_tests

    rng = np.random.default_rng(0)
    wrong = rng.uniform(size=300) < 0.5
    t = pd.DataFrame({"incorrect": wrong.astype(int), "combined": rng.standard_normal(300) + 2.0 * wrong,
                      "weak": rng.standard_normal(300) + 0.3 * wrong, "none": rng.standard_normal(300)})
    rows = paired_tests([t, t], "combined", ["weak", "none"], min_per_class=10, n_boot=200, seed=0)
    assert [r["baseline"] for r in rows] == ["weak", "none"]
    assert all(r["difference"] > 0.2 and r["lo"] > 0 and r["p_bh"] <= 0.01 and r["p_bh"] >= r["p"] for r in rows)
