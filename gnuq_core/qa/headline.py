"""The QA chapter's headline numbers and the claims C6, C7 and C9 measured from them.

* `mean_auroc_over_models`: one score's AUROC on one dataset, averaged over the models (each
  model's own AUROC, then the mean), with a percentile-bootstrap interval from averaging the
  models' bootstrap replicates (the same resamples for every score within a model). A model
  with fewer than ``min_per_class`` correct (or wrong) answers is left out: its AUROC would
  rest on a handful of items.
* `auroc_measurement` (C6, C7) and `transfer_measurement` (C9): the
  `gnuq_core.repro.claims.Measurement` of a claim. A claim that cannot be measured (no model
  has both kinds of answers) is recorded as the uninformative value 0.5 with interval
  [0, 1] and flagged ``degenerate``; its verdict then means nothing.

The methods a claim compares are the registry's (`gnuq_core.qa.scores.names(claim=True)`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from gnuq_core.qa import auroc as _auroc
from gnuq_core.qa import scores
from gnuq_core.repro import claims

__all__ = ["CLAIM_SCORES", "mean_auroc_over_models", "mean_aurocs", "best_score", "auroc_measurement",
           "transfer_measurement"]

Interval = tuple[float, float, float]  # (point, lo, hi)

# The score each AUROC claim is about, and the dataset it is measured on.
CLAIM_SCORES: dict[str, tuple[str, str]] = {"C6": ("truthfulqa", "combined"), "C7": ("triviaqa", "epistemic")}
_NAN3: Interval = (float("nan"), float("nan"), float("nan"))


def mean_auroc_over_models(tables: Iterable[Any], score: str, *, min_per_class: int, n_boot: int,
                           seed: int) -> Interval:
    """Mean over models of the AUROC of ``score`` for ``incorrect``, with a bootstrap CI.

    Parameters
    ----------
    tables : iterable of pandas.DataFrame
        One score table per model (`gnuq_core.qa.study.score_table`), same dataset.
    score : str
        A registered score (column).
    min_per_class : int
        Fewest correct (and wrong) answers for a model to count.
    n_boot, seed : int
        Bootstrap resamples and their seed (the same seed for every model and score).

    Returns
    -------
    (point, lo, hi)
        NaN if any model lacks the score (a pass that did not run) or no model counts.
    """
    scores.get(score)
    points, reps = [], []
    for t in tables:
        if t[score].isna().any():
            return _NAN3
        n_wrong = int(t["incorrect"].sum())
        if min(n_wrong, len(t) - n_wrong) < min_per_class:
            continue
        y, s = t["incorrect"].to_numpy(float), t[score].to_numpy(float)
        reps.append(_auroc.bootstrap_replicates(y, s, n_boot=n_boot, seed=seed))
        points.append(_auroc.auroc(y, s))
    if not reps:
        return _NAN3
    rep = np.mean(reps, axis=0)  # a resample with one class in some model is dropped below
    rep = rep[np.isfinite(rep)]
    lo, hi = np.quantile(rep, [0.025, 0.975])
    p = float(np.mean(points))
    return p, float(min(lo, p)), float(max(hi, p))


def mean_aurocs(tables: Sequence[Any], names: Iterable[str], **kw: Any) -> dict[str, Interval]:
    """`mean_auroc_over_models` of each score in ``names`` (keyword arguments passed on)."""
    return {m: mean_auroc_over_models(tables, m, **kw) for m in names}


def best_score(res: Mapping[str, Interval], names: Iterable[str] | None = None) -> str:
    """The score with the highest mean AUROC among ``names`` (default: the claims' methods);
    undefined AUROCs rank last, ties go to the first in registry order."""
    names = scores.names(claim=True) if names is None else list(names)
    return max(names, key=lambda m: -1 if not np.isfinite(res[m][0]) else res[m][0])


def _finite_or_chance(v: Interval) -> tuple[float, tuple[float, float], bool]:
    if all(np.isfinite(v)):
        return v[0], (v[1], v[2]), False
    return 0.5, (0.0, 1.0), True


def auroc_measurement(claim: str, res: Mapping[str, Interval], settings: Mapping[str, Any]) -> claims.Measurement:
    """The C6 or C7 measurement from every claim method's mean AUROC (`mean_aurocs`).

    ``details`` holds each method's AUROC and CI (0.5 and [0, 1] where undefined) and
    ``degenerate`` (the claim's own score had no AUROC).
    """
    if claim not in CLAIM_SCORES:
        raise ValueError(f"claim {claim!r} is not an AUROC claim; use one of {', '.join(CLAIM_SCORES)}")
    value, ci, degenerate = _finite_or_chance(res[CLAIM_SCORES[claim][1]])
    methods = scores.names(claim=True)
    details = {"auroc": {m: float(res[m][0]) if np.isfinite(res[m][0]) else 0.5 for m in methods},
               "ci": {m: ([res[m][1], res[m][2]] if np.isfinite(res[m][0]) else [0.0, 1.0]) for m in methods},
               "degenerate": degenerate}
    return claims.Measurement(claim, value, ci, dict(settings), details)


def transfer_measurement(results: Sequence[Any], settings: Mapping[str, Any]) -> claims.Measurement:
    """The C9 measurement: mean transferred balanced accuracy of ``results``
    (`gnuq_core.qa.transfer.transfer`) with its CI, and the within-model balanced accuracy
    in ``details["within_model_balanced_accuracy"]`` (0.5 when degenerate)."""
    from gnuq_core.qa import transfer

    if results:
        value, ci = transfer.mean_with_ci(results)
        within = float(np.nanmean([r.within_ba for r in results]))
    else:
        value, ci, within = float("nan"), (float("nan"), float("nan")), float("nan")
    degenerate = not all(np.isfinite([value, *ci, within]))
    if degenerate:
        value, ci, within = 0.5, (0.0, 1.0), 0.5
    return claims.Measurement("C9", value, ci, dict(settings), {
        "within_model_balanced_accuracy": within, "score": "log10 ||grad p||^2", "degenerate": degenerate})
