"""The timed passes (gnuq_core.bench.passes) are the engine's own functions; structure, not speed."""

from __future__ import annotations

import pytest

from gnuq_core.bench.config import FLOOR_SPLIT, BenchConfig
from gnuq_core.bench.passes import REQUIRED, clusterer_for, make_passes, time_questions
from gnuq_core.bench.questions import Question, build_questions, prepare_question
from gnuq_core.bench.subjects import load_subject

ENGINE = ("gnuq_core.lm.", "gnuq_core.qa.")


@pytest.fixture(scope="module")
def config() -> BenchConfig:
    return BenchConfig(models=["tiny-llama"], datasets=["a"], n_questions=1, repeats=2, n_samples=3,
                       max_new_tokens=4, clusterer="exact", synthetic_prompt=(10, 14), synthetic_answer=3, threads=1,
                       nli_architecture="tiny", p_true_shots=2, floor_rounds=2)


@pytest.fixture(scope="module")
def text_question(config: BenchConfig) -> tuple:
    from gnuq_core.lm.prompts import encode_prompt, format_prompt

    sub = load_subject("tiny-llama")
    text = "What is the capital of France?"
    q = Question("q1", "t", text, encode_prompt(sub.tokenizer, format_prompt(sub.tokenizer, text, "chat"), "chat"))
    return sub, prepare_question(sub, q, config)


def test_every_pass_is_an_engine_function(text_question: tuple, config: BenchConfig) -> None:
    sub, q = text_question
    passes = make_passes(sub, q, config, clusterer_for("exact")[0])
    assert set(REQUIRED) <= set(passes)
    for name, p in passes.items():
        assert p.module.startswith(ENGINE), f"{name} times {p.function}, not an engine function"
        assert not p.module.startswith("gnuq_core.bench")
    assert passes["gradient"].function == "gnuq_core.lm.gradient.forward_backward"
    assert passes["forward"].function == "gnuq_core.lm.gradient.answer_log_probs"
    assert passes["reference"].function == "gnuq_core.lm.gradient.reference_pass"
    assert passes["p_true"].function == "gnuq_core.lm.baselines.p_true"


def test_passes_run_and_return_what_the_engine_returns(text_question: tuple, config: BenchConfig) -> None:
    sub, q = text_question
    passes = make_passes(sub, q, config, clusterer_for("exact")[0])
    out = {name: p(0) for name, p in passes.items()}
    assert 0.0 < out["p_true"]["p_true"] < 1.0 and 0.0 < out["p_true_reference"]["p_true"] < 1.0
    assert len(out["sample"]) == config.n_samples and len(out["cluster"]) == config.n_samples
    assert out["gradient"].grad_sq > 0 and len(out["forward"]) == len(q.answer_ids)
    assert out["generate"].answer_ids == q.answer_ids
    assert "Brainstormed answers" in q.p_true_question and q.text in q.p_true_question
    assert out["reference"].grad_sq == pytest.approx(out["gradient"].grad_sq, rel=1e-3)


def test_repeats_draw_fresh_samples(text_question: tuple, config: BenchConfig) -> None:
    sub, q = text_question
    p = make_passes(sub, q, config, None, include=("sample",))["sample"]
    assert p.kwargs["seed"] == config.seed
    draws = [[s.answer_ids for s in p(r)] for r in range(3)]
    assert draws[0] == [s.answer_ids for s in p(0)]  # seeded
    assert draws[0] != draws[1] or draws[1] != draws[2]


def test_synthetic_model_times_p_true_as_a_forward_of_its_length(config: BenchConfig) -> None:
    sub = load_subject("random:tiny")
    q = prepare_question(sub, build_questions(sub, config)[0], config)
    passes = make_passes(sub, q, config, None)
    assert passes["p_true"].function == "gnuq_core.lm.gradient.answer_log_probs"
    assert len(passes["p_true_reference"].args[1]) > len(passes["p_true"].args[1])
    assert all(p.module.startswith(ENGINE) for p in passes.values())


