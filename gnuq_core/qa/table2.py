"""The paper's Table 2, cell by cell: AUROC of six methods for a wrong answer, on TriviaQA and TruthfulQA.

The paper reports each cell as the mean ± standard deviation over 300 bootstrap runs and its
four LLMs. We compute it the same way over our models (`cell`): on each of ``n_boot``
resamples of the questions (with replacement, per model) the AUROC of the method's score for
"the answer is wrong"; the cell is the mean and the standard deviation of all those values
pooled over runs and models (the paper does not say whether its ± is pooled or averaged per
model; pooled is the reading declared here). `per_model` gives the same per model (the
paper's Table 11 analogue). Each cell is judged by `RULE`, fixed before any number is
computed; the paper's values come from `gnuq_core.paper`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from gnuq_core.qa.auroc import auroc

__all__ = ["METHODS", "COLUMNS", "TOLERANCE", "RULE", "Cell", "cell", "verdict"]

METHODS: dict[str, str] = {"P(True)": "p_true", "Semantic entropy": "semantic_entropy",
                           "Naïve entropy": "predictive_entropy", "Aleatoric": "aleatoric", "Epistemic": "epistemic",
                           "Epi. & Alea.": "combined"}
"""The paper's rows and the registered score (`gnuq_core.qa.scores`) each stands for."""

COLUMNS = {"TriviaQA": "triviaqa", "TruthfulQA": "truthfulqa"}

TOLERANCE = 0.05
RULE = (f"A cell is reproduced if the paper's mean lies within {TOLERANCE:.2f} of ours or within two of our "
        "standard deviations of it (the spread over bootstrap runs and models the paper reports as ±), and not "
        "reproduced otherwise.")


@dataclass(frozen=True)
class Cell:
    """One method on one benchmark: mean and standard deviation of the AUROC over runs and models."""

    mean: float
    std: float
    per_model: tuple[float, ...]
    runs: int


def cell(tables: Sequence[Any], score: str, *, n_boot: int = 300, seed: int = 0) -> Cell:
    """``score``'s AUROC for ``incorrect`` on ``n_boot`` question resamples of each table (one per
    model), pooled: `Cell` with each model's mean beside the pooled mean and std."""
    values, means = [], []
    for k, t in enumerate(tables):
        y, s = t["incorrect"].to_numpy(int), t[score].to_numpy(float)
        ok = np.isfinite(s)
        y, s = y[ok], s[ok]
        rng = np.random.default_rng([seed, k])
        mine = []
        for _ in range(n_boot):
            i = rng.integers(0, len(y), len(y))
            if 0 < y[i].sum() < len(i):
                mine.append(auroc(y[i], s[i]))
        values += mine
        means.append(float(np.mean(mine)) if mine else float("nan"))
    arr = np.asarray(values, float)
    return Cell(float(arr.mean()) if arr.size else float("nan"), float(arr.std(ddof=1)) if arr.size > 1 else
                float("nan"), tuple(means), int(arr.size))


def verdict(ours: Cell, paper: float | None) -> tuple[str, str]:
    """``(verdict, why)`` of one cell against the paper's mean by `RULE`."""
    if paper is None:
        return "beyond the paper", "the paper reports no value here"
    if not np.isfinite(ours.mean):
        return "inconclusive", "no run had both right and wrong answers"
    gap = ours.mean - paper
    if abs(gap) <= TOLERANCE or abs(gap) <= 2 * ours.std:
        return "reproduced", f"paper {paper:.2f}, ours {ours.mean:.2f} ± {ours.std:.2f}"
    return "not reproduced", f"ours {abs(gap):.2f} {'above' if gap > 0 else 'below'} the paper's {paper:.2f}"
