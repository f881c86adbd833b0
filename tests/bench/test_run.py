"""The benchmark driver and its tables (gnuq_core.bench.run, .report, __main__) on tiny random
models and a small dataset fixture: structure, not speed."""

from __future__ import annotations

import json

import pytest

from gnuq_core.bench import report
from gnuq_core.bench.__main__ import main
from gnuq_core.bench.config import BenchConfig
from gnuq_core.bench.run import run
from gnuq_core.bench.summary import c8_measurement
from gnuq_core.repro import claims
from tests.qa.test_data import write_fixture

ENGINE = ("gnuq_core.lm.", "gnuq_core.qa.")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_fixture(tmp_path_factory.mktemp("data")))


@pytest.fixture(scope="module")
def results(data_dir: str) -> dict:
    cfg = BenchConfig(models=["random:tiny", "tiny-llama"], n_questions=1, repeats=2, n_samples=3, max_new_tokens=4,
                      clusterer="exact", synthetic_prompt=(10, 20), synthetic_answer=4, answer_lengths=[2, 4],
                      prompt_lengths=[8, 16], sweep_repeats=1, ladder=[[32, 1]], ladder_repeats=1, memory=False,
                      profile=True, qa_n_samples=2, qa_max_new_tokens=3, threads=1, nli_architecture="tiny",
                      p_true_shots=2, batch_sizes=[1, 2], batch_pairs=3, gram_repeats=2, peer_sizes=[1, 2],
                      peer_repeats=2)
    return run(cfg, data_dir=data_dir, progress=False)


def test_results_structure(results: dict) -> None:
    e = results["models"]["tiny-llama"]
    assert len(e["questions"]) == 2  # one per dataset
    s = e["summary"]
    assert s["units"] == 4 and s["fastest_sampling_baseline"] is not None
    assert s["ratios"]["gradient_over_forward"]["n"] == 4
    assert set(s["gradient_split"]) == {"forward", "backward", "post"}
    assert [p["tokens"] for p in e["sweeps"]["answer"]] == [2, 4]
    assert e["profile"]["gradient"]["ops"] and results["ladder"][0]["params"] > 0
    assert [r["batch_size"] for r in e["batching"]] == [1, 2] and all(r["pairs"] == 3 for r in e["batching"])
    assert e["batching"][0]["speedup_over_1"] == 1.0 and e["batching"][1]["answers_per_second"] > 0
    assert all(0 < r["checks_share"] == r["checks_seconds"] / r["seconds"] for r in e["batching"])  # checks timed
    assert all(r["checks_share"] != r["checks_share"] for r in results["models"]["random:tiny"]["batching"])  # NaN
    peers = e["peers"]["rows"]
    assert [(r["batch_size"], r["method"]) for r in peers] == [(b, m) for b in (1, 2) for m in
                                                               ("gnuq", "opacus", "opacus_ghost", "torch_func", "floor")]
    ran = {r["method"] for r in peers if "why" not in r}
    assert {"gnuq", "torch_func", "floor", "opacus"} <= ran
    assert all("why" not in r or "tying" in r["why"] for r in peers if r["method"] == "opacus_ghost")  # tied heads
    assert all(r["over_floor"] > 0 and r["ci"][0] <= r["seconds"] <= r["ci"][1] for r in peers if "why" not in r)
    assert {r["model"] for r in report.peer_rows(results)} == {"random:tiny", "tiny-llama"}
    assert results["machine"]["device"] == "cpu" and "commit" in results["git"]
    timed = {spec: m["grams"] for spec, m in results["models"].items() if m["grams"]["kernels"]}
    assert all(g["repeats"] == 2 and g["kernels"]["full"]["ratio"]["median"] == 1.0 for g in timed.values())
    assert [r["model"] for r in report.gram_rows(results)] == list(timed)  # none where no layer is ghosted
    json.dumps(results, default=float)  # JSON-ready


def test_a_peer_slower_than_its_cap_is_timed_once_warm_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """No rounds for a method whose warm-up call is over the cap: one more call, warm, is its time."""
    from types import SimpleNamespace

    from gnuq_core.bench import side_by_side
    from gnuq_core.bench.subjects import load_subject

    calls: list[object] = []

    def timed(call, device=None):  # a first call of 10 s, later ones of 1 s
        calls.append(call)
        return call(), 10.0 if calls.count(call) == 1 else 1.0

    monkeypatch.setattr(side_by_side.clock, "timed", timed)
    sub = load_subject("random:tiny")
    cfg = BenchConfig(models=["random:tiny"], peer_sizes=[1], peer_repeats=3, peer_max_seconds=5.0)
    question = SimpleNamespace(prompt_ids=[1, 5, 6, 7, 8], answer_ids=[9, 10])  # what the comparison reads
    rows = side_by_side.peer_throughput(sub, [question], cfg, progress=False)["rows"]
    timed_rows = [r for r in rows if "why" not in r]
    assert timed_rows and all(r["runs"] == [r["seconds"]] == [1.0] for r in timed_rows)
    assert all(r["note"] == "timed once, after a warm-up call of 10 s (more than peer_max_seconds = 5)"
               for r in timed_rows)
    assert len(calls) == 2 * len(timed_rows)  # no rounds
    assert all(r["over_floor"] == 1.0 for r in timed_rows)  # a floor timed once is still the floor


def test_every_pass_in_the_tables_is_an_engine_function(results: dict) -> None:
    rows = report.pass_rows(results)
    assert rows and all(r["engine function"].startswith(ENGINE) for r in rows)


