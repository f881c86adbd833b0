"""gnuq_core.qa.multiple_choice: loading mc_task.json and MC1/MC2 by likelihood on a tiny model."""

from __future__ import annotations

import json
import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from gnuq_core.qa import multiple_choice as truthfulqa_mc
from gnuq_core.qa.multiple_choice import MCItem, load_mc, mc_scores

from tests.tiny_models import byte_tokenizer, tiny_llama


def _write(tmp_path, items):
    (tmp_path / "truthfulqa").mkdir()
    (tmp_path / "truthfulqa" / "TruthfulQA.csv").write_text("unused\n")
    (tmp_path / "truthfulqa" / "mc_task.json").write_text(json.dumps(items))
    return tmp_path


def test_load_mc_fixture(tmp_path):
    d = _write(tmp_path, [{"question": " Q? ", "mc1_targets": {"a": 1, "b": 0}, "mc2_targets": {"a": 1, "c": 1}}])
    items = load_mc(d)
    assert items == [MCItem("Q?", {"a": 1, "b": 0}, {"a": 1, "c": 1}, "mc_0")]


def test_load_mc_rejects_two_true_mc1(tmp_path):
    d = _write(tmp_path, [{"question": "Q?", "mc1_targets": {"a": 1, "b": 1}, "mc2_targets": {"a": 1}}])
    with pytest.raises(ValueError, match="item 0"):
        load_mc(d)


def test_mc_scores_follow_the_likelihoods(monkeypatch):
    table = {"right": -1.0, "wrong": -3.0, "also right": -2.0}
    monkeypatch.setattr(truthfulqa_mc, "score_choices",
                        lambda m, t, q, choices, style: [table[c] for c in choices])
    item = MCItem("Q?", {"right": 1, "wrong": 0}, {"right": 1, "also right": 1, "wrong": 0})
    s = mc_scores(None, None, item, style="chat")
    assert s["mc1"] == 1.0
    e = [math.exp(-1), math.exp(-2), math.exp(-3)]
    assert s["mc2"] == pytest.approx((e[0] + e[1]) / sum(e))


def test_mc_scores_on_a_tiny_model():
    s = mc_scores(tiny_llama(), byte_tokenizer(), MCItem("Q?", {"yes": 1, "no": 0}, {"yes": 1, "no": 0}),
                  style="chat")
    assert s["mc1"] in (0.0, 1.0) and 0.0 < s["mc2"] < 1.0


def test_stored_mc_scores_are_computed_once_and_checked(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from gnuq_core.store import ResultsDisagree, Store

    store = Store(tmp_path, label="the test store")
    loaded = SimpleNamespace(model=tiny_llama(), tokenizer=byte_tokenizer(), prompt_style="chat")
    items = [MCItem("Q?", {"yes": 1, "no": 0}, {"yes": 1, "no": 0}, "mc_0"),
             MCItem("R?", {"a": 0, "b": 1}, {"a": 0, "b": 1}, "mc_1")]
    first = truthfulqa_mc.stored_mc_scores(loaded, "tiny", items, verify=0, store=store)
    assert [r["id"] for r in first] == ["mc_0", "mc_1"]
    assert first[0]["mc2"] == pytest.approx(mc_scores(loaded.model, loaded.tokenizer, items[0], style="chat")["mc2"],
                                            rel=1e-6)
    calls = []
    monkeypatch.setattr(truthfulqa_mc, "mc_scores", lambda *a, **k: calls.append(1) or {"mc1": 0.0, "mc2": 0.5})
    again = truthfulqa_mc.stored_mc_scores(loaded, "tiny", items, verify=0, store=store)
    assert again == first and not calls  # read back, nothing recomputed
    with pytest.raises(ResultsDisagree):  # the sample check recomputes and compares
        truthfulqa_mc.stored_mc_scores(loaded, "tiny", items, verify=1, store=store)
    with pytest.raises(ValueError, match="need their ids"):
        truthfulqa_mc.stored_mc_scores(loaded, "tiny", [MCItem("Q?", {"a": 1}, {"a": 1})], store=store)
