"""The readings of the QA claims: every grader, every p and every "combined" the paper leaves open.

The paper does not say how answers were graded, whether p is the probability of the whole
answer or its length-normalised version, or how the "combined" estimate is formed. A
claim's verdict that holds under one reading only is a finding about that reading. So
every QA claim is judged under a declared grid (:func:`grid`):

- **grader** (:data:`GRADERS`): TriviaQA: careful reading where the rules disagree (primary,
  ``audit/triviaqa``), the alias contained as a whole name without the question's echo,
  contained, exact match; TruthfulQA: careful reading of every answer against the
  rubric (primary, ``audit/truthfulqa``; unclear answers left out), ROUGE-L true > false
  with ties false (lm-evaluation-harness), ties true, ties left out, ROUGE-L ≥ 0.3 against
  the best answer (Kuhn et al.), ≥ 0.3 against any true answer, and the MiniLM similarity
  judge;
- **p** (:data:`P_READINGS`): ``sequence`` (p(y|x), primary: epistemic = ‖∇p‖²),
  ``normalized`` (p̄ = exp(mean log p_t): epistemic = ‖∇p̄‖² = p̄²‖∇log p̄‖²) or ``loss``
  (epistemic = ‖∇log p̄‖² = ‖∇log p‖²/T², the gradient of the mean-token log-likelihood,
  without the p̄² factor: what the first author's earlier code computed); aleatoric is
  p(1 − p) of the same p (``loss``: of p̄);
- **combined** (:data:`COMBINED_READINGS`): ``sum`` (epistemic + aleatoric with the
  isotropic covariance σ²I at σ² = 1, primary) or ``rank_mean`` (the mean of the two
  scores' ranks: the combination that does not depend on σ²).

The primary reading (:data:`PRIMARY`) takes the paper's formulas literally (p the answer's
probability, combined = epistemic + aleatoric). TruthfulQA's primary grader is careful
reading: the paper does not state its grader (its authors' earlier work used a language-model
judge), two independent careful labellings agree at Cohen's κ 0.89, and the benchmark's ROUGE
rule agrees with careful reading at κ 0.04–0.43 (measured on every answer in chapter 06): the
labels closest to what "correct" means are the primary ones, and ROUGE stays a reading. Where a
build's answers are not the labelled ones (a preview's other answer cap), :func:`primary` falls
back to the ROUGE rule (:data:`FALLBACK`). TriviaQA's primary grader is careful reading too,
where it is needed: every answer on which exact match, containment and the echo-aware rule
disagree is read carefully (``audit/triviaqa``); where they agree, their shared label stands.
The echo-aware rule (its fallback) replaced plain containment *after* a reviewer had read
answers and computed AUROCs (issue 26), so that choice was not blind to results; the careful
labels were made blind to model, grader and score. Still no verdict rests on one reading: every claim
is judged under the whole grid and the ledger says whether it is robust. :func:`reading_table`
turns a score table (`gnuq_core.qa.study.score_table`) into the table one reading judges:
its ``incorrect`` label and its ``epistemic``, ``aleatoric`` and ``combined`` columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Grader", "Reading", "GRADERS", "P_READINGS", "COMBINED_READINGS", "PRIMARY", "FALLBACK", "primary",
           "grid", "graders_in", "reading_table", "label_column"]


@dataclass(frozen=True)
class Grader:
    """A correctness rule of one dataset.

    Attributes
    ----------
    name : str
        Its key in :data:`GRADERS`.
    column : str
        The score-table column with its verdict (bool).
    text : str
        The rule in words.
    ties : str
        TruthfulQA ROUGE ties: ``"false"`` (as the column), ``"true"`` or ``"drop"`` (left out).
    """

    name: str
    column: str
    text: str
    ties: str = "false"


GRADERS: dict[str, dict[str, Grader]] = {
    "triviaqa": {g.name: g for g in (
        Grader("careful", "correct_careful", "careful reading of every answer the rules below dispute "
                                             "(audit/triviaqa), their shared label elsewhere; unclear left out"),
        Grader("no_echo", "correct_no_echo", "an alias contained as a whole name, none the question contains"),
        Grader("contains", "correct_contains", "an alias contained on word boundaries"),
        Grader("exact", "correct_em", "the answer is an alias (exact match)"),
    )},
    "truthfulqa": {g.name: g for g in (
        Grader("careful", "correct_careful", "careful reading against the rubric (audit/truthfulqa), unclear left "
                                             "out"),
        Grader("rouge", "correct_rouge", "ROUGE-L to a true reference > to a false one, ties false"),
        Grader("rouge_ties_true", "correct_rouge", "ROUGE-L true > false, ties true", ties="true"),
        Grader("rouge_no_ties", "correct_rouge", "ROUGE-L true > false, ties left out", ties="drop"),
        Grader("rouge_best_0.3", "correct_rouge_best", "ROUGE-L ≥ 0.3 against the best answer (Kuhn et al.)"),
        Grader("rouge_any_0.3", "correct_rouge_any", "ROUGE-L ≥ 0.3 against any true answer"),
        Grader("embedding", "correct_embed", "MiniLM similarity to a true reference > to a false one"),
    )},
}

P_READINGS: dict[str, str] = {
    "sequence": "p = p(y | x), the whole answer's probability: epistemic ‖∇p‖²",
    "normalized": "p̄ = exp(mean log p_t), the length-normalised probability: epistemic ‖∇p̄‖²",
    "loss": "epistemic ‖∇ log p̄‖², the gradient of the mean-token log-likelihood (no p̄² factor)",
}
COMBINED_READINGS: dict[str, str] = {
    "sum": "combined = epistemic + aleatoric (σ² = 1)",
    "rank_mean": "combined = mean of the ranks of epistemic and aleatoric (any σ²)",
}


@dataclass(frozen=True)
class Reading:
    """One reading of a QA claim: grader, p and the combination."""

    grader: str
    p: str = "sequence"
    combined: str = "sum"

    @property
    def key(self) -> str:
        return f"grader={self.grader}, p={self.p}, combined={self.combined}"

    def text(self, dataset: str) -> str:
        """The reading in words."""
        return (f"{GRADERS[dataset][self.grader].text}; {P_READINGS[self.p]}; "
                f"{COMBINED_READINGS[self.combined]}")


PRIMARY: dict[str, Reading] = {"triviaqa": Reading("careful"), "truthfulqa": Reading("careful")}
"""The reading each dataset's headline verdicts use (how each was chosen: the module docstring)."""

