"""Cross-model transfer of a raw uncertainty scale (claim C9).

A decision rule "flag the answer as wrong when the score exceeds t" is fitted on one
model's answers (the *source*) and applied unchanged to another model's (the *target*).
Gradient norms have no common unit across models (different parameter counts, widths and
output scales), so a threshold on the raw scale need not mean anything on another model,
even when both models rank their own answers well.

* `fit_threshold`: the t that maximises balanced accuracy on the source (Youden's J).
* `fit_logistic`: a logistic calibration P(wrong | score) on the source; flag at 0.5.
* `cross_validated_balanced_accuracy`: the within-model reference, with the rule fitted
  on k−1 folds of the target itself and scored on the held-out fold (not in-sample, which
  would flatter it on a few dozen questions).
* `transfer`: both numbers for one source → target pair, with a bootstrap CI of the
  transferred balanced accuracy (source and target questions resampled independently) and
  of its difference from the within-model one (paired: the same resampled target questions
  score both rules; the within-model rule is the out-of-fold flags, held fixed).
* `mean_with_ci`, `mean_difference_with_ci`: the means over several transfers.
* `classifier_transfer`: the paper's own protocol (its limitations section): a correctness
  classifier, logistic regression on the uncertainty estimates (standardised on the source),
  trained on one model's answers and evaluated on another's: its AUROC (below 0.5: the
  relation inverts) and balanced accuracy on the target, with bootstrap intervals over the
  target's questions.

AUROC is invariant to any increasing map of the scores, so a transferred *ranking* is
exactly as good as the within-model one: transfer fails, or not, only through the scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gnuq_core.qa.auroc import auroc, balanced_accuracy
from gnuq_core.stats import percentile_interval

__all__ = ["fit_threshold", "fit_logistic", "cross_validated_flags", "cross_validated_balanced_accuracy",
           "TransferResult", "transfer", "mean_with_ci", "mean_difference_with_ci", "classifier_transfer"]


def _arrays(score: Sequence[float], incorrect: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(score, float)
    y = np.asarray(incorrect, bool)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"scores {s.shape} and labels {y.shape} must be 1-D of the same length")
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite (use log10 of tiny gradient norms)")
    return s, y


def fit_threshold(score: Sequence[float], incorrect: Sequence[float]) -> float:
    """Threshold t maximising balanced accuracy of ``score > t`` (flag = predicted wrong).

    Candidates are midpoints between consecutive distinct scores plus both ends; ties in
    balanced accuracy go to the median candidate among the best. With one class only the
    median score is returned.
    """
    s, y = _arrays(score, incorrect)
    if y.all() or (~y).all():
        return float(np.median(s))
    u, where = np.unique(s, return_inverse=True)
    cands = np.concatenate([[u[0] - 1.0], (u[:-1] + u[1:]) / 2, [u[-1] + 1.0]])
    # candidate k flags the answers scoring u[k] or more (the last one flags none): counts
    # from the top by a reversed cumulative sum, O(n log n) instead of an n × n table
    wrong_at = np.bincount(where, weights=y, minlength=u.size)
    right_at = np.bincount(where, weights=~y, minlength=u.size)
    wrong_flagged = np.concatenate([np.cumsum(wrong_at[::-1])[::-1], [0.0]])
    right_flagged = np.concatenate([np.cumsum(right_at[::-1])[::-1], [0.0]])
    tpr = wrong_flagged / y.sum()
    tnr = ((~y).sum() - right_flagged) / (~y).sum()
    ba = 0.5 * (tpr + tnr)
    best = np.flatnonzero(np.isclose(ba, ba.max()))
    return float(cands[best[len(best) // 2]])


def fit_logistic(score: Sequence[float], incorrect: Sequence[float]) -> tuple[float, float]:
    """(slope, intercept) of a logistic regression P(wrong) = σ(a·score + b) (scikit-learn)."""
    from sklearn.linear_model import LogisticRegression

    s, y = _arrays(score, incorrect)
    if y.all() or (~y).all():
        return 0.0, float(np.log((y.mean() + 1e-9) / (1 - y.mean() + 1e-9)))
    m = LogisticRegression(C=1e4).fit(s[:, None], y.astype(int))
    return float(m.coef_[0, 0]), float(m.intercept_[0])


def _logistic_flags(score: np.ndarray, slope: float, intercept: float) -> np.ndarray:
    return slope * score + intercept > 0


def cross_validated_flags(score: Sequence[float], incorrect: Sequence[float], *, k: int = 5, seed: int = 0,
                          method: str = "threshold") -> np.ndarray | None:
    """Each answer's flag from the rule fitted on the other folds (stratified k-fold), or
    ``None`` when a class has fewer than two answers."""
    from sklearn.model_selection import StratifiedKFold

    s, y = _arrays(score, incorrect)
    k = int(min(k, y.sum(), (~y).sum()))
    if k < 2:
        return None
    flags = np.zeros_like(y)
    for tr, te in StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(s[:, None], y):
        if method == "threshold":
            flags[te] = s[te] > fit_threshold(s[tr], y[tr])
        else:
            flags[te] = _logistic_flags(s[te], *fit_logistic(s[tr], y[tr]))
    return flags


def cross_validated_balanced_accuracy(score: Sequence[float], incorrect: Sequence[float], *, k: int = 5,
                                      seed: int = 0, method: str = "threshold") -> float:
    """Within-model balanced accuracy with the rule fitted out of fold (stratified k-fold)."""
    flags = cross_validated_flags(score, incorrect, k=k, seed=seed, method=method)
    return float("nan") if flags is None else balanced_accuracy(np.asarray(incorrect, bool), flags)


@dataclass(frozen=True)
class TransferResult:
    """One source → target transfer.

    Attributes
    ----------
    threshold_source, threshold_target : float
        Balanced-accuracy-optimal thresholds fitted on each model's own answers.
    transferred_ba, transferred_ci : float, tuple
        Balanced accuracy on the target of the source's threshold, with its bootstrap CI.
    transferred_logistic_ba : float
        The same with the source's logistic calibration (flag at P(wrong) > 0.5).
    within_ba : float
        Target's cross-validated within-model balanced accuracy (threshold rule).
    within_logistic_ba : float
        The same with logistic calibration.
    flagged_fraction : float
        Fraction of the target's answers the transferred threshold flags.
    auroc_target : float
        Target AUROC (identical for transferred and within-model rules: ranks only).
    boot : numpy.ndarray
        Bootstrap replicates of the transferred balanced accuracy.
    difference_boot : numpy.ndarray
        The same replicates minus the within-model balanced accuracy of the out-of-fold
        flags on the same resampled target questions (empty without within-model flags).
    counts : tuple of int
        (source correct, source wrong, target correct, target wrong).
    """

    threshold_source: float
    threshold_target: float
    transferred_ba: float
    transferred_ci: tuple[float, float]
    transferred_logistic_ba: float
    within_ba: float
    within_logistic_ba: float
    flagged_fraction: float
    auroc_target: float
    boot: np.ndarray
    difference_boot: np.ndarray = field(default_factory=lambda: np.empty(0))
    counts: tuple[int, int, int, int] = (0, 0, 0, 0)


def transfer(source_score: Sequence[float], source_incorrect: Sequence[float], target_score: Sequence[float],
             target_incorrect: Sequence[float], *, n_boot: int = 500, seed: int = 0) -> TransferResult:
    """Fit the rule on the source, apply it to the target; compare with within-target."""
    ss, sy = _arrays(source_score, source_incorrect)
    ts, ty = _arrays(target_score, target_incorrect)
    t_src = fit_threshold(ss, sy)
    flags = ts > t_src
    ba = balanced_accuracy(ty, flags)
    lg = fit_logistic(ss, sy)
    ba_log = balanced_accuracy(ty, _logistic_flags(ts, *lg))
    within_flags = cross_validated_flags(ts, ty, seed=seed)
    rng = np.random.default_rng(seed)
    boot, diff = [], []
    for _ in range(n_boot):
        i = rng.integers(0, ss.size, ss.size)
        j = rng.integers(0, ts.size, ts.size)
        if sy[i].all() or (~sy[i]).all() or ty[j].all() or (~ty[j]).all():
            continue
        boot.append(balanced_accuracy(ty[j], ts[j] > fit_threshold(ss[i], sy[i])))
        if within_flags is not None:
            diff.append(boot[-1] - balanced_accuracy(ty[j], within_flags[j]))
    boot_a = np.asarray(boot, float)
    ci = percentile_interval(boot_a, 0.95, ba) if np.isfinite(ba) else (float("nan"), float("nan"))
    within = float("nan") if within_flags is None else balanced_accuracy(ty, within_flags)
    return TransferResult(
        threshold_source=t_src, threshold_target=fit_threshold(ts, ty), transferred_ba=ba, transferred_ci=ci,
        transferred_logistic_ba=ba_log, within_ba=within,
        within_logistic_ba=cross_validated_balanced_accuracy(ts, ty, seed=seed, method="logistic"),
        flagged_fraction=float(flags.mean()), auroc_target=auroc(ty, ts), boot=boot_a,
        difference_boot=np.asarray(diff, float),
        counts=(int((~sy).sum()), int(sy.sum()), int((~ty).sum()), int(ty.sum())))


def mean_with_ci(results: Sequence[TransferResult]) -> tuple[float, tuple[float, float]]:
    """Mean transferred balanced accuracy over several transfers, with a CI from their
    independent bootstrap replicates (replicate r of each, averaged)."""
    vals = np.array([r.transferred_ba for r in results], float)
    point = float(np.nanmean(vals))
    boots = [r.boot for r in results if r.boot.size]
    if not boots or len(boots) < len(results):
        return point, (float("nan"), float("nan"))
    m = min(b.size for b in boots)
    avg = np.mean([b[:m] for b in boots], axis=0)
    lo, hi = np.quantile(avg, [0.025, 0.975])
    return point, (float(min(lo, point)), float(max(hi, point)))


def mean_difference_with_ci(results: Sequence[TransferResult]) -> tuple[float, float, float]:
    """Mean over transfers of transferred − within-model balanced accuracy, with a CI from
    their paired replicates (`TransferResult.difference_boot`, replicate r of each, averaged).

    Returns ``(point, lo, hi)``; NaN where a transfer has no within-model replicates.
    """
    point = float(np.mean([r.transferred_ba - r.within_ba for r in results])) if results else float("nan")
    boots = [r.difference_boot for r in results if r.difference_boot.size]
    if not results or len(boots) < len(results) or not np.isfinite(point):
        return point, float("nan"), float("nan")
    m = min(b.size for b in boots)
    avg = np.mean([b[:m] for b in boots], axis=0)
    lo, hi = np.quantile(avg, [0.025, 0.975])
    return point, float(min(lo, point)), float(max(hi, point))


def classifier_transfer(source: np.ndarray, source_incorrect: Sequence[float], target: np.ndarray,
                        target_incorrect: Sequence[float], *, n_boot: int = 500, seed: int = 0) -> dict[str, float]:
    """A logistic-regression correctness classifier on features ``source`` (rows: answers),
    standardised with the source's mean and standard deviation, applied to ``target``.

    Returns the target's ``auroc`` of the predicted P(wrong) and ``balanced_accuracy`` of its
    0.5 decision, each with a 95 % percentile interval over ``n_boot`` resamples of the target's
    questions (the classifier held fixed)."""
    from sklearn.linear_model import LogisticRegression

    xs, xt = np.asarray(source, float), np.asarray(target, float)
    ys, yt = np.asarray(source_incorrect, bool), np.asarray(target_incorrect, bool)
    if not (np.isfinite(xs).all() and np.isfinite(xt).all()):
        raise ValueError("classifier features must be finite (use log10 of tiny gradient norms)")
    mu, sd = xs.mean(0), np.where(xs.std(0) > 0, xs.std(0), 1.0)
    clf = LogisticRegression().fit((xs - mu) / sd, ys)
    prob = clf.predict_proba((xt - mu) / sd)[:, 1]
    flags = prob > 0.5
    rng = np.random.default_rng(seed)
    aucs, bas = [], []
    for _ in range(n_boot):
        j = rng.integers(0, yt.size, yt.size)
        if yt[j].all() or (~yt[j]).all():
            continue
        aucs.append(auroc(yt[j], prob[j]))
        bas.append(balanced_accuracy(yt[j], flags[j]))
    a, b = auroc(yt, prob), balanced_accuracy(yt, flags)
    (alo, ahi), (blo, bhi) = percentile_interval(np.asarray(aucs), 0.95, a), percentile_interval(np.asarray(bas), 0.95, b)
    return {"auroc": a, "auroc_lo": alo, "auroc_hi": ahi, "balanced_accuracy": b, "ba_lo": blo, "ba_hi": bhi,
            "flagged": float(flags.mean())}