def test_time_questions_interleaves_every_pass(config: BenchConfig) -> None:
    sub = load_subject("random:tiny")
    qs = build_questions(sub, config)
    recs = time_questions(sub, qs, config, clusterer_for("exact")[0], progress=False)
    assert len(recs) == 1
    r = recs[0]
    assert all(len(v) == config.repeats for v in r["times"].values())
    assert set(r["times"]) == set(r["functions"]) and set(REQUIRED) <= set(r["times"])
    assert len(r["gradient_split"]["backward"]) == config.repeats
    # the floor split's extra rounds: its four passes only, each round timed once per pass
    assert set(r["floor_times"]) == set(FLOOR_SPLIT) == set(r["floor_cpu_times"])
    assert all(len(v) == config.floor_rounds and min(v) > 0 for v in r["floor_times"].values())


def test_no_floor_rounds_where_they_are_off(config: BenchConfig) -> None:
    from dataclasses import replace

    sub, cfg = load_subject("random:tiny"), replace(config, floor_rounds=0)
    (r,) = time_questions(sub, build_questions(sub, cfg), cfg, clusterer_for("exact")[0], progress=False)
    assert "floor_times" not in r and len(r["times"]["gradient"]) == cfg.repeats


def test_unknown_random_architecture() -> None:
    with pytest.raises(ValueError, match="unknown random architecture"):
        load_subject("random:nope")


def test_reference_passes_run_the_reference_loops(text_question: tuple, config: BenchConfig) -> None:
    """One answer at a time (N calls, fresh seeds), one entailment comparison (two forwards of
    the cross-encoder), few-shot P(True) over the worked examples: engine functions all."""
    sub, q = text_question
    passes = make_passes(sub, q, config, clusterer_for("exact")[0])
    seq = passes["sample_sequential"]
    assert seq.function == "gnuq_core.lm.decoding.sample_answers" and seq.calls == config.n_samples
    samples = seq(0)
    assert len(samples) == config.n_samples
    assert passes["nli_check"].function == "gnuq_core.lm.entailment.EntailmentClusterer.check"
    assert isinstance(passes["nli_check"](0), bool) and len(q.nli_pair) == 2 and q.text in q.nli_pair[0]
    assert passes["p_true_fewshot"].function == "gnuq_core.lm.baselines.p_true"
    assert 0.0 < passes["p_true_fewshot"](0)["p_true"] < 1.0
    assert q.p_true_fewshot_question.endswith(q.answer.strip() or "(empty)")
    assert 1 <= q.nli_comparisons <= config.n_samples * (config.n_samples - 1) // 2


def test_fewshot_prefix_has_the_reference_format() -> None:
    from gnuq_core.bench.questions import fewshot_prefix
    from gnuq_core.qa.data import QAItem

    items = [QAItem(f"q{i}", f"Question {i}?", (f"right {i}",), (f"wrong {i}",), "t") for i in range(6)]
    text = fewshot_prefix(items, 4, 3, 0, {"q0"})
    assert text.count("Possible answer:") == 4 and "Question 0?" not in text
    assert text.count("The possible answer is: A") == 2 and text.count("The possible answer is: B") == 2
    assert "Brainstormed Answers: " in text and "A) True\nB) False" in text


