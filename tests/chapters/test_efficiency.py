"""gnuq_core.chapters.efficiency: chapter 07 on two tiny random models and a small data fixture, without papermill.

Nothing is downloaded and no real model is loaded: ``random:tiny`` (synthetic token-id
questions) and ``tiny-llama`` (a byte tokenizer, the fixture's questions, one records/hour
layout); clustering is exact match, no memory run. The numbers are timings, so the tests
check structure, counts and words, never speed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from IPython.display import Markdown  # noqa: E402

from gnuq_core.bench import report  # noqa: E402
from gnuq_core.bench.config import SCHEMA  # noqa: E402
from gnuq_core.chapters import efficiency  # noqa: E402
from gnuq_core.chapters.base import profile_values  # noqa: E402
from gnuq_core.chapters.base import ChapterError  # noqa: E402
from gnuq_core.repro import claims  # noqa: E402

from tests.chapters.glued import glued_names  # noqa: E402
from tests.qa.test_data import write_fixture  # noqa: E402

NOTEBOOK = Path(__file__).resolve().parents[2] / "gnuq_core" / "notebooks" / "07_efficiency.py"
MODELS = ["random:tiny", "tiny-llama"]
TINY = efficiency.Params(models=MODELS, n_questions=1, repeats=2, n_samples=3, max_new_tokens=4, clusterer="exact",
                         answer_lengths=[2, 4], prompt_lengths=[8, 16], sweep_repeats=1, ladder=[[32, 1]],
                         ladder_repeats=1, memory=False, skip_passes=["reference"], throughput_questions=0,
                         layouts=[[1, 1]], synthetic_prompt=[10, 20], synthetic_answer=4,
                         nli_architecture="tiny", p_true_shots=2, batch_sizes=[1, 2], batch_pairs=4,
                         long_answer_tokens=8)
"""One question per dataset timed twice, short sweeps, one ladder model, one records/hour layout, no memory run."""


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("ch07")
    data = write_fixture(root / "data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNUQ_DATA_DIR", str(data))
        mp.setenv("GNUQ_CACHE_DIR", str(root / "cache"))
        mp.setenv("GNUQ_OUTPUT_DIR", str(root / "out"))
        mp.setenv("GNUQ_CHAPTER", efficiency.Params.CHAPTER)
        mp.setattr(efficiency, "GPU_RESULTS", root / "no_gpu_results.json")
        return efficiency.run(TINY, None, "smoke", data_dir=str(data)), root


def test_every_value_the_page_glues_is_computed(ran) -> None:
    result, _ = ran
    quoted = set(profile_values(efficiency.Params()))  # the profiles' values the exercises quote (glue_values)
    missing = glued_names(NOTEBOOK) - set(result.values) - quoted
    assert not missing, f"the page glues values run() does not compute: {sorted(missing)}"
    v = result.values
    assert (v["n_models"], v["n_q_total"], v["floor_n"], v["n_samples_used"]) == (2, 4, 2, 3)
    assert 0 <= v["floor_n_met"] <= v["floor_n"] and v["bench_wall"] > 0
    assert v["clusterer_name"].data and "torch thread(s)" in v["machine_cpu"].data
    assert v["floor_model_0"].data == "`random:tiny`" and v["floor_ratio_0"] > 0
    assert v["floor_list"].data.count("rounds;") == 2
    assert v["target_ratio"] == 2.3 and v["mem_target"] == 0.5
    assert v["target_above_floor"] == 0.15 and v["above_floor_n"] == 2 and 0 <= v["above_floor_n_met"] <= 2
    assert v["above_floor_list"].data.count("forwards above it (95% CI") == 2  # the floor is timed every round
    assert v["above_floor_list"].data.count("; the Gram products ") == 2  # and split by the floor with Grams
    assert v["arithmetic_list"].data.count("with symmetric products") == 2  # the norm's multiply-adds, counted
    assert v["arithmetic_verdict"].data.startswith("On ")
    assert v["gram_kernel_verdict"].data.startswith(("Timed on their own", "The Gram products were not timed"))
    assert v["gram_takeaway"].data.startswith("The exact norm's Gram products")
    for reading in ("reference", "optimised"):  # C8 under both readings
        assert v[f"c8_{reading}_lo"] <= v[f"c8_{reading}_value"] <= v[f"c8_{reading}_hi"]
        assert v[f"c8_{reading}_verdict"].data in claims.VERDICTS
        assert v[f"c8_{reading}_model"].data in {f"`{m}`" for m in MODELS}
        assert all(f"`{m}`" in v[f"c8_{reading}_per_model"].data for m in MODELS)
    assert v["se_speedup_min"] <= v["se_speedup_max"]
    # the reference baselines: few-shot P(True) and entailment clustering on the text model only
    assert v["p_true_shots_used"] == 2 and v["fewshot_tokens"].data.endswith(" tokens")
    assert v["reference_questions_used"].data == "every question" and v["se_reference_range"].data.endswith("×")
    assert "comparisons (median" in v["nli_comparison_range"].data
    assert "sampling one answer at a time ×" in v["gap_list"].data
    assert v["gap_list"].data.count("answers of 8 tokens, not ") == 2 and v["long_answer_tokens_used"] == 8
    assert v["reference_answer_cap"] == 50
    assert v["batching_list"].data.count("answers/s at B = ") == 2  # both models
    # records per hour: tiny-llama only (random:tiny has synthetic questions), one layout
    assert v["rph_list"].data.startswith("`tiny-llama`, 1 process(es) × 1 thread(s): ")
    assert v["study_desc"].data == "2 truthfulqa + 2 triviaqa" and v["study_records"] == 4
    assert v["campaign_best_hours"] > 0 and v["campaign_best_layout"].data == "1 process(es) × 1 thread(s)"
    assert re.fullmatch(r"\d+%–\d+%", v["sample_share_range"].data)
    # no memory run: said in words, numbers NaN
    assert v["mem_verdict"].data == v["mem_worst_model"].data == "not measured"
    assert np.isnan(v["mem_worst_frac"]) and np.isnan(v["mem_ref_frac"])
    assert np.isfinite(v["ladder_ratio_small"]) and v["ladder_ratio_small"] == v["ladder_ratio_large"]  # one rung
    assert v["ladder_words"] == f"is {v['ladder_ratio_small']:.2f} (one size in this build's ladder)"
    assert 0 <= v["mm_share_forward"] <= 1 and 0 <= v["mm_share_gradient"] <= 1


def test_tables_bench_json_and_claim(ran) -> None:
    result, root = ran
    assert set(result.tables) == {"costs", "floor", "variants", "speedup", "gap", "batching", "peers", "throughput",
                                  "operators", "gpu_note", "peers_committed"}
    peers = repr(result.tables["peers"])
    assert "Opacus per-sample gradients" in peers and "torch.func" in peers and "÷ floor" in peers
    assert "answers/s" in result.values["peer_words"].data and "the floor's time" in result.values["peer_words"].data
    batching = repr(result.tables["batching"])
    assert "answers / s" in batching and "speed-up over B = 1" in batching
    speedup = repr(result.tables["speedup"])
    assert "semantic entropy (reference)" in speedup and "semantic entropy (optimised)" in speedup
    assert "P(True) (reference)" in speedup and "predictive entropies (reference)" in speedup
    gap = repr(result.tables["gap"])
    assert "entailment clustering" in gap and "few-shot P(True) prompt" in gap
    variants = repr(result.tables["variants"])
    assert "all parameters" in variants and "last decoder block" in variants and "÷ forward" in variants
    assert repr(result.tables["floor"]).splitlines()[0].split()[:5] == ["model", "gradient", "[95%", "CI]", "floor"]
    assert "P(True)" in repr(result.tables["costs"]) or "P(True)" in repr(result.tables["speedup"])
    assert "records / hour" in repr(result.tables["throughput"])
    res = json.loads((root / "out" / "07_efficiency.bench.json").read_text())
    assert list(res["models"]) == MODELS and res["config"]["synthetic_prompt"] == [10, 20]
    assert res["config"]["ladder_repeats"] == 1 and res["config"]["skip"] == ["reference"]
    assert result.data["bench"]["models"].keys() == res["models"].keys()
    entry = json.loads((root / "out" / "07_efficiency.claims.json").read_text())["C8"]
    # the primary reading is the paper's wording (reference implementations); both are in the ledger
    assert entry["chapter"] == "07_efficiency" and entry["verdict"] == result.values["c8_reference_verdict"].data
    assert entry["settings"]["profile"] == "smoke" and entry["settings"]["threads"] == TINY.threads
    assert entry["settings"]["reading"] == "reference"
    assert set(entry["details"]) == set(MODELS) and entry["value"] == result.values["c8_reference_value"]
    readings = {r["reading"]: r for r in entry["readings"]}
    assert [r["primary"] for r in entry["readings"]] == [True, False]
    assert set(readings) == {"each baseline as its reference implementation runs it",
                             "the fastest of this project's optimised baselines"}
    assert readings["the fastest of this project's optimised baselines"]["verdict"] == (
        result.values["c8_optimised_verdict"].data)
    assert "No GPU results" in result.tables["gpu_note"].data


def test_the_figures_draw(ran) -> None:
    result, _ = ran
    floor, speedup, scaling = (efficiency.figure_floor(result), efficiency.figure_speedup(result),
                               efficiency.figure_scaling(result))
    assert [t.get_text() for t in floor.axes[0].get_xticklabels()] == ["all", "no embeddings", "last block", "LM head"]
    assert speedup.axes[0].get_xscale() == "log" and len(scaling.axes) == 3
    names = [t.get_text().replace("\n", " ") for t in speedup.axes[0].get_yticklabels()]
    assert "P(True), zero-shot (optimised)" in names and all(names)  # one named row per baseline


def test_a_committed_gpu_run_is_shown(ran, tmp_path: Path) -> None:
    result, _ = ran
    path = tmp_path / "gpu_results.json"
    assert efficiency.gpu_results(path) is None  # none committed
    path.write_text(json.dumps({**result.data["bench"], "schema": SCHEMA - 1}, default=float))
    assert efficiency.gpu_results(path) is None  # an older benchmark version: not shown
    path.write_text(json.dumps(result.data["bench"], default=float))
    gres = efficiency.gpu_results(path)
    assert gres is not None and list(gres["models"]) == MODELS
    assert len(repr(efficiency.floor_table(report.floor_rows(gres))).splitlines()) == 3


def test_no_records_per_hour_and_headers() -> None:
    out = efficiency.Result()
    efficiency._throughput({"models": {}}, out)
    assert isinstance(out.tables["throughput"], Markdown) and out.values["rph_list"].data == "not measured"
    assert np.isnan(out.values["campaign_best_hours"])
    assert efficiency.header("gradient_no_embeddings ÷ p_true") == "gradient, no embeddings ÷ P(True)"
    table = efficiency.rows_table([{"model": "m", "sample share": 0.25, "records": 3, "records / hour": 12345.6,
                                    "95% CI": "[1.00, 2.00]"}])
    line = repr(table).splitlines()[1]
    assert "25%" in line and "12,346" in line and "[1.00, 2.00]" in line


def test_params() -> None:
    assert efficiency.Params.for_profile("full") == efficiency.Params()
    p = efficiency.Params()
    assert (p.n_questions, p.repeats, p.skip_passes, p.prompt_lengths, p.throughput_questions) == (
        3, 2, ["reference", "decode"], [32, 128, 512], 1)
    assert (p.reference, p.nli_architecture, p.p_true_shots, p.batch_sizes, p.reference_questions) == (
        True, "deberta-large-mnli", 20, [1, 4, 8], 1)
    assert efficiency.bench_config_of(p).batch_repeats == 1
    assert p.sequential_timed == 4 and efficiency.bench_config_of(p).sequential_timed == 4
    assert efficiency._sequential_timed({"n_samples": 10, "sequential_timed": 4}).startswith(
        "the first 4 of the 10 are timed, and their time × 2.5 stands for all 10: ")
    assert efficiency._sequential_timed({"n_samples": 3, "sequential_timed": 4}) == "all 3 of them are timed"
    quick = efficiency.Params.for_profile("quick")
    assert (quick.n_questions, quick.repeats, quick.max_new_tokens, quick.prompt_lengths, quick.ladder,
            quick.throughput, quick.memory) == (1, 1, 24, [32, 128, 256], [[64, 2], [128, 4]], False, False)
    smoke = efficiency.Params.for_profile("smoke")
    assert smoke.models == ["tiny-llama", "random:tiny"] and smoke.skip_passes == []
    assert (smoke.synthetic_prompt, smoke.synthetic_answer, smoke.ladder_repeats) == ([20, 40], 6, 1)
    cfg = efficiency.bench_config_of(smoke)
    assert cfg.synthetic_prompt == (20, 40) and cfg.threads == 1 and cfg.skip == []
    assert efficiency.bench_config_of(efficiency.Params(threads=0)).threads is None  # torch's default
    for kwargs, message in [
        ({"models": []}, r"models=\[\] must not be empty"),
        ({"repeats": 10_000_000_000}, "repeats=10000000000 must be ≤ 1,000,000"),
        ({"n_questions": 0}, "n_questions=0 must be ≥ 1"),
        ({"n_samples": 0}, "n_samples=0 must be ≥ 1"),
        ({"threads": 100_000}, "threads=100000 must be ≤"),
        ({"clusterer": "nli"}, "clusterer='nli' must be one of 'embedding', 'exact'"),
        ({"answer_lengths": []}, "answer_lengths=\\[\\] must not be empty"),
        ({"prompt_lengths": [32, 0]}, "element 0 must be ≥ 1"),
        ({"skip_passes": ["naive"]}, "element 'naive' must be one of"),
        ({"ladder": [[64]]}, r"ladder=\[\[64\]\] element \[64\] must be a pair"),
        ({"ladder": [[100_000, 2]]}, r"element \[100000, 2\] must be ≤ 65536"),
        ({"layouts": [[2, 0]]}, "element 0 must be ≥ 1"),
        ({"layouts": [[1, 100_000]]}, r"layouts=.* element \[1, 100000\] must be ≤"),
        ({"synthetic_prompt": [40, 20]}, "shortest ≤ longest"),
        ({"memory": 1}, "memory=1 is a whole number"),
        ({"timed_once": ["gradient"]}, "gradient must be timed in every round"),
        ({"timed_once": ["naive"]}, "element 'naive' must be one of"),
        ({"long_answer_tokens": 0}, "long_answer_tokens=0 must be ≥ 1"),
        ({"long_answer_tokens": 32}, "long_answer_tokens=32 must exceed max_new_tokens=32"),
        ({"sequential_timed": -1}, "sequential_timed=-1 must be ≥ 0"),
    ]:
        with pytest.raises(ChapterError, match=message):
            efficiency.Params(**kwargs)
    with pytest.raises(ChapterError, match=r"unknown parameter\(s\) n_truthfulqa"):
        efficiency.Params.resolve({}, {"n_truthfulqa": 3})


def test_bars_take_an_interval_whose_bound_passes_the_median() -> None:
    """A bootstrap bound one rounding step past the median (np.percentile against np.median)
    draws as a zero-length error bar instead of matplotlib's ValueError (seen once as a flake)."""
    import matplotlib.pyplot as plt

    med = 2.0
    res = {"models": {"m": {"summary": {"ratios": {"k": {"median": med, "ci": [np.nextafter(med, 3.0), 2.5]}}}}}}
    fig, ax = plt.subplots()
    efficiency._bars(ax, res, ["k"], "ratios")
    efficiency._bars(ax, res, ["k"], "ratios", horizontal=True)
    plt.close(fig)


