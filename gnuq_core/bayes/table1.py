"""The paper's Table 1, cell by cell: eight synthetic problems, each estimate against the HMC reference.

The paper reports, per problem, the Pearson r and the Spearman ρ between each estimate and
the MCMC reference Var_θ[p(y_c | x, θ)] (regression: the predictive variance of the mean):

- binary problems: GN = ‖∇θ p‖², LA = gᵀH⁻¹g (exact-Hessian Laplace, delta method) and the
  aleatoric p(1 − p) at θ*;
- multiclass: GN and aleatoric of the class the MAP predicts (LA too, beyond the paper's table);
- regression: GN = ‖∇θ f‖² and LA on the mean.

`settings` lays out one `~gnuq_core.bayes.validation.Setting` per (problem, seed); `cell_values`
gives every cell of one evaluated run; `summarise` pools the seeds (median, and a 95 %
interval from a hierarchical bootstrap over seeds, then query points) and `verdict` judges a
cell against the paper's value by `RULE`, stated before any number is computed. The paper's
values are read from `gnuq_core.paper` (never typed here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from gnuq_core.bayes.mcmc import NutsSettings
from gnuq_core.bayes.reference import Setting
from gnuq_core.bayes.synthetic import PROBLEMS, TABLE1
from gnuq_core.stats import hierarchical_bootstrap, spearman_pair

__all__ = ["ROWS", "REFERENCE", "RULE", "TOLERANCE", "MIN_SEEDS", "MAX_WIDTH", "QUERIES", "PRIMARY_QUERIES",
           "Cell", "settings", "rows_of", "cell_values", "summarise", "verdict", "pooled"]

ROWS: dict[str, dict[str, str]] = {
    "classification": {"Epistemic (GN)": "iso_p", "Epistemic (LA)": "laplace_p", "Aleatoric": "aleatoric"},
    "multiclass": {"Epistemic (GN)": "iso_p", "Aleatoric": "aleatoric", "Epistemic (LA)": "laplace_p"},
    "regression": {"Epistemic (GN)": "iso_f", "Epistemic (LA)": "laplace_f"},
}
"""Per task, the paper's rows and the local estimate each stands for (multiclass LA is beyond the paper)."""

REFERENCE = {"classification": "var_p", "multiclass": "var_p", "regression": "var_f"}
"""The MCMC reference every row is compared with (`gnuq_core.bayes.validation.evaluate`'s ``ref``)."""

TOLERANCE = 0.10
MIN_SEEDS = 5
MAX_WIDTH = 0.30
RULE = (f"A cell is judged only with at least {MIN_SEEDS} seeds and a 95 % interval no wider than {MAX_WIDTH:.2f}"
        f" (otherwise inconclusive, saying what is missing); it is reproduced if the paper's value lies in our "
        f"interval or within {TOLERANCE:.2f} of our median, and not reproduced otherwise.")
"""The per-cell rule, fixed before the numbers are computed."""

QUERIES = {"grid": "the wide grid the maps are drawn on (the training box and beyond)",
           "in": "in-distribution points (drawn like the training inputs)"}
"""The query sets a correlation can be taken over: the paper does not say which it used, so each is a reading."""
PRIMARY_QUERIES = "grid"
"""The declared primary reading: the grid of the paper's Figure 2 maps."""


def settings(problems: Sequence[str], seeds: Sequence[int], model: Mapping[str, Any], nuts: NutsSettings,
             nuts_regression: NutsSettings, *, n_query_in: int, grid_size_2d: int, grid_size_1d: int,
             n_restarts: int) -> dict[tuple[str, int], Setting]:
    """One setting per (problem, seed): the problem's declared data (`PROBLEMS`), the model, NUTS."""
    unknown = sorted(set(problems) - set(TABLE1))
    if unknown:
        raise ValueError(f"not a Table 1 problem: {', '.join(unknown)}; choose among {', '.join(TABLE1)}")
    out = {}
    for name in problems:
        regression = PROBLEMS[name].task == "regression"
        data = {"n_query_in": n_query_in, "grid_size": grid_size_1d if regression else grid_size_2d}
        for s in seeds:
            out[name, s] = Setting(name, data, dict(model), nuts_regression if regression else nuts, seed=s,
                                   n_restarts=n_restarts)
    return out


def rows_of(problem: str) -> dict[str, str]:
    """The rows of ``problem``'s column (`ROWS` of its task)."""
    return ROWS[PROBLEMS[problem].task]


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson r of each row pair of ``a`` and ``b`` (2-D, one replicate per row)."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    return (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))


