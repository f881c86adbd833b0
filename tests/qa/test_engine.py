"""gnuq_core.qa.engine: one question end to end on a tiny model, and resumable runs into one
file (``gnuq qa``'s route: `gnuq_core.qa.study.run_dataset` through a `OneFile` store)."""

from __future__ import annotations


import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
import math
import re
from dataclasses import replace
from types import SimpleNamespace

import pytest

from gnuq_core.lm.clustering import exact_match_clusters
from gnuq_core.qa.data import QAItem
from gnuq_core.options import OptionError
from gnuq_core.qa.engine import QAConfig, clean, evaluate_question, question_seed
from gnuq_core.qa.scores import SCORES, score_record
from gnuq_core.qa.study import run_dataset
from gnuq_core.repro.records import ConfigMismatch, read_records
from gnuq_core.store.store import OneFile
from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_llama

CFG = QAConfig(model="tiny", max_new_tokens=3, n_samples=3, clusterer="exact")


def run_benchmark(lm, items, config, out, world=None) -> int:
    """``gnuq qa``'s route into ``out``: how many records it computed."""
    store = OneFile(out, label="the test file")
    run_dataset(lm, items, config, store=store, progress=False, verify=0, world=world, texts=True)
    return store.reads[-1].computed


def test_a_record_is_raw_and_every_score_is_computed_from_it():
    rec = evaluate_question(tiny_llama(), byte_tokenizer(), "Who wrote Hamlet?", CFG, style="chat",
                            clusterer=exact_match_clusters)
    assert "scores" not in rec  # only what the passes produce is kept
    assert {"answer", "generation", "log_p", "grad_sq", "group_sq", "p_true", "samples"} <= set(rec)
    assert rec["log_p"] == pytest.approx(math.fsum(rec["generation"]["token_log_probs"]), abs=1e-4)
    s = score_record(rec, missing="raise")
    assert set(s) == set(SCORES) and all(math.isfinite(v) for v in s.values())
    passes = {"generate", "gradient", "p_true", "sample", "cluster"}
    assert set(rec["timings"]) == passes | {"cpu"} and set(rec["timings"]["cpu"]) == passes
    assert len(rec["samples"]) == 3 and all("cluster" in x for x in rec["samples"])
    json.dumps(rec, allow_nan=False)
    rec = evaluate_question(tiny_gemma(), byte_tokenizer(False), "Q?", QAConfig(model="t", n_samples=0, p_true=False,
                            max_new_tokens=2), style="fewshot")
    assert "samples" not in rec and "p_true" not in rec
    assert math.isnan(score_record(rec)["p_true"]) and math.isfinite(score_record(rec)["epistemic"])


def test_clean():
    assert clean({"a": [float("inf"), 1.0], "b": float("nan")}) == {"a": [None, 1.0], "b": None}


def test_benchmark_is_resumable(tmp_path):
    lm = SimpleNamespace(model=tiny_llama(), tokenizer=byte_tokenizer(), prompt_style="chat")
    items = [QAItem(f"q{i}", f"Question {i}?", ("a",), ("b",), "fixture") for i in range(3)]
    out = tmp_path / "run.jsonl"
    assert run_benchmark(lm, items[:2], CFG, out) == 2
    assert run_benchmark(lm, items, CFG, out) == 1  # only the new one
    config, recs = read_records(out)
    assert [r["id"] for r in recs] == ["q0", "q1", "q2"] and config["model"] == "tiny"
    r = recs[0]
    assert r["correctness_inputs"] == {"correct_answers": ["a"], "incorrect_answers": ["b"]}
    assert r["question"] == "Question 0?" and "total" in r["timings"] and r["answer"] is not None
    with pytest.raises(ConfigMismatch):
        run_benchmark(lm, items, QAConfig(model="tiny", n_samples=2, clusterer="exact"), out)
    with pytest.raises(ValueError, match="the items come from fixture, not only from triviaqa"):
        run_benchmark(lm, items, QAConfig(model="tiny", dataset="triviaqa"), tmp_path / "x.jsonl")
    # the stored record is scored without the model; reclustering the samples changes semantic entropy only
    scores = score_record(r, missing="raise")
    one_cluster = {**r, "samples": [{**x, "cluster": 0} for x in r["samples"]]}
    assert score_record(one_cluster)["semantic_entropy"] == pytest.approx(0.0)
    assert score_record(one_cluster)["epistemic"] == scores["epistemic"]


