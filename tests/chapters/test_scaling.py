"""gnuq_core.chapters.scaling: chapter 05 at a tiny size through an empty store, without papermill."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from gnuq_core.chapters import scaling  # noqa: E402
from gnuq_core.chapters.base import ChapterError  # noqa: E402
from gnuq_core.store import Store  # noqa: E402

TINY = scaling.Params(n_seeds=1, problems=["two_moons"], widths=[2, 4], depths=[1], deep_widths=[], priors=["plain"],
                      n_train_cls=20, grid_size_cls=5, n_query_in=10, num_warmup=50, num_samples=100, num_chains=1,
                      n_restarts=1, n_boot=20, store_verify=0, trend_problems=["binary_xor"], trend_widths=[2, 3],
                      trend_seeds=1, trend_compute=True)
"""Two NUTS runs (two sizes, so there is a trend), each long enough for its reference to rank the queries."""


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("ch05")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNUQ_CACHE_DIR", str(root / "cache"))
        mp.setenv("GNUQ_OUTPUT_DIR", str(root / "out"))
        mp.setenv("GNUQ_CHAPTER", "05_scaling")
        return scaling.run(TINY, Store(root / "results", label="the test store"), "smoke"), root


def test_grid_trends_and_claim(ran) -> None:
    result, root = ran
    v = result.values
    assert v["n_models"] == len(scaling.grid(TINY)) == 2
    assert v["n_defined"] + v["n_undefined"] == v["n_models"]
    assert v["p_min"] < v["p_max"]
    assert v["c2_lo"] <= v["c2"] <= v["c2_hi"]
    assert v["c2_verdict"] in ("reproduced", "not reproduced", "inconclusive", "partly reproduced")
    assert -1 <= v["worst_rho"] <= 1 and v["worst_sampler_reading"] and v["worst_factor_reading"]
    assert 0 <= v["span_small"] <= 1 and v["rank_small"] >= 1
    assert {p.parent.name for p in (root / "results").glob("*/*.jsonl")} == {"nuts_reference", "local_estimates"}
    claims = json.loads((root / "out" / "05_scaling.claims.json").read_text())
    assert '"C2"' in json.dumps(claims)
    # C2 is judged on the size trend of the Table 1 problems (chapter 04's smoke setup at widths 2 and 3)
    c2 = claims["C2"]
    assert c2["settings"]["widths"] == [2, 3] and c2["verdict"] == "inconclusive" and "1 seeds (needs ≥ 3)" in c2["reason"]
    assert [r["reading"] for r in c2["readings"]] == ["problems=Table 1, queries=grid", "problems=Table 1, queries=in",
                                                      "problems=two moons and gap, queries=both"]
    assert v["trend_stored"] == v["trend_wanted"] == 2 and "trend" in result.tables
    assert set(result.data["trend"].queries) == {"grid", "in"} and result.data["trend"].rho.between(-1, 1).all()
    assert {"health", "trends", "worst_series", "by_size", "trend"} <= set(result.tables) <= {
        "health", "undefined", "trends", "worst_series", "by_size", "trend"}


def test_the_figures_draw(ran) -> None:
    result, _ = ran
    figs = [scaling.figure_scaling(result, TINY), scaling.figure_ntk(result, TINY), scaling.figure_trend(result, TINY)]
    assert all(fig.axes for fig in figs)


def test_the_grid_runs_deep_nets_at_deep_widths_only() -> None:
    p = scaling.Params(n_seeds=1, problems=["two_moons"], widths=[4, 8, 16], depths=[1, 2], deep_widths=[8],
                       priors=["plain"])
    assert [(dp, wd) for _, _, dp, wd, _ in scaling.grid(p)] == [(1, 4), (1, 8), (1, 16), (2, 8)]
    everywhere = scaling.Params(n_seeds=1, problems=["two_moons"], widths=[4, 8], depths=[1, 2], deep_widths=[],
                                priors=["plain"])
    assert len(scaling.grid(everywhere)) == 4


def test_params() -> None:
    with pytest.raises(ChapterError, match=r"widths=\[\] must not be empty"):
        scaling.Params(widths=[])
    with pytest.raises(ChapterError, match="problems=.* element 'spirals' must be one of"):
        scaling.Params(problems=["spirals"])
    with pytest.raises(ChapterError, match=r"depths=\[1, 0\] element 0 must be ≥ 1"):
        scaling.Params(depths=[1, 0])
    with pytest.raises(ChapterError, match="num_samples=10000000000 must be ≤ 1,000,000"):
        scaling.Params(num_samples=10_000_000_000)
    assert scaling.Params.for_profile("full") == scaling.Params()
    quick = scaling.Params.for_profile("quick")
    assert (quick.widths, quick.deep_widths, quick.n_boot, quick.store_verify) == ([4, 16, 64], [], 300, 2)


def test_a_share_that_stays_put_is_said_so() -> None:
    assert scaling.span_words(1e-12, 1e-12).startswith("stays at the floor of the computation (below 1e-12)")
    assert scaling.span_words(0.25, 0.25) == "stays at 2.50e-01 from the smallest network to the largest"
    assert scaling.span_words(1e-3, 0.2) == "goes from 1.00e-03 (smallest network) to 2.00e-01 (largest)"