def test_the_arithmetic_verdict_names_the_models_the_count_rules_out() -> None:
    row = lambda m, n, sym: {"model": m, "norm multiply-adds ÷ forward": n, "symmetric": sym}  # noqa: E731
    assert efficiency.arithmetic_verdict([], 0.15) == "No count was recorded in this build."
    assert efficiency.arithmetic_verdict([row("a", 0.1, 0.05)], 0.15).startswith("On every model the count is within")
    text = efficiency.arithmetic_verdict([row("a", 0.2, 0.1), row("b", 0.1, 0.05)], 0.15)
    assert text.startswith("On `a` the count alone exceeds") and "`b`" not in text and text.endswith("(timed below).")
    text = efficiency.arithmetic_verdict([row("a", 0.4, 0.2), row("b", 0.2, 0.1)], 0.15)
    assert "On `a`, `b` the count" in text and text.endswith("would still exceed it on `a`.")
    assert "Timed within" not in text
    timed = {**row("b", 0.16, 0.08), "above-floor verdict": "met", "above floor": 0.13, "above floor 95% CI": "[-0.02, 0.20]"}
    text = efficiency.arithmetic_verdict([row("a", 0.17, 0.09), timed], 0.15)
    assert "Timed within the target all the same, below its own count: `b` (0.13, 95% CI -0.02–0.20, which reaches" in text
    text = efficiency.arithmetic_verdict([{**timed, "above floor 95% CI": "[0.05, 0.14]"}], 0.15)
    assert "`b` (0.13, 95% CI 0.05–0.14)." in text
    text = efficiency.arithmetic_verdict([{**timed, "above floor": -0.14, "above floor 95% CI": "[-0.22, 0.10]"}], 0.15)
    assert "`b` (-0.14, 95% CI -0.22–0.10; below the floor itself, where no pass can run: timing noise)." in text


