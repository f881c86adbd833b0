"""How well does an uncertainty score predict wrong answers? AUROC, bootstrap CIs, ROC, PRR.

Convention throughout: ``incorrect`` is 1 where the answer is wrong, and ``score`` is an
*uncertainty* (higher = less sure), so a useful score has AUROC > 0.5. Confidence scores
(P(True), sequence probability) must be negated first (the registered scores of
`gnuq_core.qa.scores` already are).

* `auroc`: scikit-learn's ``roc_auc_score`` (NaN when only one class is present).
* `bootstrap_auroc`: percentile bootstrap over questions, vectorised through the rank
  (Mann-Whitney) form of the AUROC, which equals scikit-learn's value with ties counted
  half; resamples with one class only are dropped.
* `paired_bootstrap_difference`: CI of AUROC(a) - AUROC(b) on the same resamples.
* `AurocReplicates`: each (table, score)'s AUROC and bootstrap replicates, computed once and
  shared by every comparison that needs them (a claim compares each method with the best
  one on the same resamples).
* `prr`: prediction-rejection ratio (Malinin et al. 2017; Malinin & Gales 2021): how much
  of the gap between random and oracle rejection the score closes, in accuracy-rejection
  curves; 1 = oracle, 0 = random, < 0 worse than random. Tied scores are rejected in a
  random order, in expectation.
"""

from __future__ import annotations

import hashlib

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import rankdata

from gnuq_core.stats import percentile_interval, resample_indices

__all__ = ["auroc", "AurocCI", "AurocReplicates", "bootstrap_auroc", "bootstrap_replicates",
           "paired_bootstrap_difference", "roc", "prr", "rejection_curve", "balanced_accuracy"]


def _xy(incorrect: Sequence[float], score: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(incorrect, dtype=float)
    s = np.asarray(score, dtype=float)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"labels {y.shape} and scores {s.shape} must be 1-D and of the same length")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("labels must be 0/1 (1 = the answer is incorrect)")
    if np.isnan(s).any() or (s == np.inf).any():
        bad = int(np.flatnonzero(np.isnan(s) | (s == np.inf))[0])
        raise ValueError(f"score {bad} is {s[bad]}: scores must be finite or -inf (use log10 fields for tiny values)")
    low = s == -np.inf  # log10 of a value that is 0 (the estimator's convention): ranks below every other
    if low.any():
        s = s.copy()
        s[low] = (s[~low].min() - 1.0) if (~low).any() else 0.0
    return y, s


def auroc(incorrect: Sequence[float], score: Sequence[float]) -> float:
    """AUROC of ``score`` for predicting ``incorrect`` (scikit-learn); NaN if one class only."""
    from sklearn.metrics import roc_auc_score

    y, s = _xy(incorrect, score)
    if y.min() == y.max():
        return float("nan")
    return float(roc_auc_score(y, s))


