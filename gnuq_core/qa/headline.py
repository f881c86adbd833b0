"""The QA chapter's headline numbers and the claims C6, C7 and C9 measured from them.

* `mean_auroc_over_models`: one score's AUROC on one dataset, averaged over the models (each
  model's own AUROC, then the mean), with a percentile-bootstrap interval from averaging the
  models' bootstrap replicates (the same resamples for every score within a model). A model
  with fewer than ``min_per_class`` correct (or wrong) answers is left out: its AUROC would
  rest on a handful of items.
* `mean_difference_over_models`: AUROC(a) − AUROC(b), averaged over the models, with a
  paired bootstrap interval (both scores on the same resampled questions): what decides
  whether one method is *better* than another.
* `auroc_measurement` (C6, C7) and `transfer_measurement` (C9): the
  `gnuq_core.repro.claims.Measurement` of a claim, with its ``evidence`` (models, questions,
  fewest correct and wrong answers) for the claim's gate. Only models with at least
  `gnuq_core.repro.claims.MIN_PER_CLASS` answers of each kind enter a claim; the others are
  named in ``details["dropped"]``. A claim no model can measure is recorded as the
  uninformative value 0.5 with interval [0, 1]; its gate then makes it *inconclusive*.

The methods a claim compares are the registry's (`gnuq_core.qa.scores.names(claim=True)`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from gnuq_core.qa import scores, transfer
from gnuq_core.qa import auroc as _auroc
from gnuq_core.repro import claims

__all__ = ["CLAIM_SCORES", "PART_SCORES", "ENTROPY_BASELINES", "mean_auroc_over_models", "mean_aurocs",
           "mean_difference_over_models", "best_score", "counts", "auroc_measurement", "part_measurements",
           "transfer_measurement", "paired_tests"]

Interval = tuple[float, float, float]  # (point, lo, hi)

# The score each AUROC claim is about, and the dataset it is measured on.
CLAIM_SCORES: dict[str, tuple[str, str]] = {"C6": ("truthfulqa", "combined"), "C7": ("triviaqa", "epistemic")}
# The method each AUROC claim says is best (compared with every other claim method by paired differences).
CLAIM_BEST: dict[str, str] = {"C6": "combined", "C7": "p_true"}
ENTROPY_BASELINES = ("mean_token_entropy", "predictive_entropy", "ln_predictive_entropy", "semantic_entropy")
"""The entropy baselines C6's third part says combined beats (with P(True))."""
# Each part of a compound QA claim: (score it is about, what it measures, the methods compared).
PART_SCORES: dict[str, tuple[str, str, tuple[str, ...] | None]] = {
    "C6a": ("combined", "highest", None),
    "C6b": ("combined", "level", ()),
    "C6c": ("combined", "beats", ("p_true", *ENTROPY_BASELINES)),
    "C7a": ("epistemic", "level", ()),
    "C7b": ("combined", "level", ()),
    "C7c": ("p_true", "beats", None),
}
_NAN3: Interval = (float("nan"), float("nan"), float("nan"))


def _memo(replicates: _auroc.AurocReplicates | None, n_boot: int, seed: int) -> _auroc.AurocReplicates:
    """``replicates`` if it was made with ``n_boot`` and ``seed``, a fresh memo if it is None."""
    if replicates is None:
        return _auroc.AurocReplicates(n_boot, seed)
    if (replicates.n_boot, replicates.seed) != (n_boot, seed):
        raise ValueError(f"the shared replicates were made with n_boot={replicates.n_boot}, seed={replicates.seed}, "
                         f"not n_boot={n_boot}, seed={seed}: make one AurocReplicates per setting")
    return replicates


