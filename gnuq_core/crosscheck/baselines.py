"""QA baselines, AUROC and PRR recomputed from stored records by the published formulas.

The project's values are those of the score registry (:mod:`gnuq_core.qa.scores`, through
:func:`gnuq_core.qa.study.score_table`) and of :mod:`gnuq_core.qa.auroc`. The independent
values below are written from the papers, not from the project's code:

- maximum sequence probability (Fadeeva et al. 2023): −Σₜ log p(yₜ) of the greedy answer;
- mean token entropy (Malinin & Gales 2021): the mean of the stored per-token entropies;
- predictive entropy (Malinin & Gales 2021; Kuhn et al. 2023): −(1/N) Σᵢ log p(sᵢ) over
  N samples, and its length-normalised form −(1/N) Σᵢ log p(sᵢ)/|sᵢ|;
- semantic entropy as in Farquhar et al. 2024 (their reference code's ``sum_normalized``
  aggregation): per-sample mean token log-likelihoods ℓ̄ᵢ, class probabilities
  P(c) = Σ_{i∈c} exp ℓ̄ᵢ / Σⱼ exp ℓ̄ⱼ, entropy −Σ_c P(c) log P(c); and its discrete form,
  the entropy of the cluster frequencies;
- AUROC as the Mann–Whitney statistic (ties count ½), by explicit pairwise comparison;
- the prediction-rejection ratio (Malinin et al. 2017; LM-Polygraph's PRR) with ties
  broken at random in expectation, by a direct formula for the expected number of correct
  answers among the kept ones at each rejection level.

An empty sampled answer (the model stopped at once) has no tokens: like the project and
Farquhar et al.'s code, its log-probability is that of the stop token and its length 1.

LM-Polygraph 0.7.0 itself installs beside the pinned set and imports offline, but pulls
about 70 further packages (bitsandbytes, openai, fastapi, spacy, datasets, …; ≈ 630 MB) and
takes ≈ 30 s to import, so it is not a dependency: these formulas are the check.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gnuq_core.crosscheck.agreement import compare, frame
from gnuq_core.qa import auroc as au
from gnuq_core.qa.scores import score_record
from gnuq_core.repro.shards import read_merged
from gnuq_core.store import kinds
from gnuq_core.store.store import RESULTS, StoreDamaged, damage, stored_files

__all__ = ["TOL_SCORE", "TOL_TWO_PASSES", "TOL_METRIC", "BASELINES", "stored_runs", "independent_scores", "mann_whitney_auroc",
           "expected_prr", "compare_scores", "labelled_scores", "compare_metrics"]

TOL_SCORE = 2e-5
"""Stored values carry 7 significant digits; a sum of rounded terms vs a rounded sum. The
error is relative, or absolute (in nats) for values below 1."""
TOL_TWO_PASSES = 2e-4
"""The registry's −log p comes from the gradient pass (a full float32 forward); the published
definition sums the greedy decoding pass's token log-probs (float32 with a KV cache). The
two float32 computations of the same number differ at about 1e-4."""
TOL_METRIC = 1e-9
"""AUROC and PRR of the same scores and labels: exact arithmetic up to float rounding."""

BASELINES: dict[str, str] = {
    "max_seq_prob": "maximum sequence probability (−log p)",
    "mean_token_entropy": "mean token entropy",
    "predictive_entropy": "predictive entropy",
    "ln_predictive_entropy": "length-normalised predictive entropy",
    "semantic_entropy": "semantic entropy (Farquhar et al. 2024)",
    "discrete_semantic_entropy": "discrete semantic entropy",
}
"""Registry names of the recomputed baselines and what they are."""


def stored_runs(root: str | Path | None = None) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The stored QA records by ``(model, dataset)``: every file of the kind's current version in
    ``results/qa``, shards merged (stale files of an older version are skipped).

    Returns an empty dict when the folder holds no records.
    """
    current = {"_kind": "qa", "_version": kinds.get("qa").version}
    folder = Path(root) if root is not None else RESULTS / "qa"
    bases = stored_files(folder)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for base in bases:
        config, records = read_merged(base)
        records = [r for r in records if r.get("type", "record") == "record"]
        if config and records and {k: config.get(k) for k in current} == current:
            why = damage(kinds.get("qa"), base, config, records)
            if why:
                raise StoreDamaged(why)
            runs.setdefault((str(config.get("model")), str(config.get("dataset"))), []).extend(records)
    return runs