def cell_values(run: Mapping[str, Any], problem: str, queries: str = "grid", *, n_boot: int = 1000,
                seed: int = 0) -> dict[tuple[str, str], tuple[float, np.ndarray]]:
    """``{(row, "r" | "rho"): (value, bootstrap replicates over query points)}`` of one evaluated
    run (`~gnuq_core.bayes.validation.evaluate`) on ``queries``: Pearson r and Spearman ρ of
    each row's estimate with the reference, and each recomputed on ``n_boot`` paired resamples
    of the query points."""
    from scipy.stats import rankdata

    q = run["q"][queries]
    ref = np.asarray(q["ref"][REFERENCE[PROBLEMS[problem].task]], float)
    idx = np.random.default_rng(seed).integers(0, len(ref), (n_boot, len(ref)))
    out = {}
    for row, key in rows_of(problem).items():
        est = np.asarray(q["est"][key], float)
        with np.errstate(invalid="ignore"):
            out[row, "r"] = (float(np.corrcoef(est, ref)[0, 1]), _pearson_rows(est[idx], ref[idx]))
            out[row, "rho"] = (spearman_pair(est, ref),
                               _pearson_rows(rankdata(est[idx], axis=1), rankdata(ref[idx], axis=1)))
    return out


@dataclass(frozen=True)
class Cell:
    """One cell over the stored seeds: median, 95 % interval, the per-seed values."""

    median: float
    lo: float
    hi: float
    seeds: int
    per_seed: tuple[float, ...]


def summarise(values: Sequence[float], boots: Sequence[np.ndarray], seeds: Sequence[int], *, n_boot: int,
              seed: int) -> Cell:
    """Median over seeds with a hierarchical bootstrap interval (seeds, then query points:
    ``boots`` are each seed's bootstrap replicates over its query points)."""
    if not values:
        return Cell(float("nan"), float("nan"), float("nan"), 0, ())
    med, (lo, hi), _ = hierarchical_bootstrap(list(values), list(boots), [np.asarray(seeds)], how="median",
                                              n_boot=n_boot, seed=seed)
    return Cell(float(med), float(lo), float(hi), len(values), tuple(float(v) for v in values))


def verdict(cell: Cell, paper: float | None) -> tuple[str, str]:
    """``(verdict, why)`` of one cell against the paper's value by `RULE`."""
    if paper is None:
        return "beyond the paper", "the paper reports no value here"
    if cell.seeds < MIN_SEEDS:
        return "inconclusive", f"{cell.seeds} of {MIN_SEEDS} seeds stored"
    if cell.hi - cell.lo > MAX_WIDTH:
        return "inconclusive", f"interval {cell.hi - cell.lo:.2f} wide (more seeds would narrow it)"
    gap = cell.median - paper
    if cell.lo <= paper <= cell.hi or abs(gap) <= TOLERANCE:
        return "reproduced", f"paper {paper:.2f}, ours {cell.median:.2f}"
    return "not reproduced", f"ours {abs(gap):.2f} {'above' if gap > 0 else 'below'} the paper's {paper:.2f}"


def pooled(per_seed: Mapping[tuple[str, int], Mapping[tuple[str, str], tuple[float, np.ndarray]]],
           problems: Sequence[str], row: str, minus: str | None = None, *, stat: str = "rho", how: str = "median",
           n_boot: int, seed: int) -> tuple[float, tuple[float, float], int]:
    """One claim's number over several Table 1 problems: the median (or mean) over every
    (problem, seed) of ``row``'s ``stat`` (minus ``minus``'s, paired on the same resampled query
    points), with a hierarchical bootstrap interval that keeps each problem and resamples its
    seeds, then query points. ``per_seed`` maps (problem, seed) to `cell_values`. Returns
    ``(value, interval, number of (problem, seed) settings)``."""
    keys = [k for k in per_seed if k[0] in problems]
    if not keys:
        return float("nan"), (float("nan"), float("nan")), 0
    values, boots = [], []
    for k in keys:
        v, b = per_seed[k][row, stat]
        if minus is not None:
            w, c = per_seed[k][minus, stat]
            v, b = v - w, b - c
        values.append(v), boots.append(b)
    value, ci, _ = hierarchical_bootstrap(values, boots, [np.array([k[0] for k in keys]), np.array([k[1] for k in keys])],
                                          [False, True], how=how, n_boot=n_boot, seed=seed)
    return float(value), (float(ci[0]), float(ci[1])), len(keys)
