"""Tests for gnuq_core.stats."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from gnuq_core import stats
from gnuq_core.stats import (bootstrap_spearman, bootstrap_spearman_difference, fit_isotropic_scale, magnitude_view,
                             percentile_bootstrap, rank_agreement, spearman, spearman_pair, t_interval, trend)


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 5, 50).astype(float), rng.standard_normal(50)
    assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic)


def test_rank_agreement_ci_contains_point():
    rng = np.random.default_rng(1)
    ref = rng.exponential(size=200)
    est = ref * np.exp(0.5 * rng.standard_normal(200))
    r = rank_agreement(est, ref, n_boot=300, seed=0)
    assert r.rho_ci[0] <= r.rho <= r.rho_ci[1] and 0.5 < r.rho < 1
    assert r.tau_ci[0] <= r.tau <= r.tau_ci[1] and r.tau < r.rho
    assert r.boot.shape == (300,) and r.n == 200


def test_isotropic_scale_recovered():
    ref = np.random.default_rng(2).exponential(size=100)
    assert fit_isotropic_scale(ref / 7.0, ref) == pytest.approx(7.0)
    mv = magnitude_view(ref / 7.0, ref)
    assert mv["median_abs_log10_ratio"] == pytest.approx(0, abs=1e-12) and mv["frac_within_2x"] == 1


def test_trend_recovers_slope_and_ci():
    rng = np.random.default_rng(3)
    x = np.tile(np.arange(5.0), 4)
    g = np.repeat(np.arange(4), 5)
    y = 0.1 * x + 0.02 * rng.standard_normal(20)
    t = trend(x, y, g, boots=[yy + 0.01 * rng.standard_normal(50) for yy in y], n_boot=300)
    assert t.slope == pytest.approx(0.1, abs=0.02) and t.slope_ci[0] > 0.05 and t.n_groups == 4


def test_rank_difference_and_combine():
    from gnuq_core.stats import combine, rank_difference

    rng = np.random.default_rng(4)
    ref = rng.exponential(size=150)
    good, bad = ref * np.exp(0.1 * rng.standard_normal(150)), ref * np.exp(2 * rng.standard_normal(150))
    d, ci, boot = rank_difference(good, bad, ref, n_boot=200)
    assert ci[0] > 0 and ci[0] <= d <= ci[1] and boot.shape == (200,)
    v, (lo, hi) = combine([0.5, 0.6, 0.7], [np.full(10, 0.5), np.full(10, 0.6), np.full(10, 0.7)])
    assert v == pytest.approx(0.6) and lo == pytest.approx(0.6) and hi == pytest.approx(0.6)


def test_bootstrap_spearman_interval_contains_point():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(100)
    rho, lo, hi = bootstrap_spearman(a, a + rng.standard_normal(100), n_boot=200)
    assert lo <= rho <= hi and 0.3 < rho < 0.95


def test_bootstrap_spearman_difference_detects_a_better_estimate():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal(80)
    rho, lo, hi = bootstrap_spearman(ref + 0.5 * rng.standard_normal(80), ref, n_boot=100)
    assert lo <= rho <= hi
    d, lo, hi = bootstrap_spearman_difference(ref, ref, ref + rng.standard_normal(80), n_boot=100)
    assert 0 < lo <= d <= hi


def test_percentile_bootstrap_draws_one_resample_per_replicate_in_order():
    # the stored intervals depend on this stream: replicate r is the r-th rng.integers(0, n, n)
    rng = np.random.default_rng(7)
    want = [rng.integers(0, 11, 11).sum() for _ in range(5)]
    seen = []
    percentile_bootstrap(lambda i: seen.append(i.sum()) or 0.0, 11, n_boot=5, seed=7)
    assert seen == want
    with pytest.raises(ValueError, match="n_boot"):
        percentile_bootstrap(lambda i: 0.0, 0, n_boot=5)


def test_spearman_pair_is_scipys_and_agrees_with_the_vectorised_one():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 4, 40).astype(float), rng.standard_normal(40)
    assert spearman_pair(a, b) == spearmanr(a, b).statistic
    assert spearman_pair(a, b) == pytest.approx(spearman(a, b), abs=1e-12)


def test_t_interval():
    m, lo, hi = t_interval(np.array([1.0, 2.0, 3.0]))
    assert m == 2.0 and lo < 2.0 < hi and hi - 2.0 == pytest.approx(4.302652729911275 / np.sqrt(3))
    assert t_interval(np.array([5.0])) == (5.0, 5.0, 5.0)


def test_cluster_bootstrap_without_clusters() -> None:
    lo, hi = stats.cluster_bootstrap(np.arange(100.0), seed=1)
    assert lo < 49.5 < hi and hi - lo < 30
    assert stats.cluster_bootstrap([3.0]) == (3.0, 3.0)
    assert stats.cluster_bootstrap([1.0, 2.0, 3.0], seed=5) == stats.cluster_bootstrap([1.0, 2.0, 3.0], seed=5)


def test_cluster_bootstrap_resamples_whole_questions() -> None:
    """Three questions, twenty repeats each: the interval over questions spans the questions'
    values (repeats of one question are not independent evidence)."""
    v = [1.0] * 20 + [2.0] * 20 + [3.0] * 20
    cl = [0] * 20 + [1] * 20 + [2] * 20
    lo, hi = stats.cluster_bootstrap(v, clusters=cl, seed=0)
    assert lo == 1.0 and hi == 3.0
    lo_iid, hi_iid = stats.cluster_bootstrap(v, seed=0)  # as if the 60 values were independent: narrower
    assert hi_iid - lo_iid < hi - lo
    with pytest.raises(ValueError, match="cluster labels"):
        stats.cluster_bootstrap([1.0, 2.0], clusters=[0])


def test_percentile_interval_drops_nan_and_contains_the_point() -> None:
    assert stats.percentile_interval(np.array([np.nan, 1.0, 2.0, 3.0]), 0.5) == (1.5, 2.5)
    assert stats.percentile_interval(np.array([1.0, 2.0, 3.0]), 0.5, point=0.0) == (0.0, 2.5)
    assert all(np.isnan(stats.percentile_interval(np.array([np.nan]))))


def test_resample_indices_shape_and_seed() -> None:
    a = stats.resample_indices(7, 5, seed=3)
    assert a.shape == (5, 7) and a.min() >= 0 and a.max() < 7
    assert (a == stats.resample_indices(7, 5, seed=3)).all()


def _settings(seed_means, n_settings=3, spread=0.01, seed=0):
    """Per-setting values around their seed's mean, with tight query-point replicates."""
    rng = np.random.default_rng(seed)
    vals, boots, seeds = [], [], []
    for s, m in enumerate(seed_means):
        for _ in range(n_settings):
            v = m + spread * rng.standard_normal()
            vals.append(v), boots.append(v + 0.02 * rng.standard_normal(200)), seeds.append(s)
    return np.array(vals), boots, np.array(seeds)