def test_one_gradient_pass_gives_the_total_and_the_per_block_split():
    from gnuq_core.lm.gradient import forward_backward
    from gnuq_core.lm.prompts import encode_prompt, format_prompt

    model, tok = tiny_llama(), byte_tokenizer()
    rec = evaluate_question(model, tok, "Who wrote Hamlet?", CFG, style="chat", clusterer=exact_match_clusters)
    assert list(rec["group_sq"]) == ["embeddings", "block 00", "block 01", "other"]
    assert math.fsum(rec["group_sq"].values()) == pytest.approx(rec["grad_sq"], rel=1e-12)
    ids = encode_prompt(tok, format_prompt(tok, "Who wrote Hamlet?", "chat"), "chat")
    plain = forward_backward(model, ids, rec["generation"]["answer_ids"])  # every parameter, no groups
    assert rec["grad_sq"] == pytest.approx(plain.grad_sq, rel=1e-12)
    assert math.log10(rec["grad_sq"]) == pytest.approx(score_record(rec)["grad_log_p"], abs=1e-12)
    one = evaluate_question(model, tok, "Who wrote Hamlet?", QAConfig(model="t", groups="last_block", n_samples=0,
                            p_true=False, max_new_tokens=3), style="chat")
    assert list(one["group_sq"]) == ["last_block"] and one["group_sq"]["last_block"] == one["grad_sq"]


def test_samples_are_seeded_by_question_not_by_run_order_or_process(tmp_path):
    from gnuq_core.qa.engine import question_seed
    from gnuq_core.repro.keys import without as _without
    from gnuq_core.repro.shards import World, shard_paths

    assert question_seed(0, "q1") == question_seed(0, "q1") != question_seed(0, "q2") != question_seed(1, "q1")
    lm = SimpleNamespace(model=tiny_llama(), tokenizer=byte_tokenizer(), prompt_style="chat")
    items = [QAItem(f"q{i}", f"Question {i}?", ("a",), ("b",), "fixture") for i in range(5)]
    run_benchmark(lm, items, CFG, tmp_path / "one.jsonl")
    run_benchmark(lm, items[::-1], CFG, tmp_path / "reversed.jsonl")
    # two ranks, one after the other (no process group: the barriers are no-ops): rank 1 leaves
    # its shard, rank 0 writes its own and merges both in the order of the items
    out = tmp_path / "sharded.jsonl"
    assert run_benchmark(lm, items, CFG, out, world=World(1, 2)) == 2
    assert [p.name for p in shard_paths(out)] == ["sharded.rank1of2.jsonl"] and not out.exists()
    assert run_benchmark(lm, items, CFG, out, world=World(0, 2)) == 3
    assert shard_paths(out) == []

    def numbers(path):  # without wall times
        return {r["id"]: _without(r, ("timings", "seconds")) for r in read_records(path)[1]}

    one = numbers(tmp_path / "one.jsonl")
    assert list(numbers(out)) == list(one) == [it.id for it in items]
    assert numbers(out) == one == numbers(tmp_path / "reversed.jsonl")  # same bits, whoever computed them
    assert len({json.dumps(r["samples"]) for r in one.values()}) == 5


@pytest.mark.parametrize("field,value,says", [
    ("model", "", "QAConfig.model is empty"),
    ("model", None, "QAConfig.model must be a string"),
    ("dtype", "int8", "QAConfig.dtype: unknown dtype 'int8'"),
    ("style", "poem", "QAConfig.style must be one of"),
    ("groups", "last_block,lm_head", "QAConfig.groups must be one of"),
    ("clusterer", "nli", "QAConfig.clusterer must be one of"),
    ("max_new_tokens", 0, "QAConfig.max_new_tokens must be ≥ 1"),
    ("max_new_tokens", 2.5, "QAConfig.max_new_tokens must be a whole number"),
    ("n_samples", 10**9, "QAConfig.n_samples must be ≤ 1024"),
    ("temperature", float("inf"), "QAConfig.temperature must be a finite number"),
    ("temperature", 1e-45, "QAConfig.temperature must be ≥"),
    ("threshold", 1.5, "QAConfig.threshold must be ≤ 1"),
    ("seed", -1, "QAConfig.seed must be a whole number in [0, 2⁶³)"),
    ("seed", 2**63, "QAConfig.seed must be a whole number in [0, 2⁶³)"),
    ("seed", True, "QAConfig.seed must be a whole number"),
    ("p_true", "yes", "QAConfig.p_true must be True or False"),
])
def test_a_config_no_run_can_use_is_refused_in_one_line(field: str, value: object, says: str) -> None:
    with pytest.raises(OptionError, match=re.escape(says)) as err:
        QAConfig(**{"model": "tiny", field: value})
    assert "\n" not in str(err.value)


def test_a_question_seed_is_a_valid_config_seed() -> None:
    config = QAConfig(model="tiny", seed=2**32 + 5)
    assert replace(config, seed=question_seed(config.seed, "tc_1")).seed >= 0
