"""The answer-length factor of the speed-up (gnuq_core.bench.scaling) on tiny random models:
exact answer lengths with the real sampler, the model left as it was, the factor's pieces."""

from __future__ import annotations

import numpy as np
import pytest

from gnuq_core.bench.config import BenchConfig
from gnuq_core.bench.scaling import answer_length_factor, never_stopping, random_ids
from gnuq_core.bench.subjects import load_subject
from gnuq_core.lm.decoding import sample_answers, stop_token_ids


@pytest.fixture(scope="module")
def subject():
    return load_subject("tiny-llama")


def test_never_stopping_decodes_to_the_cap_and_restores_the_model(subject) -> None:
    model, tok = subject.model, subject.tokenizer
    before = (model.generation_config.eos_token_id, model.config.eos_token_id)
    assert stop_token_ids(model, tok), "the fixture model must have a stop token for this test to mean anything"
    with never_stopping(model, tok) as no_stop:
        assert stop_token_ids(model, no_stop) == set()
        samples = sample_answers(model, no_stop, [5, 6, 7, 8], 4, max_new_tokens=9, seed=1)
        assert no_stop.decode([5, 6]) == tok.decode([5, 6])  # everything else is the tokenizer's
    assert [len(s.answer_ids) for s in samples] == [9] * 4
    assert (model.generation_config.eos_token_id, model.config.eos_token_id) == before
    with pytest.raises(RuntimeError), never_stopping(model, tok):  # restored on errors too
        raise RuntimeError
    assert (model.generation_config.eos_token_id, model.config.eos_token_id) == before


def test_answer_length_factor_pairs_sampling_with_the_gradient_per_prompt(subject) -> None:
    cfg = BenchConfig(n_samples=3, long_answer_tokens=10, seed=0)
    rng = np.random.default_rng(0)
    prompts = [random_ids(12, subject.vocab, rng) for _ in range(3)]
    f = answer_length_factor(subject, cfg, prompts, short=3, progress=False)
    assert (f["short"], f["long"], f["n"], f["questions"]) == (3, 10, 3, 3)
    s = f["seconds"]
    assert set(s) == {"sample_3", "sample_10", "gradient_3", "gradient_10"} and all(len(v) == 3 for v in s.values())
    expected = [(s["sample_10"][i] / s["gradient_10"][i]) / (s["sample_3"][i] / s["gradient_3"][i]) for i in range(3)]
    assert f["values"] == pytest.approx(expected)
    assert f["ci"][0] <= f["median"] <= f["ci"][1]


def test_answer_length_factor_refuses_long_answers_no_longer_than_short_ones(subject) -> None:
    with pytest.raises(ValueError, match="must be longer than the short ones"):
        answer_length_factor(subject, BenchConfig(long_answer_tokens=4), [[5, 6, 7]], short=4, progress=False)


def test_bench_config_bounds_the_long_answer() -> None:
    with pytest.raises(ValueError, match="long_answer_tokens=-1"):
        BenchConfig(long_answer_tokens=-1)
    assert BenchConfig(long_answer_tokens=0).long_answer_tokens == 0  # 0: skip