def test_the_gram_kernel_verdict_says_what_the_full_and_symmetric_products_cost() -> None:
    def row(m: str, full: str, ratio: str) -> dict:
        lo, hi = (float(x) for x in full.strip("[]").split(", "))
        rlo, rhi = (float(x) for x in ratio.strip("[]").split(", "))
        return {"model": m, "rows T": 80, "Gram products ÷ forward": (lo + hi) / 2, "95% CI": full,
                "symmetric kernels": "blocks2, blocks3, blocks4", "fastest symmetric kernel": "blocks3", "its time ÷ full": (rlo + rhi) / 2, "its 95% CI": ratio,
                "ideal": 0.67}

    assert efficiency.gram_kernel_verdict([], 0.15) == "The Gram products were not timed on their own in this build."
    text = efficiency.gram_kernel_verdict([row("a", "[0.18, 0.22]", "[0.98, 1.10]"),
                                           row("b", "[0.08, 0.16]", "[0.95, 1.05]")], 0.15)
    assert "`a` 0.20 forwards (95% CI 0.18–0.22, T = 80)" in text
    assert "On `a` that alone is above the target of 0.15" in text and "On `a`, `b`" not in text
    assert "No symmetric kernel timed here (the lower triangle in 2, 3 or 4 row blocks) is faster" in text
    assert text.endswith("is not to be had on this machine.")
    text = efficiency.gram_kernel_verdict([{**row("a", "[0.18, 0.22]", "[0.98, 1.10]"),
                                            "symmetric kernels": "blocks2, syrk"}], 0.15)
    assert "(the lower triangle in 2 row blocks; BLAS `syrk`, timed on one thread only)" in text
    text = efficiency.gram_takeaway([row("a", "[0.18, 0.22]", "[0.98, 1.10]"), row("b", "[0.07, 0.09]", "[0.9, 1.1]"),
                                     row("c", "[0.12, 0.18]", "[0.9, 1.1]")], 0.15)
    assert text.startswith("The exact norm's Gram products, timed on their own, cost 0.20 forwards on `a`, 0.08 on "
                           "`b`, 0.15 on `c`, against a target of at most 0.15 forwards above the floor")
    assert text.endswith("out of reach on `a` by the arithmetic itself; within reach on `b` if the hooks around them "
                         "cost less; on `c` they alone come close to it (their interval reaches the target).")
    assert efficiency.gram_takeaway([row("c", "[0.12, 0.18]", "[0.9, 1.1]")], 0.15).endswith(
        "forwards above the floor for the whole pass: on `c` they alone come close to it (their interval reaches "
        "the target).")
    assert "not timed" in efficiency.gram_takeaway([], 0.15)
    text = efficiency.gram_kernel_verdict([row("b", "[0.08, 0.12]", "[0.60, 0.75]")], 0.15)
    assert "above the target" not in text and "faster than the full product on `b`" in text
    assert "blocks3 0.68 of the full products' time (95% CI 0.60–0.75; its multiply-adds 0.67)" in text


