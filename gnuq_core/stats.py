"""Every interval and rank statistic of the book: rank correlations with bootstrap
intervals, the magnitude view after one isotropic scale, and trends over size.

Two bootstrap engines, both percentile intervals over resampled items:

- :func:`rank_agreement` and :func:`rank_difference` use :func:`scipy.stats.bootstrap`
  (vectorised; the statistic is :func:`spearman`);
- :func:`percentile_bootstrap` is the explicit loop (one ``rng.integers(0, n, n)`` draw per
  replicate, in order) behind :func:`bootstrap_spearman` and
  :func:`bootstrap_spearman_difference`; its Spearman is scipy's ``spearmanr`` (Pearson of
  average ranks via ``np.corrcoef``), equal to :func:`spearman` up to rounding. The two are
  kept apart so that every stored interval keeps its random draws and its last digit.

:func:`hierarchical_bootstrap` and :func:`hierarchical_trend` resample nested levels (seeds,
then the settings or sizes under them, then query points through each value's own
replicates), so that their intervals include the seed-to-seed variation that the
query-point bootstraps above leave out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["RankAgreement", "resample_indices", "percentile_interval", "cluster_bootstrap", "spearman", "spearman_pair", "t_interval", "percentile_bootstrap", "bootstrap_spearman",
           "bootstrap_spearman_difference", "rank_agreement", "rank_difference", "combine", "fit_isotropic_scale", "magnitude_view",
           "trend", "Trend", "hierarchical_indices", "hierarchical_bootstrap", "hierarchical_trend",
           "bootstrap_p_value", "benjamini_hochberg"]


def _rank(a: np.ndarray, axis: int = -1) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(a, axis=axis)


def spearman(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman ρ along ``axis`` (vectorised; average ranks for ties)."""
    ra, rb = _rank(a, axis), _rank(b, axis)
    ra = ra - ra.mean(axis, keepdims=True)
    rb = rb - rb.mean(axis, keepdims=True)
    den = np.sqrt((ra**2).sum(axis) * (rb**2).sum(axis))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ra * rb).sum(axis) / den


