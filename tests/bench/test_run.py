"""The benchmark driver (gnuq_core.bench) on tiny random models: structure, not speed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnuq_core.bench import run as bench
from gnuq_core.repro import claims


@pytest.fixture(scope="module")
def tiny_config() -> bench.BenchConfig:
    return bench.BenchConfig(models=["random:tiny"], datasets=["a"], n_questions=2, repeats=2, n_samples=3,
                             clusterer="exact", synthetic_prompt=(10, 20), synthetic_answer=4, answer_lengths=[2, 4],
                             prompt_lengths=[8, 16], sweep_repeats=1, ladder=[[32, 1]], ladder_repeats=1,
                             memory=False, profile=True, threads=1)


@pytest.fixture(scope="module")
def tiny_results(tiny_config: bench.BenchConfig) -> dict:
    return bench.run(tiny_config, progress=False)


def test_results_have_every_method_ratio_and_target(tiny_results: dict) -> None:
    e = tiny_results["models"]["random:tiny"]
    assert len(e["questions"]) == 2
    q = e["questions"][0]
    assert all(len(v) == 2 for v in q["times"].values())  # every pass, every repeat
    assert {"generate", "forward", "gradnorm", "sample", "cluster", "p_true", "naive"} <= set(q["times"])
    s = e["summary"]
    assert s["fastest_sampling_baseline"] == "predictive_entropy"  # sampling alone is the cheapest
    for m in ("predictive_entropy", "semantic_entropy", "p_true", "p_true_1pass"):
        r = s["speedup"][m]
        assert r["ci"][0] <= r["median"] <= r["ci"][1] and "with_generation" in r
    assert set(s["gradnorm_split"]) == {"forward", "backward", "post"}
    assert s["gradnorm_split"]["backward"]["median"] > 0
    t = tiny_results["targets"]["random:tiny"]
    assert isinstance(t["gradnorm_over_forward"]["met"], bool)
    assert [p["tokens"] for p in e["sweeps"]["answer"]] == [2, 4]
    assert tiny_results["ladder"][0]["params"] > 0
    assert e["profile"]["gradnorm"]["ops"]
    json.dumps(tiny_results, default=float)  # JSON-ready


def test_method_costs_are_sums_of_pass_medians() -> None:
    rec = {"times": {"sample": [1.0, 3.0], "cluster": [0.5], "gradnorm": [0.2, 0.4, 0.3], "p_true": [0.1],
                     "forward": [0.1]}}
    c = bench.method_costs(rec)
    assert c["predictive_entropy"] == 2.0 and c["semantic_entropy"] == 2.5 and c["p_true"] == 2.1
    assert c["gradnorm"] == pytest.approx(0.3)
    assert "naive" not in c


def test_c8_measurement_is_judged(tiny_results: dict) -> None:
    m = bench.c8_measurement(tiny_results)
    assert m.claim == "C8" and m.ci[0] <= m.value <= m.ci[1]
    assert claims.judge(m) in claims.VERDICTS
    assert "random:tiny" in m.details


def test_format_table_mentions_targets(tiny_results: dict) -> None:
    text = bench.format_table(tiny_results)
    assert "gradnorm_over_forward" in text and "speed-up vs semantic_entropy" in text


def test_text_questions_with_byte_tokenizer(tiny_config: bench.BenchConfig) -> None:
    sub = bench.load_subject("tiny-llama")
    assert not sub.synthetic and sub.style == "chat"
    q = bench.Question("q1", "t", "What is the capital of France?", sub.tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True, tokenize=False
    ).encode().__len__() * [0])
    from gnuq_core.lm.prompts import encode_prompt, format_prompt

    q.prompt_ids = encode_prompt(sub.tokenizer, format_prompt(sub.tokenizer, q.text, "chat"), "chat")
    bench.prepare_question(sub, q, tiny_config)
    assert len(q.answer_ids) >= 1 and len(q.sample_texts) == 3
    assert len(q.p_true_ids) > len(q.p_true_1pass_ids)  # the candidates are in the reference prompt
    passes = bench.make_passes(sub, q, tiny_config, bench._clusterer(tiny_config)[0])
    for name, fn in passes.items():
        fn(0)
    assert 0.0 < passes["p_true"](0) < 1.0


def test_naive_grad_sq_matches_engine_fast_path() -> None:
    from gnuq_core.lm.gradient import forward_backward

    sub = bench.load_subject("random:tiny", dtype="float64")
    p, a = [5, 6, 7, 8, 9], [10, 11, 12]
    fast = forward_backward(sub.model, p, a).grad_sq
    assert bench.naive_grad_sq(sub.model, p, a) == pytest.approx(fast, rel=1e-9)
    assert all(x.grad is None for x in sub.model.parameters())


def test_memory_profile_in_subprocess(tiny_config: bench.BenchConfig) -> None:
    import dataclasses

    cfg = dataclasses.replace(tiny_config, memory=True, memory_repeats=1)
    sub = bench.load_subject("random:tiny")
    q = bench.build_questions(sub, cfg)[0]
    bench.prepare_question(sub, q, cfg)
    mem = bench.memory_profile(sub, q, cfg)
    assert set(bench.MEMORY_PASSES) <= set(mem["peak_bytes"])
    assert all(v >= 0 for v in mem["peak_bytes"].values())
    assert np.isfinite(mem["gradnorm_over_gradient"]) and mem["exact_cpu_memory"] in (True, False)


def test_cli_tiny_dry_run(tmp_path) -> None:
    out = tmp_path / "r.json"
    args = ["--tiny", "--device", "cpu", "--models", "random:tiny", "--no-memory", "--no-profile",
            "--ladder", "--clusterer", "exact", "--quiet", "--out", str(out)]
    assert bench.main(args) == 0
    res = json.loads(out.read_text())
    assert res["config"]["repeats"] == 1 and "random:tiny" in res["models"]


def test_unknown_random_architecture() -> None:
    with pytest.raises(ValueError, match="unknown random architecture"):
        bench.load_subject("random:nope")