MIN_COVERAGE = 0.9
"""A grader is a reading of a build only where it labels at least this share of every table's answers."""

FALLBACK: dict[str, Reading] = {"triviaqa": Reading("no_echo"), "truthfulqa": Reading("rouge")}
"""The primary reading where a build's answers carry no careful labels."""


def primary(dataset: str, graders: list[str] | None = None) -> Reading:
    """``dataset``'s primary reading among ``graders`` (default: all): `PRIMARY`, or `FALLBACK`
    when its grader is not among them."""
    if graders is None or PRIMARY[dataset].grader in graders:
        return PRIMARY[dataset]
    return FALLBACK.get(dataset, PRIMARY[dataset])


def grid(dataset: str, *, graders: list[str] | None = None) -> list[Reading]:
    """Every reading of ``dataset``'s claims, the primary first (graders default: all of the dataset)."""
    names = graders if graders is not None else list(GRADERS[dataset])
    unknown = sorted(set(names) - set(GRADERS[dataset]))
    if unknown:
        raise ValueError(f"unknown {dataset} grader(s) {', '.join(unknown)}; known: {', '.join(GRADERS[dataset])}")
    out = [Reading(g, p, c) for g in names for p in P_READINGS for c in COMBINED_READINGS]
    first = primary(dataset, names)
    return sorted(out, key=lambda r: r != first)


def graders_in(tables: Any, dataset: str) -> list[str]:
    """The graders of ``dataset`` whose label column every table of ``tables`` (an iterable of
    score tables) holds with at least one label: the MiniLM judge's only where the build ran it
    (``embedding_judge``), the careful labels only where the build's answers are the labelled ones."""
    tables = list(tables)
    return [name for name, g in GRADERS[dataset].items()
            if all(g.column in t and len(t) and t[g.column].notna().mean() >= MIN_COVERAGE for t in tables)]


def label_column(table: Any, dataset: str, grader: str) -> Any:
    """The ``incorrect`` labels (1.0/0.0) of ``grader``, NaN where it leaves an answer out."""
    g = GRADERS[dataset][grader]
    if g.column not in table:
        raise KeyError(f"the score table has no column {g.column!r} for grader {grader!r}: build it with "
                       "gnuq_core.qa.study.score_table (and an embed function for the embedding judge, "
                       "gnuq_core.qa.audit.careful_column for the careful labels)")
    incorrect = 1.0 - table[g.column].astype(float)  # a label a grader does not give (NaN) stays NaN
    if g.ties != "false":
        tie = table["rouge_tie"].astype(bool)
        incorrect = incorrect.where(~tie, 0.0 if g.ties == "true" else np.nan)
    return incorrect


def _ranks(x: Any) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(np.asarray(x, dtype=float)) / len(x)


def reading_table(table: Any, dataset: str, reading: Reading) -> Any:
    """``table`` as ``reading`` judges it: ``incorrect`` from its grader (answers it leaves out
    dropped), and ``epistemic``, ``aleatoric``, ``combined`` from its p and combination (the
    other score columns unchanged)."""
    if reading.p not in P_READINGS or reading.combined not in COMBINED_READINGS:
        raise ValueError(f"unknown reading {reading.key}: p is one of {', '.join(P_READINGS)}, combined one of "
                         f"{', '.join(COMBINED_READINGS)}")
    out = table.copy()
    out["incorrect"] = label_column(table, dataset, reading.grader)
    out = out[out["incorrect"].notna()].copy()
    out["incorrect"] = out["incorrect"].astype(int)
    out["correct"] = out["incorrect"] == 0
    suffix = "" if reading.p == "sequence" else "_norm"
    rows = out.index
    out["epistemic"] = table.loc[rows, "grad_log_p_norm" if reading.p == "loss" else f"epistemic{suffix}"]
    out["aleatoric"] = table.loc[rows, f"aleatoric{suffix}"]
    if reading.combined == "sum":
        out["combined"] = (np.log10(10.0 ** out["epistemic"] + out["aleatoric"]) if reading.p == "loss" else
                           table.loc[rows, f"combined{suffix}"])  # log10(epistemic + aleatoric), as the registry's
    else:
        out["combined"] = (_ranks(out["epistemic"]) + _ranks(out["aleatoric"])) / 2
    return out.reset_index(drop=True)