def test_a_once_pass_is_timed_in_the_first_repeat_and_nli_clustering_is_derived(config: BenchConfig) -> None:
    from gnuq_core.bench.questions import Question

    sub = load_subject("tiny-llama")
    from gnuq_core.lm.prompts import encode_prompt, format_prompt

    text = "Who wrote Hamlet?"
    q = Question("q2", "t", text, encode_prompt(sub.tokenizer, format_prompt(sub.tokenizer, text, "chat"), "chat"),
                 fewshot_prefix="Question: x?\nBrainstormed Answers: y\nPossible answer: y")
    rec = time_questions(sub, [q], config, clusterer_for("exact")[0], progress=False)[0]
    assert rec["timed_once"] == ["sample_sequential", "nli_check", "p_true_fewshot"]
    for name in rec["timed_once"]:
        assert len(set(rec["times"][name])) == 1 and len(rec["times"][name]) == config.repeats
    assert len(set(rec["times"]["sample"])) == config.repeats  # the others: every repeat
    k = rec["nli_comparisons"]
    assert rec["times"]["nli_cluster"] == pytest.approx([t * k for t in rec["times"]["nli_check"]])
    assert rec["derived"]["nli_cluster"] == f"nli_check × {k} (nli_comparisons)"
    assert rec["functions"]["nli_cluster"] == rec["functions"]["nli_check"] and rec["p_true_fewshot_tokens"] > 0
    from dataclasses import replace

    once = replace(config, timed_once=["sample"])  # the paper edition's choice for the batched sampling
    rec = time_questions(sub, [q], once, clusterer_for("exact")[0], progress=False)[0]
    assert rec["timed_once"] == ["sample"] and len(set(rec["times"]["sample"])) == 1
    assert len(set(rec["times"]["gradient"])) == config.repeats and len(set(rec["times"]["sample_sequential"])) > 1


@pytest.mark.parametrize("once,says", [(["gradient"], "timed in every round"), (["nope"], "no such timed pass")])
def test_the_estimator_is_timed_in_every_round(config: BenchConfig, once: list[str], says: str) -> None:
    from dataclasses import replace

    with pytest.raises(ValueError, match=says):
        replace(config, timed_once=once)


def test_reference_questions_limit_the_entailment_and_few_shot_passes(config: BenchConfig) -> None:
    from dataclasses import replace

    from gnuq_core.lm.prompts import encode_prompt, format_prompt

    sub = load_subject("tiny-llama")
    qs = [Question(f"q{i}", "t", t, encode_prompt(sub.tokenizer, format_prompt(sub.tokenizer, t, "chat"), "chat"))
          for i, t in enumerate(["Who wrote Hamlet?", "What is 2+2?"])]
    recs = time_questions(sub, qs, replace(config, repeats=1, reference_questions=1), clusterer_for("exact")[0],
                          progress=False)
    assert "p_true_fewshot" in recs[0]["times"] and "nli_check" in recs[0]["times"]
    assert "p_true_fewshot" not in recs[1]["times"] and "nli_cluster" not in recs[1]["times"]
    assert "sample_sequential" in recs[1]["times"]  # on every question


def test_sequential_sampling_timed_on_fewer_calls_is_scaled_to_all_of_them(
        text_question: tuple, config: BenchConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    import gnuq_core.bench.passes as passes_module

    sub, q = text_question
    fewer = replace(config, n_samples=4, sequential_timed=2, repeats=1)
    seq = make_passes(sub, q, fewer)["sample_sequential"]
    assert (seq.calls, seq.runs, seq.scale) == (4, 2, 2.0) and len(seq(0)) == 2
    assert make_passes(sub, q, replace(fewer, sequential_timed=9))["sample_sequential"].scale == 1.0  # ≥ N: all

    calls: list[int] = []
    counted = replace(seq, func=lambda *a, **k: calls.append(1) or seq.func(*a, **k))

    def one_second_per_call(run, device):  # clock.timed_cpu, with a clock that counts calls
        before = len(calls)
        out = run()
        return out, float(len(calls) - before), float(len(calls) - before)

    monkeypatch.setattr(passes_module.clock, "timed_cpu", one_second_per_call)
    monkeypatch.setattr(passes_module, "make_passes", lambda *a, **k: {"sample_sequential": counted})
    rec = time_questions(sub, [q], fewer, None, progress=False)[0]
    assert len(calls) == 2, "one timed run of 2 calls (a cold pass: no warm-up run)"
    assert rec["times"]["sample_sequential"] == [4.0] and rec["cpu_times"]["sample_sequential"] == [4.0]
    assert rec["scaled"] == {"sample_sequential": "2 of 4 calls timed, × 2"}


def test_sequential_timed_cannot_be_negative(config: BenchConfig) -> None:
    from dataclasses import replace

    with pytest.raises(ValueError, match="sequential_timed=-1"):
        replace(config, sequential_timed=-1)
