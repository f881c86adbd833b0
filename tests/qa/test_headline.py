"""gnuq_core.qa.headline: mean-over-models AUROC with its CI, and the C6/C7/C9 measurements."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gnuq_core.qa import auroc, headline, scores
from gnuq_core.qa.transfer import TransferResult


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


def test_auroc_measurement_and_the_degenerate_case():
    names = scores.names(claim=True)
    res = {m: (0.6, 0.5, 0.7) for m in names}
    res["semantic_entropy"] = (float("nan"),) * 3
    m = headline.auroc_measurement("C6", res, {"seed": 0})
    assert (m.claim, m.value, m.ci) == ("C6", 0.6, (0.5, 0.7)) and not m.details["degenerate"]
    assert m.details["auroc"]["semantic_entropy"] == 0.5 and m.details["ci"]["semantic_entropy"] == [0.0, 1.0]
    assert list(m.details["auroc"]) == names
    res["epistemic"] = (float("nan"),) * 3
    m7 = headline.auroc_measurement("C7", res, {})
    assert (m7.value, m7.ci, m7.details["degenerate"]) == (0.5, (0.0, 1.0), True)
    assert headline.best_score(res) == "aleatoric"  # first of the ties; undefined ones rank last
    with pytest.raises(ValueError, match="not an AUROC claim"):
        headline.auroc_measurement("C9", res, {})


def test_transfer_measurement():
    boot = np.linspace(0.4, 0.6, 50)
    r = TransferResult(threshold_source=0.0, threshold_target=0.0, flagged_fraction=0.5, transferred_ba=0.5,
                       transferred_ci=(0.4, 0.6), transferred_logistic_ba=0.5, within_ba=0.7,
                       within_logistic_ba=0.7, auroc_target=0.7, boot=boot)
    m = headline.transfer_measurement([r, r], {})
    assert m.claim == "C9" and m.value == pytest.approx(0.5) and m.details["within_model_balanced_accuracy"] == 0.7
    assert not m.details["degenerate"]
    d = headline.transfer_measurement([], {})
    assert (d.value, d.ci, d.details["within_model_balanced_accuracy"], d.details["degenerate"]) == (
        0.5, (0.0, 1.0), 0.5, True)
