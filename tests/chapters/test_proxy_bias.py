"""gnuq_core.chapters.proxy_bias: chapter 02 at a tiny size through an empty store, without papermill."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from gnuq_core.chapters import proxy_bias  # noqa: E402
from gnuq_core.chapters.base import ChapterError  # noqa: E402
from gnuq_core.store import Store  # noqa: E402

TINY = proxy_bias.Params(n_seeds=2, deltas=[0.0, 3.0], n_train=40, hidden_width=3, train_steps=20, k_top=2,
                         n_grid=4, text_n_truthfulqa=40, text_seeds=1, text_hidden=3, text_steps=20, n_boot=20,
                         store_verify=0)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("ch02")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNUQ_CACHE_DIR", str(root / "cache"))
        mp.setenv("GNUQ_OUTPUT_DIR", str(root / "out"))
        mp.setenv("GNUQ_CHAPTER", "02_proxy_bias")
        store = Store(root / "results", label="the test store")
        return proxy_bias.run(TINY, store, "smoke"), store, root


def test_both_experiments_are_computed_stored_and_summarised(ran) -> None:
    result, store, root = ran
    v = result.values
    assert v["n_seeds"] == 2 and v["delta_max"] == 3.0 and -1 <= v["rho_iso"] <= 1
    assert v["rho_iso_lo"] <= v["rho_iso"] <= v["rho_iso_hi"]
    assert set(proxy_bias.TEXT_METHODS) <= {k.removeprefix("text_rho_") for k in v if k.startswith("text_rho_")}
    assert v["c4_verdict"] in ("reproduced", "not reproduced", "inconclusive", "partly reproduced")
    assert sorted(p.parent.name for p in (root / "results").glob("*/*.jsonl")) == ["proxy_synthetic", "proxy_text"]
    claims = (root / "out" / "02_proxy_bias.claims.json").read_text()
    assert '"C4"' in claims


def test_a_second_run_reads_the_store_and_says_the_same(ran) -> None:
    result, store, root = ran
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNUQ_CACHE_DIR", str(root / "cache"))
        mp.setenv("GNUQ_OUTPUT_DIR", str(root / "out"))
        again = proxy_bias.run(TINY, Store(root / "results", label="the test store"), "smoke")
    same = {k: v for k, v in result.values.items() if k != "store_words"}
    assert {k: again.values[k] for k in same} == same


def test_the_figures_and_tables_show_what_was_computed(ran) -> None:
    result, _, _ = ran
    for fig in (proxy_bias.figure_rho_vs_shift(result, TINY), proxy_bias.figure_gain_loss(result, TINY),
                proxy_bias.figure_text_rho(result)):
        assert fig.axes and all(ax.has_data() for ax in fig.axes if ax.get_label() != "<colorbar>")
    assert set(result.tables) == {"sweep", "text"}


def test_params_are_checked() -> None:
    with pytest.raises(ChapterError, match="deltas=\\[\\] must not be empty"):
        proxy_bias.Params(deltas=[])
    with pytest.raises(ChapterError, match="element inf must be a finite number"):
        proxy_bias.Params(deltas=[0.0, float("inf")])
    assert proxy_bias.Params.for_profile("full") == proxy_bias.Params()