def _sample_terms(record: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """Per sample: log p (sum of token log-probs), length in tokens, cluster id."""
    lps, lens, clusters = [], [], []
    for s in record.get("samples") or []:
        toks = list(s["token_log_probs"])
        if not toks and s.get("stop_log_prob") is not None:
            toks = [float(s["stop_log_prob"])]
        lps.append(math.fsum(toks))
        lens.append(max(len(toks), 1))
        clusters.append(s.get("cluster"))
    return np.asarray(lps, float), np.asarray(lens, float), clusters


def _semantic_entropy(mean_lls: np.ndarray, clusters: Sequence[Any]) -> float:
    """Farquhar et al. 2024: −Σ_c P(c) log P(c), P(c) ∝ Σ_{i∈c} exp(mean log-likelihood of sample i)."""
    top = mean_lls.max()
    w = np.exp(mean_lls - top)
    total = w.sum()
    probs = np.array([w[[i for i, c in enumerate(clusters) if c == k]].sum() / total for k in sorted(set(clusters))])
    probs = probs[probs > 0]
    return float(-(probs * np.log(probs)).sum())


def independent_scores(record: Mapping[str, Any]) -> dict[str, float]:
    """The baselines of :data:`BASELINES` for one record, from its raw fields (NaN where absent)."""
    gen = record["generation"]
    out = {k: float("nan") for k in BASELINES}
    out["max_seq_prob"] = -math.fsum(gen["token_log_probs"]) if gen["token_log_probs"] else float("nan")
    if gen.get("token_entropies"):
        out["mean_token_entropy"] = float(np.mean(gen["token_entropies"]))
    lps, lens, clusters = _sample_terms(record)
    if lps.size:
        out["predictive_entropy"] = float(-lps.mean())
        out["ln_predictive_entropy"] = float(-(lps / lens).mean())
        if all(c is not None for c in clusters):
            out["semantic_entropy"] = _semantic_entropy(lps / lens, clusters)
            _, counts = np.unique(np.asarray(clusters, dtype=str), return_counts=True)
            f = counts / counts.sum()
            out["discrete_semantic_entropy"] = float(-(f * np.log(f)).sum())
    return out


def mann_whitney_auroc(incorrect: Sequence[float], score: Sequence[float]) -> float:
    """P(score of a wrong answer > score of a right one) + ½ P(equal), by comparing all pairs."""
    y = np.asarray(incorrect, bool)
    s = np.asarray(score, float)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    d = pos[:, None] - neg[None, :]
    return float(((d > 0).sum() + 0.5 * (d == 0).sum()) / d.size)


def expected_prr(correct: Sequence[float], uncertainty: Sequence[float]) -> float:
    """Prediction-rejection ratio, ties broken at random (in expectation).

    For k = 0 … n−1 answers rejected (most uncertain first), the expected accuracy of the
    n−k kept answers: every answer strictly less uncertain than the kept set's boundary value
    is kept, and the boundary tie group contributes its mean correctness times the number of
    its members kept. PRR = (A − A_random) / (A_oracle − A_random), A the mean over k.
    """
    c = np.asarray(correct, float)
    u = np.asarray(uncertainty, float)
    n = c.size
    if n == 0 or c.min() == c.max():
        return float("nan")

    def area(unc: np.ndarray) -> float:
        vals = np.unique(unc)
        below = np.array([c[unc < v].sum() for v in vals])  # correct answers strictly more certain
        n_below = np.array([(unc < v).sum() for v in vals])
        n_eq = np.array([(unc == v).sum() for v in vals])
        mean_eq = np.array([c[unc == v].mean() for v in vals])
        acc = []
        for kept in range(n, 0, -1):
            g = int(np.searchsorted(n_below + n_eq, kept))  # the group where the kept set ends
            acc.append((below[g] + (kept - n_below[g]) * mean_eq[g]) / kept)
        return float(np.mean(acc))

    rnd = c.mean()
    return float((area(u) - rnd) / (area(1.0 - c) - rnd))


def compare_scores(records: Sequence[Mapping[str, Any]], *, label: str = "") -> Any:
    """Agreement rows: registry scores (:func:`gnuq_core.qa.scores.score_record`) vs :func:`independent_scores`.

    Errors are relative, or absolute (nats) where the value is below 1 (``floor=1``).
    """
    ours: dict[str, list[float]] = {k: [] for k in BASELINES}
    theirs: dict[str, list[float]] = {k: [] for k in BASELINES}
    for r in records:
        mine = independent_scores(r)
        reg = score_record(r, list(BASELINES))
        for k in BASELINES:
            if np.isfinite(mine[k]) or np.isfinite(reg[k]):
                ours[k].append(reg[k])
                theirs[k].append(mine[k])
    rows = [compare(BASELINES[k], ours[k], theirs[k], TOL_TWO_PASSES if k == "max_seq_prob" else TOL_SCORE,
                    floor=1.0, case=label, score=k,
                    theirs_by="published formula, independent code")
            for k in BASELINES if ours[k]]
    return frame(rows)


def labelled_scores(table: Any, scores: Sequence[str]) -> Iterator[tuple[str, np.ndarray, np.ndarray, int]]:
    """``(score, wrong, values, ties)`` for each score column of a
    :func:`gnuq_core.qa.study.score_table` that exists and, on its rows with a finite value,
    has at least two answers, right and wrong ones (``wrong`` is ``incorrect`` as 0/1 floats;
    ``ties``: answers that share a value with another)."""
    for k in scores:
        if k not in table.columns:
            continue
        t = table[np.isfinite(table[k].astype(float))]
        if len(t) < 2 or t["incorrect"].nunique() < 2:
            continue
        s = t[k].to_numpy(float)
        yield k, t["incorrect"].to_numpy(float), s, int(len(s) - np.unique(s).size)


def compare_metrics(table: Any, scores: Sequence[str], *, label: str = "") -> Any:
    """Agreement rows: :func:`gnuq_core.qa.auroc.auroc` / ``prr`` vs the independent ones, per score.

    ``table`` is a :func:`gnuq_core.qa.study.score_table` (``incorrect``, ``correct`` and the
    score columns); rows with a NaN score are dropped per score.
    """
    rows = []
    for k, y, s, ties in labelled_scores(table, scores):
        rows.append(compare("AUROC", au.auroc(y, s), mann_whitney_auroc(y, s), TOL_METRIC, case=label, score=k,
                            theirs_by="Mann–Whitney, all pairs", ties=ties))
        rows.append(compare("PRR", au.prr(1 - y, s), expected_prr(1 - y, s), TOL_METRIC, case=label, score=k,
                            theirs_by="expected rejection curve, direct formula", ties=ties))
    return frame(rows)
