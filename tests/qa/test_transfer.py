"""gnuq_core.qa.transfer: thresholds, logistic calibration and cross-model transfer."""

from __future__ import annotations

import numpy as np
import pytest

from gnuq_core.qa.transfer import cross_validated_balanced_accuracy, fit_logistic, fit_threshold, mean_with_ci, transfer


def test_fit_threshold_separates() -> None:
    t = fit_threshold([1, 2, 3, 10, 11, 12], [0, 0, 0, 1, 1, 1])
    assert 3 < t < 10


def test_fit_logistic_direction() -> None:
    a, _ = fit_logistic([1, 2, 3, 4, 10, 11, 12, 13], [0, 0, 1, 0, 1, 0, 1, 1])
    assert a > 0


def _model(rng, n, shift):
    y = rng.integers(0, 2, n).astype(bool)
    return y * 2.0 + rng.normal(0, 0.5, n) + shift, y


def test_transfer_fails_across_a_scale_shift_but_ranks_survive() -> None:
    rng = np.random.default_rng(0)
    s_a, y_a = _model(rng, 200, 0.0)
    s_b, y_b = _model(rng, 200, 100.0)  # same signal, raw scale 100 units higher
    r = transfer(s_a, y_a, s_b, y_b, n_boot=100)
    assert r.within_ba > 0.9 and r.auroc_target > 0.9
    assert r.transferred_ba == pytest.approx(0.5)  # everything flagged
    assert r.flagged_fraction == 1.0
    assert r.transferred_ci[1] <= 0.55
    same = transfer(s_a, y_a, s_a, y_a, n_boot=100)
    assert same.transferred_ba > 0.9


def test_cv_and_mean_ci() -> None:
    rng = np.random.default_rng(1)
    s, y = _model(rng, 100, 0.0)
    assert cross_validated_balanced_accuracy(s, y) > 0.85
    assert cross_validated_balanced_accuracy(s, y, method="logistic") > 0.85
    rs = [transfer(s, y, s + 50, y, n_boot=50), transfer(s, y, s, y, n_boot=50)]
    m, (lo, hi) = mean_with_ci(rs)
    assert lo <= m <= hi and 0.6 < m < 0.8


def test_paired_difference_from_within_model_detects_a_shifted_scale():
    from gnuq_core.qa import transfer as transfer_module

    rng = np.random.default_rng(1)
    y1, y2 = rng.random(300) < 0.4, rng.random(300) < 0.5
    s1, s2 = rng.normal(size=300) + 1.5 * y1, rng.normal(size=300) + 1.5 * y2
    same = transfer(s1, y1, s2, y2, n_boot=300, seed=0)
    shifted = transfer(s1, y1, s2 + 4.0, y2, n_boot=300, seed=0)
    assert same.counts == (int((~y1).sum()), int(y1.sum()), int((~y2).sum()), int(y2.sum()))
    d, lo, hi = transfer_module.mean_difference_with_ci([same])
    assert lo <= 0 <= hi or abs(d) < 0.05  # same scale: no real loss
    d, lo, hi = transfer_module.mean_difference_with_ci([shifted])
    assert hi < 0 and d == pytest.approx(shifted.transferred_ba - shifted.within_ba)
    flags = transfer_module.cross_validated_flags(s2, y2, seed=0)
    assert shifted.within_ba == pytest.approx(transfer_module.balanced_accuracy(y2, flags))


def _brute_force_threshold(s: np.ndarray, y: np.ndarray) -> float:
    """The definition, candidate by candidate: an n × n table of flags."""
    u = np.unique(s)
    cands = np.concatenate([[u[0] - 1.0], (u[:-1] + u[1:]) / 2, [u[-1] + 1.0]])
    flags = s[None, :] > cands[:, None]
    ba = 0.5 * ((flags & y).sum(1) / y.sum() + (~flags & ~y).sum(1) / (~y).sum())
    best = np.flatnonzero(np.isclose(ba, ba.max()))
    return float(cands[best[len(best) // 2]])


def test_fit_threshold_equals_the_candidate_by_candidate_definition_with_ties() -> None:
    rng = np.random.default_rng(3)
    for n in (3, 17, 200, 1000):
        for decimals in (0, 1, 3):
            s = np.round(rng.standard_normal(n), decimals)  # few distinct values: many ties
            y = rng.random(n) < 0.3
            y[:2] = [True, False]
            assert fit_threshold(s, y) == _brute_force_threshold(s, y)


def test_the_classifier_transfer_ranks_the_target_with_the_sources_fit() -> None:
    import numpy as np

    from gnuq_core.qa.transfer import classifier_transfer

    rng = np.random.default_rng(0)
    def model(n, sign, shift):
        wrong = rng.uniform(size=n) < 0.5
        x = np.column_stack([rng.standard_normal(n) + sign * 2.0 * wrong + shift, rng.uniform(0, 0.25, n)])
        return x, wrong
    xs, ys = model(300, 1.0, 0.0)
    same, ysame = model(300, 1.0, 5.0)    # the same relation on another scale: ranking carries over
    flip, yflip = model(300, -1.0, 0.0)   # the relation inverted
    good = classifier_transfer(xs, ys, same, ysame, n_boot=100)
    bad = classifier_transfer(xs, ys, flip, yflip, n_boot=100)
    assert good["auroc_lo"] > 0.8 and good["flagged"] > 0.9  # a shifted scale: right ranking, wrong decisions
    assert bad["auroc_hi"] < 0.3 and 0 <= bad["balanced_accuracy"] <= 0.5