def mean_auroc_over_models(tables: Iterable[Any], score: str, *, min_per_class: int, n_boot: int,
                           seed: int, replicates: _auroc.AurocReplicates | None = None) -> Interval:
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
    replicates : AurocReplicates, optional
        A memo shared by several calls (same ``n_boot`` and ``seed``), so that each table's
        replicates of a score are computed once; a fresh one by default.

    Returns
    -------
    (point, lo, hi)
        NaN if any model lacks the score (a pass that did not run) or no model counts.
    """
    scores.get(score)
    reps = _memo(replicates, n_boot, seed)
    return _mean_over_models(tables, (score,), lambda y, t: reps(t, score), min_per_class)


def _mean_over_models(tables: Iterable[Any], columns: Sequence[str],
                      one_model: Callable[[np.ndarray, Any], tuple[float, np.ndarray]],
                      min_per_class: int) -> Interval:
    """Mean over the models that count of ``one_model(incorrect, table) -> (point, replicates)``,
    with the 95% percentile interval of the averaged replicates (widened to the point).

    NaN if any model lacks one of ``columns`` (a pass that did not run) or no model has
    ``min_per_class`` correct and wrong answers. A replicate undefined in some model (one
    class only in its resample) is dropped.
    """
    points, reps = [], []
    for t in tables:
        if any(t[c].isna().any() for c in columns):
            return _NAN3
        n_wrong = int(t["incorrect"].sum())
        if min(n_wrong, len(t) - n_wrong) < min_per_class:
            continue
        point, rep = one_model(t["incorrect"].to_numpy(float), t)
        points.append(point)
        reps.append(rep)
    if not reps:
        return _NAN3
    rep = np.mean(reps, axis=0)
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


def mean_difference_over_models(tables: Iterable[Any], a: str, b: str, *, min_per_class: int, n_boot: int,
                                seed: int, replicates: _auroc.AurocReplicates | None = None) -> Interval:
    """Mean over models of AUROC(``a``) − AUROC(``b``) with a paired bootstrap CI.

    Within a model both scores are evaluated on the same resampled questions (the
    resamples of `gnuq_core.qa.auroc.bootstrap_replicates` with ``seed``), so the interval
    is that of the difference, not of two independent AUROCs; the models' replicates are
    averaged as in `mean_auroc_over_models`. NaN where a score is missing or no model counts.
    ``replicates`` is an optional shared memo, as in `mean_auroc_over_models`.
    """

    reps = _memo(replicates, n_boot, seed)

    def one_model(y: np.ndarray, t: Any) -> tuple[float, np.ndarray]:
        (pa, ra), (pb, rb) = reps(t, a), reps(t, b)
        return pa - pb, ra - rb

    return _mean_over_models(tables, (a, b), one_model, min_per_class)


def counts(tables: Mapping[str, Any], min_per_class: int) -> tuple[dict[str, int], dict[str, str]]:
    """The evidence of an AUROC claim, and the models left out.

    Returns ``({"models", "questions", "correct", "wrong"}, {model: why dropped})``: counts over
    the models with at least ``min_per_class`` correct and wrong answers (fewest correct and
    fewest wrong among them). If no model counts, ``correct``/``wrong`` are those of the model
    closest to counting, so the gate's message says how far the data is from deciding.
    """
    kept, dropped = {}, {}
    for name, t in tables.items():
        wrong = int(t["incorrect"].sum())
        correct = len(t) - wrong
        if min(correct, wrong) >= min_per_class:
            kept[name] = (correct, wrong, len(t))
        else:
            dropped[name] = f"{correct} correct and {wrong} wrong of {len(t)} answers"
    pool = kept or {n: (len(t) - int(t["incorrect"].sum()), int(t["incorrect"].sum()), len(t))
                    for n, t in tables.items()}
    if not pool:
        return {"models": 0, "questions": 0, "correct": 0, "wrong": 0}, dropped
    if kept:
        correct, wrong = min(c for c, _, _ in pool.values()), min(w for _, w, _ in pool.values())
    else:
        correct, wrong, _ = max(pool.values(), key=lambda v: min(v[0], v[1]))
    return {"models": len(kept), "questions": sum(n for _, _, n in kept.values()), "correct": correct,
            "wrong": wrong}, dropped


def _finite_or_chance(v: Interval) -> tuple[float, tuple[float, float]]:
    if all(np.isfinite(v)):
        return v[0], (v[1], v[2])
    return 0.5, (0.0, 1.0)


def auroc_measurement(claim: str, tables: Mapping[str, Any], settings: Mapping[str, Any], *, n_boot: int,
                      seed: int, min_per_class: int = claims.MIN_PER_CLASS) -> claims.Measurement:
    """The C6 or C7 measurement from each model's score table on the claim's dataset.

    Parameters
    ----------
    claim : {"C6", "C7"}
    tables : mapping of model name to pandas.DataFrame
        Score tables (`gnuq_core.qa.study.score_table`) of the claim's dataset.
    settings : mapping
        Recorded with the measurement.
    n_boot, seed : int
        Bootstrap resamples and their seed.
    min_per_class : int
        Fewest correct and wrong answers for a model to enter the claim.

    Returns
    -------
    Measurement
        ``value``: the claim score's mean AUROC over the models that count; ``details``:
        ``auroc`` and ``ci`` of every claim method (0.5 and [0, 1] where undefined),
        ``differences`` {method: [best − method, lo, hi]} for the method the claim says is
        best (`CLAIM_BEST`), ``dropped`` {model: why}; ``evidence``: see `counts`.
    """
    if claim not in CLAIM_SCORES:
        raise ValueError(f"claim {claim!r} is not an AUROC claim; use one of {', '.join(CLAIM_SCORES)}")
    methods = scores.names(claim=True)
    kw = dict(min_per_class=min_per_class, n_boot=n_boot, seed=seed,
              replicates=_auroc.AurocReplicates(n_boot, seed))
    res = mean_aurocs(list(tables.values()), methods, **kw)
    value, ci = _finite_or_chance(res[CLAIM_SCORES[claim][1]])
    best = CLAIM_BEST[claim]
    diffs = {m: mean_difference_over_models(list(tables.values()), best, m, **kw) for m in methods if m != best}
    evidence, dropped = counts(tables, min_per_class)
    details = {"auroc": {m: float(res[m][0]) if np.isfinite(res[m][0]) else 0.5 for m in methods},
               "ci": {m: ([res[m][1], res[m][2]] if np.isfinite(res[m][0]) else [0.0, 1.0]) for m in methods},
               "differences": {m: ([float(x) for x in d] if all(np.isfinite(d)) else [0.0, -1.0, 1.0])
                               for m, d in diffs.items()},
               "best_method": best, "dropped": dropped}
    return claims.Measurement(claim, value, ci, dict(settings), details, evidence=evidence)


def transfer_measurement(results: Sequence[Any], settings: Mapping[str, Any], *,
                         min_per_class: int = claims.MIN_PER_CLASS) -> claims.Measurement:
    """The C9 measurement from `gnuq_core.qa.transfer.transfer` results (each direction and dataset).

    Only transfers whose source and target both have ``min_per_class`` correct and wrong
    answers enter it. ``value``: their mean transferred balanced accuracy with its CI;
    ``details``: the mean within-model balanced accuracy and ``difference`` [transferred −
    within, lo, hi] (paired bootstrap, `gnuq_core.qa.transfer.mean_difference_with_ci`);
    ``evidence``: ``transfers`` used and the fewest ``correct`` and ``wrong`` answers of a model
    in them. Undefined numbers are recorded as 0.5 [0, 1] (the gate makes them inconclusive).
    """
    used = [r for r in results if min(r.counts) >= min_per_class]
    if used:
        value, ci = transfer.mean_with_ci(used)
        within = float(np.nanmean([r.within_ba for r in used]))
        diff = transfer.mean_difference_with_ci(used)
    else:
        value, ci, within, diff = float("nan"), (float("nan"), float("nan")), float("nan"), (float("nan"),) * 3
    if not all(np.isfinite([value, *ci])):
        value, ci = 0.5, (0.0, 1.0)
    within = within if np.isfinite(within) else 0.5
    diff = [float(x) for x in diff] if all(np.isfinite(diff)) else [0.0, -1.0, 1.0]
    pool = used or list(results)
    correct = min((min(r.counts[0], r.counts[2]) for r in pool), default=0)
    wrong = min((min(r.counts[1], r.counts[3]) for r in pool), default=0)
    if not used and pool:  # how far the closest transfer is from counting
        closest = max(pool, key=lambda r: min(r.counts))
        correct, wrong = min(closest.counts[0], closest.counts[2]), min(closest.counts[1], closest.counts[3])
    return claims.Measurement("C9", value, ci, dict(settings), {
        "within_model_balanced_accuracy": within, "difference": diff, "score": "log10 ||grad p||^2",
        "transfers_dropped": len(results) - len(used)},
        evidence={"transfers": len(used), "correct": correct, "wrong": wrong})


def part_measurements(claim: str, tables: Mapping[str, Any], settings: Mapping[str, Any], *, n_boot: int,
                      seed: int, min_per_class: int = claims.MIN_PER_CLASS,
                      replicates: _auroc.AurocReplicates | None = None) -> dict[str, claims.Measurement]:
    """The measurement of every part of compound claim ``claim`` (C6 or C7) from score tables.

    ``tables`` maps each model to its score table under one reading
    (`gnuq_core.qa.readings.reading_table`). A part about a level (C6b, C7a, C7b) measures
    the mean AUROC of its score; a part about an ordering (C6a, C6c, C7c) measures the
    smallest paired difference "its score − other method" over the methods it is compared
    with (``None``: every other claim method), with every difference in ``details``.
    """
    methods = scores.names(claim=True)
    reps = _memo(replicates, n_boot, seed)
    kw = dict(min_per_class=min_per_class, n_boot=n_boot, seed=seed, replicates=reps)
    evidence, dropped = counts(tables, min_per_class)
    out: dict[str, claims.Measurement] = {}
    for part in claims.CLAIMS[claim].parts:
        score, kind, versus = PART_SCORES[part.id]
        if kind == "level":
            value, ci = _finite_or_chance(mean_auroc_over_models(list(tables.values()), score, **kw))
            details: dict[str, Any] = {"score": score, "dropped": dropped}
        else:
            others = [m for m in (versus if versus is not None else methods) if m != score]
            diffs = {m: mean_difference_over_models(list(tables.values()), score, m, **kw) for m in others}
            clean = {m: ([float(x) for x in d] if all(np.isfinite(d)) else [0.0, -1.0, 1.0]) for m, d in diffs.items()}
            closest = min(clean, key=lambda m: clean[m][0])
            value, ci = clean[closest][0], (clean[closest][1], clean[closest][2])
            own = _finite_or_chance(mean_auroc_over_models(list(tables.values()), score, **kw))[1]
            details = {"score": score, "differences": clean, "closest": closest, "dropped": dropped,
                       "auroc_ci": [float(own[0]), float(own[1])]}
        out[part.id] = claims.Measurement(part.id, value, ci, dict(settings), details, evidence=dict(evidence))
    return out


def paired_tests(tables: Iterable[Any], score: str, baselines: Sequence[str], *, min_per_class: int, n_boot: int,
                 seed: int, replicates: _auroc.AurocReplicates | None = None) -> list[dict[str, Any]]:
    """``score`` against each baseline: the mean over models of AUROC(score) − AUROC(baseline) with
    its paired bootstrap interval (`mean_difference_over_models`), a two-sided bootstrap p-value
    (`gnuq_core.stats.bootstrap_p_value`) and the Benjamini–Hochberg adjusted one over the baselines."""
    from gnuq_core.stats import benjamini_hochberg, bootstrap_p_value

    reps = _memo(replicates, n_boot, seed)
    tables = list(tables)
    rows = []
    for b in baselines:
        captured: list[np.ndarray] = []

        def one_model(y: np.ndarray, t: Any, b: str = b) -> tuple[float, np.ndarray]:
            (pa, ra), (pb, rb) = reps(t, score), reps(t, b)
            captured.append(ra - rb)
            return pa - pb, ra - rb

        d, lo, hi = _mean_over_models(tables, (score, b), one_model, min_per_class)
        p = bootstrap_p_value(np.mean(captured, axis=0)) if captured else float("nan")
        rows.append({"baseline": b, "difference": d, "lo": lo, "hi": hi, "p": p})
    finite = [r for r in rows if np.isfinite(r["p"])]
    for r, adj in zip(finite, benjamini_hochberg([r["p"] for r in finite]) if finite else []):
        r["p_bh"] = float(adj)
    for r in rows:
        r.setdefault("p_bh", float("nan"))
    return rows
