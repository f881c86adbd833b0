"""gnuq_core.qa.engine: one question end to end on a tiny model, and resumable benchmark runs."""

from __future__ import annotations


import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
from types import SimpleNamespace

import pytest

from gnuq_core.lm.clustering import exact_match_clusters
from gnuq_core.qa.data import QAItem
from gnuq_core.qa.engine import QAConfig, clean, evaluate_question, rescore, run_benchmark
from gnuq_core.repro.records import ConfigMismatch, read_records
from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_llama

CFG = QAConfig(model="tiny", max_new_tokens=3, n_samples=3, clusterer="exact")


def test_evaluate_question_has_every_score_and_timing():
    rec = evaluate_question(tiny_llama(), byte_tokenizer(), "Who wrote Hamlet?", CFG, style="chat",
                            clusterer=exact_match_clusters)
    s = rec["scores"]
    for key in ["log10_epistemic", "epistemic", "aleatoric", "combined", "max_sequence_probability",
                "mean_token_entropy", "perplexity", "p_true", "predictive_entropy", "ln_predictive_entropy",
                "semantic_entropy", "discrete_semantic_entropy"]:
        assert key in s, key
    passes = {"generate", "gradient", "p_true", "sample", "cluster"}
    assert set(rec["timings"]) == passes | {"cpu"} and set(rec["timings"]["cpu"]) == passes
    assert len(rec["samples"]) == 3 and all("cluster" in x for x in rec["samples"])
    json.dumps(rec, allow_nan=False)
    rec = evaluate_question(tiny_gemma(), byte_tokenizer(False), "Q?", QAConfig(model="t", n_samples=0, p_true=False,
                            max_new_tokens=2), style="fewshot")
    assert "samples" not in rec and "p_true" not in rec["scores"]


def test_clean():
    assert clean({"a": [float("inf"), 1.0], "b": float("nan")}) == {"a": [None, 1.0], "b": None}


def test_benchmark_is_resumable(tmp_path):
    lm = SimpleNamespace(model=tiny_llama(), tokenizer=byte_tokenizer(), prompt_style="chat")
    items = [QAItem(f"q{i}", f"Question {i}?", ("a",), ("b",), "fixture") for i in range(3)]
    out = tmp_path / "run.jsonl"
    assert run_benchmark(lm, items[:2], CFG, out, progress=False) == 2
    assert run_benchmark(lm, items, CFG, out, progress=False) == 1  # only the new one
    config, recs = read_records(out)
    assert [r["id"] for r in recs] == ["q0", "q1", "q2"] and config["model"] == "tiny"
    r = recs[0]
    assert r["correctness_inputs"] == {"correct_answers": ["a"], "incorrect_answers": ["b"]}
    assert r["question"] == "Question 0?" and "total" in r["timings"] and r["answer"] is not None
    with pytest.raises(ConfigMismatch):
        run_benchmark(lm, items, QAConfig(model="tiny", n_samples=2, clusterer="exact"), out, progress=False)
    with pytest.raises(ValueError, match="items come from fixture"):
        run_benchmark(lm, items, QAConfig(model="tiny", dataset="triviaqa"), tmp_path / "x.jsonl", progress=False)
    # cached generations are re-scored without the model
    again = rescore(r)
    for k, v in again.items():
        assert v == pytest.approx(r["scores"][k]), k
    assert rescore(r, clusterer=lambda answers: [0] * len(answers))["semantic_entropy"] == pytest.approx(0.0)
