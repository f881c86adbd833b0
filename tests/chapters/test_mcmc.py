"""gnuq_core.chapters.mcmc: chapter 04 at a tiny size through an empty store, without papermill."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import json  # noqa: E402

import pytest  # noqa: E402

from gnuq_core.chapters import mcmc  # noqa: E402
from gnuq_core.chapters.base import ChapterError  # noqa: E402
from gnuq_core.store import Store  # noqa: E402

TINY = mcmc.Params(n_seeds=1, width=3, depth=1, n_train_cls=20, n_train_reg=12, grid_size_cls=5, grid_size_reg=12,
                   n_query_in=10, num_warmup=20, num_samples=20, num_chains=1, n_restarts=1, n_boot=20,
                   store_verify=0)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("ch04")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNUQ_CACHE_DIR", str(root / "cache"))
        mp.setenv("GNUQ_OUTPUT_DIR", str(root / "out"))
        mp.setenv("GNUQ_CHAPTER", "04_mcmc_validation")
        return mcmc.run(TINY, Store(root / "results", label="the test store"), "smoke"), root


def test_references_estimates_comparisons_and_claims(ran) -> None:
    result, root = ran
    v = result.values
    assert v["c1_lo"] <= v["c1"] <= v["c1_hi"] and -1 <= v["c1"] <= 1
    assert v["c3_lo"] <= v["c3"] <= v["c3_hi"]
    assert v["c1_verdict"] in ("reproduced", "not reproduced", "inconclusive", "partly reproduced")
    assert {p.parent.name for p in (root / "results").glob("*/*.jsonl")} == {"nuts_reference", "local_estimates"}
    claims = (root / "out" / "04_mcmc_validation.claims.json").read_text()
    assert '"C1"' in claims and '"C3"' in claims
    assert set(result.tables) == {"diagnostics", "agreement", "per_setting", "where_it_works", "table1"}
    # the paper edition reads Table 1 only from the store: an empty one computes nothing and says what is missing
    assert v['t1_settings'] == 0 and v["t1_wanted"] == 40 and v["t1_inconclusive"] == v["t1_cells"] == 38
    assert "0 of 40 settings are stored" in v["t1_missing_words"] and "mcmc fill" in v["t1_missing_words"]
    assert v["t1_closer"].startswith("With no cell computed")
    assert "Where the isotropic estimate works" in result.tables["where_it_works"].data
    # C1 and C3 are judged on the Table 1 cells: with nothing stored, the gate says what is missing
    recorded = json.loads(claims)
    assert recorded["C1"]["verdict"] == recorded["C3"]["verdict"] == "inconclusive"
    assert "0 seeds (needs ≥ 5)" in recorded["C1"]["reason"]
    assert [r["reading"] for r in recorded["C1"]["readings"]] == ["queries=grid", "queries=in"]
    assert len(recorded["C3"]["readings"]) == 4


def test_the_figures_draw(ran) -> None:
    result, _ = ran
    figs = [mcmc.figure_cls_maps(result, TINY, "p"), mcmc.figure_cls_maps(result, TINY, "logit"),
            mcmc.figure_reg_bands(result, TINY), mcmc.figure_overstate(result, TINY), mcmc.figure_scatter(result, TINY)]
    assert all(fig.axes for fig in figs)


def test_table1_cells_from_computed_settings_beside_the_papers_values(tmp_path, monkeypatch) -> None:
    from dataclasses import replace

    monkeypatch.setenv("GNUQ_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setenv("GNUQ_CHAPTER", "04_mcmc_validation")
    p = replace(TINY, table1_problems=["binary_xor", "multiclass_clusters"], table1_seeds=1, table1_compute=True)
    store = Store(tmp_path / "results", label="the test store")
    out = mcmc.Result()
    mcmc._table1(p, store, out)
    cells = out.data["table1_cells"]
    assert len(cells) == 6 + 6 and out.values["t1_cells"] == 6 + 4  # multiclass LA: beyond the paper
    assert set(cells.loc[cells["paper"].isna(), "verdict"]) == {"beyond the paper"}
    judged = cells[cells["paper"].notna()]
    assert set(judged["verdict"]) == {"inconclusive"} and all("1 of 5 seeds" in w for w in judged["why"])
    xor = cells[(cells["key"] == "binary_xor") & (cells["estimate"] == "Epistemic (GN)") & (cells["statistic"] == "ρ")]
    assert float(xor["paper"].iloc[0]) == 0.68 and -1 <= float(xor["ours"].iloc[0]) <= 1  # from gnuq_core.paper
    fig = mcmc.figure_table1_maps(out, p, "multiclass_clusters")
    assert len(fig.axes) == 5 and not any("not stored" in t.get_text() for ax in fig.axes for t in ax.texts)
    empty = mcmc.figure_table1_maps(out, p, "binary_rings")
    assert "not in this build" in "".join(t.get_text() for ax in empty.axes for t in ax.texts)
    assert mcmc.figure_problems(out, p).axes
    # both query-set readings per cell, the primary (grid) as "ours"; the cells go to the ledger
    assert (cells["ours"] == cells["ours_grid"]).all() and cells["ours_in"].between(-1, 1).all()
    judged = cells[cells["paper"].notna()]
    gaps = {q: (judged[f"ours_{q}"] - judged["paper"]).abs().mean() for q in ("grid", "in")}
    assert out.values["t1_gap_grid"] == pytest.approx(gaps["grid"]) and out.values["t1_gap_in"] == pytest.approx(gaps["in"])
    closer = "grid" if gaps["grid"] <= gaps["in"] else "in-distribution"
    assert out.values["t1_closer"].startswith(f"Overall the {closer} cells lie closer")
    assert "in-distribution" in out.tables["table1"].plain
    ledger_cells = json.loads((tmp_path / "out" / "04_mcmc_validation.cells.json").read_text())["Table 1"]
    assert len(ledger_cells) == 10 and {c["anchor"] for c in ledger_cells} == {"table-1"}
    mcmc._table1_claims(p, "smoke", out)
    c1 = json.loads((tmp_path / "out" / "04_mcmc_validation.claims.json").read_text())["C1"]
    assert c1["evidence"] == {"seeds": 1, "settings": 2, "query_points": 10} and "1 seeds (needs ≥ 5)" in c1["reason"]
    assert -1 <= out.values["t1c1"] <= 1 and out.values["t1c1_verdict"] == "inconclusive"


def test_the_plain_prior_drops_the_duplicate_estimate() -> None:
    plain = mcmc.comparisons(mcmc.Params(prior="plain"))
    assert not any(e.startswith("prior") for _, est in plain.values() for e in est)
    assert any(e.startswith("prior") for _, est in mcmc.comparisons(mcmc.Params(prior="fan_in")).values() for e in est)


def test_params() -> None:
    with pytest.raises(ChapterError, match="target_accept_cls=1.0 must be < 1"):
        mcmc.Params(target_accept_cls=1.0)
    with pytest.raises(ChapterError, match="activation='sigmoid' must be one of"):
        mcmc.Params(activation="sigmoid")
    assert mcmc.Params.for_profile("full") == mcmc.Params()


def test_a_range_whose_ends_read_the_same_is_said_once() -> None:
    assert mcmc.range_words(0.1212, 0.1209, "seed") == "is 0.121 (the same for every seed of this build)"
    assert mcmc.range_words(-0.2, 0.35, "setting") == "runs from -0.200 to 0.350"