def test_hierarchical_bootstrap_widens_when_seeds_disagree():
    from gnuq_core.stats import combine, hierarchical_bootstrap

    vals, boots, seeds = _settings([0.6, -0.4, 0.5, -0.3])
    v, (lo, hi), reps = hierarchical_bootstrap(vals, boots, [seeds], how="mean", n_boot=1000)
    _, (plo, phi) = combine(list(vals), boots, how="mean")
    assert v == pytest.approx(vals.mean()) and reps.shape == (1000,)
    assert hi - lo > 5 * (phi - plo) and hi - lo > 0.4  # the seeds' spread is in the interval


def test_hierarchical_bootstrap_matches_points_only_when_seeds_agree():
    from gnuq_core.stats import combine, hierarchical_bootstrap

    vals, boots, seeds = _settings([0.5, 0.5, 0.5, 0.5], spread=0.0)
    _, (lo, hi), _ = hierarchical_bootstrap(vals, boots, [seeds], how="median", n_boot=1000)
    _, (plo, phi) = combine(list(vals), boots, how="median")
    assert hi - lo == pytest.approx(phi - plo, rel=0.35)
    assert lo == pytest.approx(plo, abs=0.01) and hi == pytest.approx(phi, abs=0.01)


def test_hierarchical_indices_keeps_fixed_strata_and_resamples_random_levels():
    from gnuq_core.stats import hierarchical_indices

    series = np.repeat([0, 1], 6)
    size = np.tile(np.repeat([0, 1, 2], 2), 2)
    seed = np.tile([0, 1], 6)
    rng = np.random.default_rng(0)
    for _ in range(20):
        idx = hierarchical_indices([series, size, seed], [True, False, True], rng)
        assert idx.size == 12  # 2 series × 3 sizes × 2 seeds, with repeats
        assert sorted(np.bincount(size[idx], minlength=3)) == [4, 4, 4]  # every size kept in every series
    draws = {tuple(hierarchical_indices([seed], [True], rng)) for _ in range(50)}
    assert len(draws) > 1


def test_hierarchical_trend_wide_when_one_series_carries_the_slope():
    from gnuq_core.stats import hierarchical_trend

    x = np.tile(np.repeat(np.arange(4.0), 3), 6)
    series = np.repeat(np.arange(6), 12)
    seed = np.tile(np.arange(3), 24)
    y = np.where(series == 0, 0.5 * x, 0.0) + 0.01 * np.random.default_rng(0).standard_normal(x.size)
    t = hierarchical_trend(x, y, [series, x, seed], [True, False, True], n_boot=500)
    t_seeds = trend(x, y, seed, n_boot=500)
    assert t.slope == pytest.approx(t_seeds.slope) and t.n_groups == 6
    assert t.slope_ci[0] <= 0.0 + 1e-9 < t.slope_ci[1]  # the series that carries it can be left out
    assert t_seeds.slope_ci[0] > 0.05  # resampling seeds alone keeps it in every replicate


def test_hierarchical_bootstrap_bad_input_names_it():
    from gnuq_core.stats import hierarchical_bootstrap

    with pytest.raises(ValueError, match="one label per value"):
        hierarchical_bootstrap([0.1, 0.2], None, [np.array([0, 1, 2])])


def test_benjamini_hochberg_equals_scipys_and_the_bootstrap_p_value() -> None:
    import numpy as np
    from scipy.stats import false_discovery_control

    from gnuq_core.stats import benjamini_hochberg, bootstrap_p_value

    ps = [0.01, 0.04, 0.03, 0.005, 0.5]
    np.testing.assert_allclose(benjamini_hochberg(ps), false_discovery_control(ps))
    assert bootstrap_p_value(np.full(100, 0.3)) == 0.01  # every replicate above 0: the floor, one replicate
    assert bootstrap_p_value(np.linspace(-1, 1, 101)) == 1.0