def _resampled_aurocs(y: np.ndarray, s: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The rank-form AUROC of every resample ``idx`` (B, n) of ``(y, s)``, without sorting any resample.

    A resample is a count per question; the average rank of a question in it is the count
    of resampled questions with a lower score plus half (its group's count + 1), where a
    group holds the questions of one score value. So one sort of the scores serves every
    resample: O(B·n) instead of O(B·n log n), the same numbers as ranking each resample
    (`_auroc_rows`) up to float rounding.
    """
    b, n = idx.shape
    values, group = np.unique(s, return_inverse=True)
    g = values.size
    cells = (np.arange(b)[:, None] * g + group[idx]).ravel()  # (resample, score group) of every draw
    counts = np.bincount(cells, minlength=b * g).reshape(b, g).astype(float)
    pos = np.bincount(cells, weights=y[idx].ravel(), minlength=b * g).reshape(b, g)
    below = np.cumsum(counts, axis=1) - counts
    rank = below + (counts + 1) / 2
    n1 = pos.sum(1)
    n0 = n - n1
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((rank * pos).sum(1) - n1 * (n1 + 1) / 2) / (n1 * n0)


def _auroc_rows(y: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Rank-form AUROC of every row of (B, n) label and score arrays."""
    r = rankdata(s, axis=1)
    n1 = y.sum(1)
    n0 = y.shape[1] - n1
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((r * y).sum(1) - n1 * (n1 + 1) / 2) / (n1 * n0)


@dataclass(frozen=True)
class AurocCI:
    """AUROC with its percentile-bootstrap interval.

    Attributes
    ----------
    auroc, lo, hi : float
    n, n_incorrect : int
        Questions and wrong answers among them.
    n_boot : int
        Resamples that had both classes.
    """

    auroc: float
    lo: float
    hi: float
    n: int
    n_incorrect: int
    n_boot: int


def bootstrap_replicates(incorrect: Sequence[float], score: Sequence[float], *, n_boot: int = 2000,
                         seed: int = 0) -> np.ndarray:
    """AUROC of each of ``n_boot`` resamples of the questions (the resamples of
    `bootstrap_auroc` with the same seed); NaN where a resample has one class only."""
    y, s = _xy(incorrect, score)
    idx = resample_indices(y.size, n_boot, seed)
    return _resampled_aurocs(y, s, idx)


class AurocReplicates:
    """AUROC and bootstrap replicates of score-table columns, each distinct one computed once.

    Calling ``reps(table, score)`` returns ``(auroc, replicates)`` of ``table[score]`` for
    ``table["incorrect"]`` (`auroc`, `bootstrap_replicates` with this object's ``n_boot`` and
    ``seed``). The memo is keyed by the *contents* of the labels and the scores, so comparing
    every method with the best one, or judging a claim under many readings that share most
    columns (`gnuq_core.qa.readings`), computes each distinct column once (at 2,933 questions
    and 2,000 resamples, a fraction of a second each); the resample indices of each table size
    are drawn once.

    Parameters
    ----------
    n_boot, seed : int
        Bootstrap resamples and their seed (the same resamples for every column of a table).
    """

    def __init__(self, n_boot: int, seed: int) -> None:
        self.n_boot, self.seed = n_boot, seed
        self._memo: dict[tuple[bytes, bytes], tuple[float, np.ndarray]] = {}
        self._indices: dict[int, np.ndarray] = {}

    def __call__(self, table: Any, score: str) -> tuple[float, np.ndarray]:
        y, s = _xy(table["incorrect"].to_numpy(float), table[score].to_numpy(float))
        key = (hashlib.sha1(y.tobytes()).digest(), hashlib.sha1(s.tobytes()).digest())
        if key not in self._memo:
            if y.size not in self._indices:
                self._indices[y.size] = resample_indices(y.size, self.n_boot, self.seed)
            self._memo[key] = (auroc(y, s), _resampled_aurocs(y, s, self._indices[y.size]))
        return self._memo[key]


def bootstrap_auroc(incorrect: Sequence[float], score: Sequence[float], *, n_boot: int = 2000, seed: int = 0,
                    level: float = 0.95) -> AurocCI:
    """AUROC and its percentile-bootstrap CI (questions resampled with replacement).

    The interval is widened to contain the point estimate if needed (rare, small n).
    """
    y, s = _xy(incorrect, score)
    point = auroc(y, s)
    if not np.isfinite(point):
        return AurocCI(point, float("nan"), float("nan"), int(y.size), int(y.sum()), 0)
    idx = resample_indices(y.size, n_boot, seed)
    vals = _resampled_aurocs(y, s, idx)
    lo, hi = percentile_interval(vals, level, point)
    return AurocCI(point, lo, hi, int(y.size), int(y.sum()), int(np.isfinite(vals).sum()))


def paired_bootstrap_difference(incorrect: Sequence[float], score_a: Sequence[float], score_b: Sequence[float],
                                *, n_boot: int = 2000, seed: int = 0, level: float = 0.95
                                ) -> tuple[float, float, float]:
    """AUROC(a) − AUROC(b) on the same questions, with a paired percentile-bootstrap CI."""
    y, a = _xy(incorrect, score_a)
    _, b = _xy(incorrect, score_b)
    point = auroc(y, a) - auroc(y, b)
    if not np.isfinite(point):
        return point, float("nan"), float("nan")
    idx = resample_indices(y.size, n_boot, seed)
    d = _auroc_rows(y[idx], a[idx]) - _auroc_rows(y[idx], b[idx])
    lo, hi = percentile_interval(d, level, point)
    return float(point), lo, hi


def roc(incorrect: Sequence[float], score: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(false-positive rate, true-positive rate) of the ROC curve (scikit-learn)."""
    from sklearn.metrics import roc_curve

    y, s = _xy(incorrect, score)
    fpr, tpr, _ = roc_curve(y, s)
    return fpr, tpr


def rejection_curve(correct: Sequence[float], uncertainty: Sequence[float]) -> np.ndarray:
    """Expected accuracy of the kept answers after rejecting the k most uncertain, k = 0..n−1.

    Ties are broken at random, in expectation: each answer's correctness is replaced by the
    mean correctness of its tie group before accumulating.
    """
    c, u = _xy(correct, uncertainty)
    order = np.argsort(u, kind="stable")  # most certain first
    u_sorted, c_sorted = u[order], c[order]
    _, inv, counts = np.unique(u_sorted, return_inverse=True, return_counts=True)
    group_mean = np.bincount(inv, weights=c_sorted) / counts
    smooth = group_mean[inv]
    kept = np.arange(c.size, 0, -1)  # n, n-1, ..., 1 answers kept
    return np.cumsum(smooth)[kept - 1] / kept


def prr(correct: Sequence[float], uncertainty: Sequence[float]) -> float:
    """Prediction-rejection ratio: (AUC_score − AUC_random) / (AUC_oracle − AUC_random).

    Areas are means of the accuracy-rejection curves (`rejection_curve`); the oracle rejects
    wrong answers first. NaN when all answers are right or all wrong.
    """
    c, u = _xy(correct, uncertainty)
    if c.min() == c.max():
        return float("nan")
    area = rejection_curve(c, u).mean()
    oracle = rejection_curve(c, 1.0 - c).mean()
    rnd = c.mean()
    return float((area - rnd) / (oracle - rnd))


def balanced_accuracy(incorrect: Sequence[float], flagged: Sequence[bool]) -> float:
    """Mean of the true-positive rate (wrong answers flagged) and true-negative rate."""
    y = np.asarray(incorrect, dtype=bool)
    f = np.asarray(flagged, dtype=bool)
    if y.shape != f.shape:
        raise ValueError(f"{y.size} labels against {f.size} decisions")
    if y.all() or (~y).all():
        return float("nan")
    return float(0.5 * (f[y].mean() + (~f[~y]).mean()))