def test_records_per_hour_in_both_layouts(results: dict) -> None:
    assert "throughput" not in results["models"]["random:tiny"]  # synthetic questions: no QA pipeline
    tp = results["models"]["tiny-llama"]["throughput"]
    assert set(tp["layouts"]) == {"1x2", "2x1"}
    assert tp["layouts"]["2x1"]["processes"] == 2 and tp["layouts"]["1x2"]["threads"] == 2
    assert all(lay["records"] == 2 for lay in tp["layouts"].values())  # the same questions in every layout
    lay = tp["layouts"]["2x1"]
    ids = [r["id"] for r in lay["record_list"]]
    assert sorted(ids) == sorted(tp["questions"])  # every question once
    assert sorted(r["worker"] for r in lay["record_list"]) == [0, 1]  # one each: disjoint shares
    rec = lay["record_list"][0]  # the engine's own per-pass timings
    assert {"generate", "gradient", "p_true", "sample", "cluster"} <= set(rec["timings"])
    assert len(rec["sample_tokens"]) == 2
    rows = report.throughput_rows(results)
    assert {r["layout"] for r in rows} == {"1 process(es) × 2 thread(s)", "2 process(es) × 1 thread(s)"}
    assert all(r["gradient share"] > 0 and r["sample share"] > 0 for r in rows)
    camp = results["campaign"]
    assert camp["study_sizes"] == {"truthfulqa": 2, "triviaqa": 2} and set(camp["layouts"]) == {"1x2", "2x1"}
    assert camp["best"]["hours"] > 0 and "campaign" in results["targets"]
    text = report.format_table(results)
    assert "Records per hour" in text and "Estimated wall time of the full study" in text
    assert "2 process(es) × 1 thread(s)" in text and "Gradient pass ÷ one no-grad forward" in text


def test_c8_from_a_run(results: dict) -> None:
    m = c8_measurement(results)
    assert m.ci[0] <= m.value <= m.ci[1] and claims.judge(m) in claims.VERDICTS
    assert set(m.details) == {"random:tiny", "tiny-llama"}


@pytest.mark.subprocess
def test_cli_tiny_dry_run(tmp_path) -> None:
    out = tmp_path / "r.json"
    args = ["--tiny", "--models", "random:tiny", "--no-memory", "--no-profile", "--ladder", "--clusterer", "exact",
            "--quiet", "--out", str(out)]
    assert main(args) == 0
    res = json.loads(out.read_text())
    assert res["config"]["repeats"] == 1 and "random:tiny" in res["models"]


def test_cli_quick_shrinks_the_run() -> None:
    from gnuq_core.bench.__main__ import _parser, config_from_args

    cfg = config_from_args(_parser().parse_args(["--quick"]))
    assert cfg.n_questions == 1 and cfg.repeats == 1 and not cfg.ladder and not cfg.memory
    assert cfg.throughput and cfg.qa_n_samples == 10 and cfg.qa_max_new_tokens == 32  # study settings kept
    assert "reference" in cfg.skip and cfg.gram_repeats == 3 and cfg.floor_rounds == 2
    assert config_from_args(_parser().parse_args(["--floor-rounds", "0"])).floor_rounds == 0
    cfg = config_from_args(_parser().parse_args(["--peer-repeats", "5", "--peer-max-seconds", "120"]))
    assert (cfg.peer_repeats, cfg.peer_max_seconds) == (5, 120.0)


def test_cli_bad_option_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert main(["--skip", "naive", "--out", "/nonexistent/never-written.json"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "skip=['naive']" in err and "reference" in err


@pytest.mark.parametrize("value", ["-1", "1.5", "nan", "four"])
def test_a_bad_sequential_timed_is_one_line(value: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:  # argparse's exit, as `gnuq bench` exits
        main(["--sequential-timed", value, "--out", "/nonexistent/never-written.json"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: argument --sequential-timed")


def test_cli_sequential_timed_reaches_the_config() -> None:
    from gnuq_core.bench.__main__ import _parser, config_from_args

    assert config_from_args(_parser().parse_args([])).sequential_timed == 0  # make bench: all N
    assert config_from_args(_parser().parse_args(["--sequential-timed", "4"])).sequential_timed == 4


def test_the_run_records_where_its_wall_time_went(results: dict) -> None:
    parts = results["section_seconds"]
    for spec in ("random:tiny", "tiny-llama"):
        assert {f"{spec}: loading", f"{spec}: timed passes (inputs prepared untimed)", f"{spec}: sweeps",
                f"{spec}: profile", f"{spec}: Gram kernels"} <= set(parts)
    assert "tiny-llama: records per hour" in parts and "random:tiny: records per hour" not in parts
    assert "size ladder" in parts and "memory" not in parts  # memory=False in this run
    assert 0 < sum(parts.values()) <= results["wall_seconds"]
    rows = report.section_rows(results)
    assert [r["seconds"] for r in rows] == sorted((r["seconds"] for r in rows), reverse=True)
    assert "Where the run's wall time went" in report.format_table(results)


def test_sections_add_up_and_count_a_block_that_raises() -> None:
    from gnuq_core.bench.run import Sections

    part = Sections()
    with part("a"):
        pass
    with pytest.raises(KeyError), part("a"):
        raise KeyError("x")
    with part("b"):
        pass
    assert list(part.seconds) == ["a", "b"] and all(v >= 0 for v in part.seconds.values())