def spearman_pair(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman ρ of two 1-D samples as :func:`scipy.stats.spearmanr` computes it."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def t_interval(x: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval of the mean of ``x`` (e.g. over seeds).

    Returns ``(mean, lo, hi)``; with fewer than two values the interval is the point.
    """
    from scipy.stats import t as student_t

    x = np.asarray(x, float)
    m = float(x.mean())
    if len(x) < 2:
        return m, m, m
    h = float(student_t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))
    return m, m - h, m + h


def percentile_bootstrap(statistic: Callable[[np.ndarray], float], n: int, n_boot: int = 1000, seed: int = 0,
                         level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of ``statistic(idx)`` over ``n_boot`` resamples of ``n`` items.

    Replicate ``r`` draws ``idx = rng.integers(0, n, n)`` from ``default_rng(seed)`` (one
    call per replicate, in order) and evaluates ``statistic(idx)``; replicates that are
    NaN (e.g. a constant resample) are ignored.

    Returns
    -------
    lo, hi : float
        The ``(1 − level)/2`` and ``(1 + level)/2`` percentiles of the replicates.
    """
    if n < 1 or n_boot < 1:
        raise ValueError(f"n={n} items and n_boot={n_boot} replicates: both must be ≥ 1")
    rng = np.random.default_rng(seed)
    boots = [statistic(rng.integers(0, n, n)) for _ in range(n_boot)]
    lo, hi = np.nanpercentile(boots, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def resample_indices(n: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """``(n_boot, n)`` bootstrap resample indices in one draw (``default_rng(seed).integers``),
    for statistics vectorised over replicates (AUROC). Not the same stream as
    `percentile_bootstrap`'s one-draw-per-replicate loop, so each caller keeps its own."""
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def percentile_interval(replicates: np.ndarray, level: float = 0.95, point: float | None = None
                        ) -> tuple[float, float]:
    """The ``(1 − level)/2`` and ``(1 + level)/2`` percentiles of the finite ``replicates``
    (linear interpolation); widened to contain ``point`` when it is given."""
    r = np.asarray(replicates, dtype=float)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(r, [(1 - level) / 2, (1 + level) / 2])
    if point is not None:
        lo, hi = min(lo, point), max(hi, point)
    return float(lo), float(hi)


def cluster_bootstrap(values: Sequence[float], stat: Callable[[np.ndarray], float] = np.median, *,
                 clusters: Sequence[Any] | None = None, n_boot: int = 2000, level: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` of ``values``.

    With ``clusters`` (e.g. the question of each value) whole clusters are resampled, so
    values of one cluster are not counted as independent; with fewer than two clusters
    the values are resampled. One value: that value; none: ``(nan, nan)``.
    """
    v = np.asarray(values, dtype=float)
    c = np.asarray(clusters if clusters is not None else np.arange(v.size))
    if c.shape != v.shape:
        raise ValueError(f"{v.size} values but {c.size} cluster labels: give one label per value")
    ok = np.isfinite(v)
    v, c = v[ok], c[ok]
    if v.size == 0:
        return float("nan"), float("nan")
    if v.size == 1:
        return float(v[0]), float(v[0])
    labels = np.unique(c)
    rng = np.random.default_rng(seed)
    if labels.size < 2:
        boots = np.array([stat(v[i]) for i in rng.integers(0, v.size, size=(n_boot, v.size))])
    else:
        members = [v[c == lab] for lab in labels]
        boots = np.array([stat(np.concatenate([members[j] for j in rng.integers(0, labels.size, labels.size)]))
                          for _ in range(n_boot)])
    return percentile_interval(boots, level)


def _paired(*arrays: np.ndarray) -> list[np.ndarray]:
    out = [np.asarray(a) for a in arrays]
    if any(a.ndim != 1 or a.shape != out[0].shape for a in out):
        raise ValueError(f"samples of shapes {[a.shape for a in out]}: pass 1-D arrays of the same length")
    return out


def bootstrap_spearman(a: np.ndarray, b: np.ndarray, n_boot: int = 1000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float, float]:
    """Spearman ρ(a, b) of paired samples and its percentile bootstrap CI (pairs resampled).

    Returns ``(rho, lo, hi)``; the interval is widened to contain ``rho`` if needed.
    """
    a, b = _paired(a, b)
    rho = spearman_pair(a, b)
    lo, hi = percentile_bootstrap(lambda i: spearman_pair(a[i], b[i]), len(a), n_boot, seed, level)
    return rho, min(lo, rho), max(hi, rho)


def bootstrap_spearman_difference(reference: np.ndarray, a: np.ndarray, b: np.ndarray, n_boot: int = 1000,
                                  seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """``ρ(a, ref) − ρ(b, ref)`` and its paired percentile bootstrap CI (same resample for both).

    Returns ``(difference, lo, hi)``; the interval is widened to contain the difference.
    """
    ref, a, b = _paired(reference, a, b)
    d = spearman_pair(a, ref) - spearman_pair(b, ref)
    lo, hi = percentile_bootstrap(lambda i: spearman_pair(a[i], ref[i]) - spearman_pair(b[i], ref[i]),
                                  len(ref), n_boot, seed, level)
    return d, min(lo, d), max(hi, d)


@dataclass(frozen=True)
class RankAgreement:
    """Rank agreement of an estimate with a reference over query points.

    Attributes
    ----------
    rho, rho_ci : float, tuple
        Spearman ρ and its 95% percentile-bootstrap interval (queries resampled).
    tau, tau_ci : float, tuple
        Kendall τ-b and its interval.
    boot : numpy.ndarray
        Bootstrap replicates of ρ (used to propagate uncertainty into trends).
    n : int
        Number of query points.
    """

    rho: float
    rho_ci: tuple[float, float]
    tau: float
    tau_ci: tuple[float, float]
    boot: np.ndarray
    n: int


def rank_agreement(estimate: np.ndarray, reference: np.ndarray, n_boot: int = 1000, seed: int = 0,
                   kendall: bool = True) -> RankAgreement:
    """Spearman ρ (and Kendall τ) between ``estimate`` and ``reference`` with bootstrap CIs.

    The CIs come from :func:`scipy.stats.bootstrap` (paired, percentile method) over query
    points; Kendall's uses a quarter of the replicates (it is not vectorised).
    """
    from scipy.stats import bootstrap, kendalltau

    est, ref = np.asarray(estimate, float), np.asarray(reference, float)
    if est.shape != ref.shape or est.ndim != 1:
        raise ValueError(f"estimate {est.shape} and reference {ref.shape} must be 1-D of the same length")
    rho = float(spearman(est, ref))
    rng = np.random.default_rng(seed)
    res = bootstrap((est, ref), lambda a, b, axis=-1: spearman(a, b, axis), paired=True, vectorized=True,
                    n_resamples=n_boot, method="percentile", random_state=rng)
    ci = (float(res.confidence_interval.low), float(res.confidence_interval.high))
    tau, tci = float("nan"), (float("nan"), float("nan"))
    if kendall:
        tau = float(kendalltau(est, ref).statistic)
        kres = bootstrap((est, ref), lambda a, b: kendalltau(a, b).statistic, paired=True, vectorized=False,
                         n_resamples=max(n_boot // 4, 50), method="percentile", random_state=rng)
        tci = (float(kres.confidence_interval.low), float(kres.confidence_interval.high))
    boot = np.asarray(res.bootstrap_distribution, float)
    return RankAgreement(rho, (min(ci[0], rho), max(ci[1], rho)), tau, tci, boot, int(est.size))


def fit_isotropic_scale(estimate: np.ndarray, reference: np.ndarray) -> float:
    """The single scale σ² minimising Σ (log σ² + log estimate − log reference)²

    (the geometric mean of reference / estimate over queries where both are positive).
    """
    est, ref = np.asarray(estimate, float), np.asarray(reference, float)
    ok = (est > 0) & (ref > 0)
    return float(np.exp(np.mean(np.log(ref[ok]) - np.log(est[ok]))))


def magnitude_view(estimate: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """Calibration of magnitude: after fitting σ², how far is σ²·estimate from the reference?

    Returns ``sigma2``, ``median_abs_log10_ratio`` (0 = perfect), ``frac_within_2x`` and
    ``frac_within_10x`` (fractions of queries whose ratio is within a factor 2 / 10).
    """
    s2 = fit_isotropic_scale(estimate, reference)
    est, ref = np.asarray(estimate, float), np.asarray(reference, float)
    ok = (est > 0) & (ref > 0)
    lr = np.abs(np.log10(s2 * est[ok] / ref[ok]))
    return {"sigma2": s2, "median_abs_log10_ratio": float(np.median(lr)),
            "frac_within_2x": float(np.mean(lr <= np.log10(2))), "frac_within_10x": float(np.mean(lr <= 1))}


@dataclass(frozen=True)
class Trend:
    """A least-squares line y = intercept + slope · x with a bootstrap CI of the slope."""

    slope: float
    slope_ci: tuple[float, float]
    intercept: float
    n_points: int
    n_groups: int


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    xm = x - x.mean()
    denom = (xm**2).sum()
    slope = float((xm * (y - y.mean())).sum() / denom) if denom > 0 else float("nan")
    return slope, float(y.mean() - slope * x.mean())


def trend(x: np.ndarray, y: np.ndarray, groups: np.ndarray, boots: list[np.ndarray] | None = None,
          n_boot: int = 2000, seed: int = 0) -> Trend:
    """Slope of ``y`` against ``x`` with a two-level bootstrap CI.

    Each replicate resamples the ``groups`` (seeds) with replacement and, when ``boots``
    is given (one array of bootstrap replicates of each y, e.g. ρ's query bootstrap),
    replaces each y by a random replicate of itself; the pooled least-squares slope is
    refitted. With one group only the second level is left (query-point uncertainty).

    Parameters
    ----------
    x, y : numpy.ndarray
        Points (e.g. log10 #parameters and ρ).
    groups : numpy.ndarray
        Group label of each point (e.g. the seed).
    boots : list of numpy.ndarray, optional
        Bootstrap replicates per point.
    n_boot : int
        Replicates.
    seed : int
        Seed.

    Returns
    -------
    Trend
    """
    x, y, groups = np.asarray(x, float), np.asarray(y, float), np.asarray(groups)
    slope, icpt = _ols(x, y)
    rng = np.random.default_rng(seed)
    labels = np.unique(groups)
    members = [np.flatnonzero(groups == g) for g in labels]
    reps = []
    for _ in range(n_boot):
        chosen = rng.integers(len(labels), size=len(labels)) if len(labels) > 1 else np.zeros(1, int)
        idx = np.concatenate([members[c] for c in chosen])
        yy = y[idx]
        if boots is not None:
            yy = np.array([boots[i][rng.integers(len(boots[i]))] for i in idx])
        reps.append(_ols(x[idx], yy)[0])
    lo, hi = np.nanpercentile(reps, [2.5, 97.5])
    return Trend(slope, (float(min(lo, slope)), float(max(hi, slope))), icpt, int(len(x)), int(len(labels)))


def rank_difference(estimate_a: np.ndarray, estimate_b: np.ndarray, reference: np.ndarray, n_boot: int = 1000,
                    seed: int = 0) -> tuple[float, tuple[float, float], np.ndarray]:
    """ρ(a, ref) − ρ(b, ref) with a paired bootstrap over queries (same resample for both).

    Returns the difference, its 95% percentile interval and the replicates.
    """
    from scipy.stats import bootstrap

    a, b, r = (np.asarray(v, float) for v in (estimate_a, estimate_b, reference))

    def stat(x: np.ndarray, y: np.ndarray, z: np.ndarray, axis: int = -1) -> np.ndarray:
        return spearman(x, z, axis) - spearman(y, z, axis)

    d = float(stat(a, b, r))
    res = bootstrap((a, b, r), stat, paired=True, vectorized=True, n_resamples=n_boot, method="percentile",
                    random_state=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return d, (min(lo, d), max(hi, d)), np.asarray(res.bootstrap_distribution, float)


def combine(values: list[float], boots: list[np.ndarray], how: str = "median",
            seed: int = 0, n_boot: int = 2000) -> tuple[float, tuple[float, float]]:
    """Median (or mean) of per-setting values with a CI from their bootstrap replicates.

    Each replicate draws one bootstrap replicate per setting (settings are independent
    resamples) and takes the median/mean; the 2.5 and 97.5 percentiles form the CI.
    """
    agg = {"median": np.median, "mean": np.mean}[how]
    v = float(agg(values))
    rng = np.random.default_rng(seed)
    reps = [agg([b[rng.integers(len(b))] for b in boots]) for _ in range(n_boot)]
    lo, hi = np.percentile(reps, [2.5, 97.5])
    return v, (float(min(lo, v)), float(max(hi, v)))


def hierarchical_indices(levels: Sequence[np.ndarray], resample: Sequence[bool], rng: np.random.Generator
                         ) -> np.ndarray:
    """One hierarchical resample of items labelled at nested ``levels``.

    Level 0's labels are drawn with replacement (if ``resample[0]``; otherwise each is kept
    once); within each drawn label, level 1's labels present there are drawn the same way,
    and so on; every item under the last level's drawn labels is kept. A label drawn twice
    contributes its items twice, each resampled afresh below it.

    Parameters
    ----------
    levels : sequence of numpy.ndarray
        One label array per level, outermost first, each with one label per item.
    resample : sequence of bool
        Per level: resample its labels (a random level such as the seed) or keep each once
        (a fixed stratum such as the model size).
    rng : numpy.random.Generator
        Random draws.

    Returns
    -------
    numpy.ndarray
        Item indices of the resample (with repeats).
    """
    levels = [np.asarray(lab) for lab in levels]

    def draw(items: np.ndarray, level: int) -> list[np.ndarray]:
        if level == len(levels):
            return [items]
        labels = np.unique(levels[level][items])
        chosen = labels[rng.integers(0, labels.size, labels.size)] if resample[level] else labels
        return [part for lab in chosen for part in draw(items[levels[level][items] == lab], level + 1)]

    return np.concatenate(draw(np.arange(levels[0].size), 0))


def _check_levels(n: int, levels: Sequence[np.ndarray], resample: Sequence[bool] | None,
                  boots: Sequence[np.ndarray] | None) -> list[bool]:
    if len(levels) == 0:
        raise ValueError("levels is empty: give at least one label array (e.g. the seed of each value)")
    sizes = [np.asarray(lab).size for lab in levels]
    if any(k != n for k in sizes):
        raise ValueError(f"{n} values but label arrays of sizes {sizes}: give one label per value at every level")
    if boots is not None and len(boots) != n:
        raise ValueError(f"{n} values but {len(boots)} arrays of replicates: give one per value (or boots=None)")
    res = [True] * len(levels) if resample is None else list(resample)
    if len(res) != len(levels):
        raise ValueError(f"{len(levels)} levels but {len(res)} resample flags: give one flag per level")
    return res


def _hierarchical_draws(values: np.ndarray, boots: Sequence[np.ndarray] | None, levels: Sequence[np.ndarray],
                        resample: Sequence[bool], n_boot: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``n_boot`` hierarchical resamples: per replicate, the drawn item indices
    (:func:`hierarchical_indices`) and the drawn values, each value replaced by a random
    one of its own replicates when ``boots`` is given (one random stream, seeded)."""
    rng = np.random.default_rng(seed)
    bs = None if boots is None else [np.asarray(b, float) for b in boots]
    for _ in range(n_boot):
        idx = hierarchical_indices(levels, resample, rng)
        yield idx, values[idx] if bs is None else np.array([bs[i][rng.integers(bs[i].size)] for i in idx])


def hierarchical_bootstrap(values: Sequence[float], boots: Sequence[np.ndarray] | None, levels: Sequence[np.ndarray],
                           resample: Sequence[bool] | None = None, how: str = "median", n_boot: int = 2000,
                           seed: int = 0, level: float = 0.95) -> tuple[float, tuple[float, float], np.ndarray]:
    """Median (or mean) of per-setting values with a hierarchical bootstrap interval.

    Each replicate resamples the top level (e.g. seeds) with replacement, then the levels
    below it (:func:`hierarchical_indices`), and replaces each drawn value by a random one
    of its own bootstrap replicates (``boots``: e.g. ρ's bootstrap over query points, which
    is the same as resampling that setting's query points afresh); the median/mean of the
    drawn values is one replicate. So the interval includes the seed-to-seed variation,
    which :func:`combine` (query points only) leaves out. With one label at every resampled
    level only the query-point level remains, as in :func:`combine`.

    Parameters
    ----------
    values : sequence of float
        Per-setting statistic (e.g. ρ or a ρ difference).
    boots : sequence of numpy.ndarray or None
        Per-setting replicates over query points; ``None`` keeps each value fixed.
    levels : sequence of numpy.ndarray
        Labels per level, outermost first (e.g. ``[seed_of_each_value]``).
    resample : sequence of bool, optional
        Per level: resample (default) or keep each label once.
    how : {"median", "mean"}
        Statistic over the drawn values.
    n_boot, seed, level
        Replicates, seed and interval level.

    Returns
    -------
    value : float
        The statistic of ``values``.
    ci : tuple of float
        Percentile interval, widened to contain ``value``.
    replicates : numpy.ndarray
        The ``n_boot`` replicates.
    """
    v = np.asarray(values, float)
    res = _check_levels(v.size, levels, resample, boots)
    agg = {"median": np.median, "mean": np.mean}[how]
    point = float(agg(v))
    reps = np.array([agg(drawn[np.isfinite(drawn)]) if np.isfinite(drawn).any() else np.nan
                     for _, drawn in _hierarchical_draws(v, boots, levels, res, n_boot, seed)])
    return point, percentile_interval(reps, level, point=point), reps


def hierarchical_trend(x: np.ndarray, y: np.ndarray, levels: Sequence[np.ndarray], resample: Sequence[bool] | None = None,
                       boots: Sequence[np.ndarray] | None = None, n_boot: int = 2000, seed: int = 0,
                       level: float = 0.95) -> Trend:
    """Least-squares slope of ``y`` against ``x`` with a hierarchical bootstrap interval.

    Like :func:`trend`, but the resampling follows nested ``levels``: e.g. ``[series, size,
    seed]`` with ``resample=[True, False, True]`` draws the series (problem × prior × depth
    × query set, each a curve over sizes) with replacement, keeps every size of a drawn
    series, draws the seeds at each size with replacement and replaces each ρ by one of its
    query-point replicates (``boots``); the pooled slope is refitted. A slope carried by
    one series or one seed then gets the wide interval it deserves.

    Returns
    -------
    Trend
        ``n_groups`` is the number of distinct labels at the top level.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    res = _check_levels(y.size, levels, resample, boots)
    slope, icpt = _ols(x, y)
    reps = np.array([_ols(x[idx], yy)[0] for idx, yy in _hierarchical_draws(y, boots, levels, res, n_boot, seed)])
    lo, hi = percentile_interval(reps, level, point=slope)
    return Trend(slope, (lo, hi), icpt, int(y.size), int(np.unique(np.asarray(levels[0])).size))


def bootstrap_p_value(replicates: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "the difference is 0" from a difference's replicates:
    twice the smaller share of replicates on either side of 0, at least one replicate's share."""
    r = np.asarray(replicates, float)
    r = r[np.isfinite(r)]
    if not r.size:
        return float("nan")
    p = 2 * min(float(np.mean(r <= 0)), float(np.mean(r >= 0)))
    return float(min(1.0, max(p, 1.0 / r.size)))


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (false discovery rate), in the input's order."""
    p = np.asarray(p_values, float)
    order = np.argsort(p)
    ranked = p[order] * len(p) / np.arange(1, len(p) + 1)
    adjusted = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty_like(p)
    out[order] = np.minimum(adjusted, 1.0)
    return out