def _peer_run(started: str, sizes: tuple[int, ...], gnuq_speed: float) -> dict:
    rows = [{"batch_size": b, "method": m, "answers_per_second": speed * b, "seconds": 1.0 / speed}
            for b in sizes for m, speed in (("gnuq", gnuq_speed), ("opacus", 1.0), ("floor", 1.0))]
    return {"schema": SCHEMA, "started": started, "models": {"tiny": {"summary": {"ratios": {}}, "peers": {"rows": rows}}}}


def test_the_newest_committed_peer_run_and_where_gnuq_stands(tmp_path: Path) -> None:
    assert efficiency.committed_peer_run(tmp_path) is None
    (tmp_path / "a-newest-but-one-size.json").write_text(json.dumps(_peer_run("2026-12-09", (1,), 2.0)))
    (tmp_path / "b-old.json").write_text(json.dumps(_peer_run("2026-12-01", (1, 16), 2.0)))
    (tmp_path / "c-new.json").write_text(json.dumps(_peer_run("2026-12-05", (1, 16), 0.5)))
    (tmp_path / "d-other-schema.json").write_text(json.dumps({**_peer_run("2026-12-08", (1, 16), 2.0), "schema": -1}))
    (tmp_path / "e-damaged.json").write_text("{")
    path, res = efficiency.committed_peer_run(tmp_path)
    assert path.name == "c-new.json"
    words = efficiency.peer_standing(res)
    assert "`tiny`: gnuq below the fastest peer at B = 1 (the least ratio of throughputs 0.50" in words
    assert "2.00× the floor's time at most at B ≥ 16 (B = 16; target ≤ 1.25: missed)" in words
    fast = efficiency.peer_standing(_peer_run("x", (1, 16), 1.1))
    assert "at or above the fastest peer at every B (the least ratio of throughputs 1.10" in fast
    assert "target ≤ 1.25: met" in fast
    floorless = _peer_run("x", (1, 16, 64), 1.1)
    rows = floorless["models"]["tiny"]["peers"]["rows"]
    rows[:] = [r for r in rows if (r["batch_size"], r["method"]) != (64, "floor")]
    words = efficiency.peer_standing(floorless)
    assert "0.91× the floor's time at most at B ≥ 16 (B = 16; target ≤ 1.25: met)" in words
    assert "not compared with the floor at B = 64 (the floor did not run there)" in words
