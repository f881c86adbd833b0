"""gnuq_core.chapters.spectra: chapter 03 at a tiny size through an empty store, without papermill."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gnuq_core.chapters import spectra  # noqa: E402
from gnuq_core.chapters.base import ChapterError  # noqa: E402
from gnuq_core.store import Store  # noqa: E402

TINY = spectra.Params(widths=[3, 4], n_train=40, train_steps=30, n_dampings=3, n_grid=4, big_width=6, big_steps=20,
                      slq_probes=2, slq_steps=6, n_query=4, lm_source="tiny-random", lm_tokens=12, lm_probes=1,
                      lm_steps=3, n_boot=20, store_verify=0)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("ch03")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNUQ_CACHE_DIR", str(root / "cache"))
        mp.setenv("GNUQ_OUTPUT_DIR", str(root / "out"))
        mp.setenv("GNUQ_CHAPTER", "03_hessian_spectra")
        return spectra.run(TINY, Store(root / "results", label="the test store"), "smoke"), root


def test_the_three_parts_are_computed_and_claim_c5_recorded(ran) -> None:
    result, root = ran
    v = result.values
    assert v["w_max"] == 4 and v["p_small"] < v["p_max"] and 0 <= v["ggn_below"] <= 100
    assert v["c5_lo"] <= v["c5_rho"] <= v["c5_hi"] and -1 <= v["c5_rho"] <= 1
    assert v["lm_dim"] > 0 and np.isfinite(v["lm_lmax"]) and v["lm_lmin"] <= v["lm_lmax"]
    assert v["slq_check_words"].startswith(("SLQ reproduces", "With this few"))
    assert {p.parent.name for p in (root / "results").glob("*/*.jsonl")} == set(spectra.KINDS)
    assert '"C5"' in (root / "out" / "03_hessian_spectra.claims.json").read_text()


def test_the_figures_and_tables_show_what_was_computed(ran) -> None:
    result, _ = ran
    for fig in (spectra.figure_exact_spectra(result, TINY), spectra.figure_slq_mlp(result, TINY),
                spectra.figure_slq_lm(result), spectra.figure_damping(result, TINY)):
        assert fig.axes and all(ax.has_data() for ax in fig.axes)
    assert set(result.tables) == {"spectra", "rho"}


def test_params() -> None:
    assert spectra.Params(n_dampings=3).dampings == pytest.approx([1e-5, 10**-2.5, 1.0])
    with pytest.raises(ChapterError, match="lm_source='gpt2' must be one of 'smollm2', 'tiny-random'"):
        spectra.Params(lm_source="gpt2")
    with pytest.raises(ChapterError, match="widths=\\[4, 0\\] element 0 must be ≥ 1"):
        spectra.Params(widths=[4, 0])
    assert spectra.Params.for_profile("full") == spectra.Params()
