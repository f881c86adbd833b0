"""gnuq_core.qa.study: score tables from records, layer groups, cached runs on a tiny model."""

from __future__ import annotations

import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
import torch

from gnuq_core.qa import scores
from gnuq_core.qa import study as qa_study
from gnuq_core.qa.data import QAItem
from gnuq_core.store import ResultsDisagree, Store

from tests.store.conftest import another_platform
from tests.tiny_models import byte_tokenizer, tiny_llama


ITEMS: dict[str, QAItem] = {}  # the questions behind the records made by _record


def _record(rid, dataset, answer, log_p, grad_sq, n_tokens, correct, incorrect=()):
    ITEMS[rid] = QAItem(rid, "q?", tuple(correct), tuple(incorrect), dataset)
    return {"id": rid, "dataset": dataset, "answer": answer,
            "generation": {"answer_ids": list(range(n_tokens)), "token_log_probs": [log_p / n_tokens] * n_tokens,
                           "stop_reason": "eos", "prompt_ids": [1]},
            "log_p": log_p, "grad_sq": grad_sq, "p_true": 0.7}


def test_score_table_labels_and_decomposition():
    recs = [_record("a", "triviaqa", "It is Paris.", -1.0, 1e4, 4, ["Paris"]),
            _record("b", "triviaqa", "Lyon", -3.0, 1e6, 1, ["Paris"])]
    t = qa_study.score_table(recs, ITEMS, group_norms={"a": {"embeddings": 6e3, "block 00": 3e3, "block 01": 1e3}})
    assert list(t["correct"]) == [True, False] and list(t["incorrect"]) == [0, 1]
    assert list(t["correct_em"]) == [False, False]
    a = t.iloc[0]
    # ||grad p||^2 = p^2 ||grad log p||^2, in log10
    assert a["epistemic"] == pytest.approx(2 * -1.0 / math.log(10) + 4)
    assert a["grad_log_p"] == pytest.approx(4)
    assert a["grad_log_p_norm"] == pytest.approx(4 - 2 * math.log10(4))
    assert a["grad_log_p_per_token"] == pytest.approx(4 - math.log10(4))
    p = math.exp(-1.0)
    assert 10 ** a["combined"] == pytest.approx(10 ** a["epistemic"] + p * (1 - p))
    pn = math.exp(-1.0 / 4)
    assert a["aleatoric_norm"] == pytest.approx(pn * (1 - pn))
    assert 10 ** a["epistemic_norm"] == pytest.approx(pn**2 * 1e4 / 16)
    assert a["p_true"] == pytest.approx(0.3) and a["max_seq_prob"] == pytest.approx(1.0)
    assert a["epistemic_last_block"] == pytest.approx(2 * -1.0 / math.log(10) + 3)
    assert a["epistemic_no_embeddings"] == pytest.approx(2 * -1.0 / math.log(10) + math.log10(4e3))
    assert math.isnan(t.iloc[1]["epistemic_last_block"])


def test_score_table_truthfulqa_and_categories():
    recs = [_record("tfqa_0", "truthfulqa", "Nothing happens", -2.0, 1e3, 2, ["Nothing happens"], ["You die"])]
    items = {"tfqa_0": QAItem("tfqa_0", "q?", ("Nothing happens",), ("You die",), "truthfulqa",
                              {"category": "Misconceptions"})}
    t = qa_study.score_table(recs, items=items, embed=lambda xs: np.eye(len(xs))[:, :len(xs)] + 1e-3)
    assert bool(t.iloc[0]["correct"]) and t.iloc[0]["category_group"] == "Misconceptions & myths"
    assert "correct_embed" in t


def test_score_table_without_a_pass_is_nan_there():
    rec = _record("c", "triviaqa", "Paris", -1.0, 1e4, 1, ["Paris"])  # no samples, no per-group split
    t = qa_study.score_table([rec], ITEMS)
    assert math.isnan(t.iloc[0]["semantic_entropy"]) and math.isnan(t.iloc[0]["epistemic_last_block"])
    assert t.iloc[0]["epistemic"] == pytest.approx(2 * -1.0 / math.log(10) + 4)


def test_group_scores_are_the_variant_formula():
    recs = [_record("g1", "triviaqa", "Paris", -1.0, 1e4, 2, ["Paris"]),
            _record("g2", "triviaqa", "Lyon", -2.0, 1e5, 1, ["Paris"])]
    norms = {"g2": {"embeddings": 6e4, "block 00": 4e4}, "g1": {"embeddings": 8e3, "block 00": 2e3}}
    t = qa_study.score_table(recs, ITEMS, group_norms=norms)
    g, epi, wrong = qa_study.group_scores(t, norms)
    assert list(g["embeddings"]) == [6e4, 8e3] and list(wrong) == [1, 0]  # the order of group_norms
    assert epi.loc[0, "block 00"] == pytest.approx(2 * -2.0 / math.log(10) + math.log10(4e4))
    # the last block alone is the variant score of the table
    assert epi.loc[1, "block 00"] == pytest.approx(t.set_index("id").loc["g1", "epistemic_last_block"])


def test_category_groups_cover_truthfulqa():
    assert qa_study.category_group("Law") == "Law, money & society"
    assert qa_study.category_group("Indexical Error: Time") == "Trick questions"
    assert qa_study.category_group("Unknown") == "Other"
    cats = [c for cs in qa_study.CATEGORY_GROUPS.values() for c in cs]
    assert len(cats) == len(set(cats)) == 38


def test_select_items_is_fixed_and_a_prefix_of_all():
    items = list(range(100))
    a = qa_study.select_items(items, 10, 0)
    every = qa_study.select_items(items, None, 0)
    assert a == qa_study.select_items(items, 10, 0) and len(a) == 10 and a != sorted(a)
    assert sorted(every) == items and every[:10] == a and every[:37] == qa_study.select_items(items, 37, 0)


def test_run_dataset_is_cached_and_records_carry_group_norms(tmp_path, monkeypatch):
    from gnuq_core.lm.models import LoadedModel
    from gnuq_core.qa.engine import QAConfig

    from gnuq_core.store import open_store

    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path))
    lm = LoadedModel(tiny_llama(), byte_tokenizer(), "tiny", "memory", "chat")
    items = [QAItem("tqa_1", "Capital of France?", ("Paris",), (), "triviaqa"),
             QAItem("tqa_2", "Two plus two?", ("four", "4"), (), "triviaqa")]
    cfg = QAConfig(model="tiny", max_new_tokens=3, n_samples=2, clusterer="exact")
    recs = qa_study.run_dataset(lm, items, cfg, progress=False, store=open_store("quick"))
    assert [r["id"] for r in recs] == ["tqa_1", "tqa_2"] and list((tmp_path / "store" / "qa").glob("*.jsonl"))
    again = qa_study.run_dataset(lm, items, cfg, progress=False, store=open_store("quick"))
    assert again == recs
    g = qa_study.group_norms_of(recs)  # the records' own split: no second gradient pass
    for r in recs:
        assert list(g[r["id"]]) == ["embeddings", "block 00", "block 01", "other"]
        total = math.fsum(g[r["id"]].values())
        assert total == pytest.approx(r["grad_sq"], rel=1e-6)  # stored values keep 7 significant digits
        assert math.log10(total) == pytest.approx(scores.get("grad_log_p")(r), abs=1e-6)
    with pytest.raises(KeyError, match="tqa_1.*no per-group norms"):
        qa_study.group_norms_of([{k: v for k, v in recs[0].items() if k != "group_sq"}])
    t = qa_study.score_table(recs, {it.id: it for it in items}, group_norms=g)
    assert t["epistemic_last_block"].notna().all()


def test_score_table_needs_the_questions():
    rec = _record("zz", "triviaqa", "Paris", -1.0, 1e4, 1, ["Paris"])
    with pytest.raises(KeyError, match="no question in `items`.*'zz'"):
        qa_study.score_table([rec], {})


def test_store_records_carry_no_texts_and_are_verified(tmp_path, monkeypatch):
    import json

    from gnuq_core.lm.models import LoadedModel
    from gnuq_core.qa.engine import QAConfig

    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    lm = LoadedModel(tiny_llama(), byte_tokenizer(), "tiny", "memory", "chat")
    items = [QAItem("tqa_1", "Capital of France?", ("Paris",), (), "triviaqa"),
             QAItem("tqa_2", "Two plus two?", ("four", "4"), (), "triviaqa")]
    cfg = QAConfig(model="tiny", max_new_tokens=3, n_samples=2, clusterer="exact")
    store = Store(tmp_path / "store", label="the test store")
    recs = qa_study.run_dataset(lm, items, cfg, progress=False, store=store)
    (path,) = store.root.glob("qa/*.jsonl")
    text = path.read_text()
    assert "Capital of France" not in text and "Paris" not in text and "correctness_inputs" not in text
    assert "prompt_ids" not in text  # token ids would spell out the question
    direct = qa_study.run_dataset(lm, items, cfg, progress=False, store=Store(tmp_path / "other", label="another"))
    assert [r["generation"]["prompt_ids"] for r in recs] == [r["generation"]["prompt_ids"] for r in direct]
    # The next build reuses the stored records after recomputing both of them identically.
    again = qa_study.run_dataset(lm, items, cfg, progress=False, store=store, verify=2)
    assert again == recs
    g = qa_study.group_norms_of(again)  # stored records keep their per-group split
    assert set(g) == {"tqa_1", "tqa_2"} and g == qa_study.group_norms_of(recs)
    assert not (store.root / "qa_groups").exists()
    t = qa_study.score_table(recs, {it.id: it for it in items}, group_norms=g)
    assert t["question"].tolist() == ["Capital of France?", "Two plus two?"]
    assert json.loads(text.splitlines()[0])["type"] == "header"


def test_on_another_platform_a_record_is_checked_from_its_stored_answers(tmp_path, monkeypatch):
    """Sampled tokens may change on another CPU; the numbers computed from the stored answers may not."""
    import json

    from gnuq_core.lm.models import LoadedModel
    from gnuq_core.qa import engine
    from gnuq_core.qa.engine import QAConfig

    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    lm = LoadedModel(tiny_llama(dtype=torch.float32), byte_tokenizer(), "tiny", "memory", "chat")
    items = [QAItem("tqa_1", "Capital of France?", ("Paris",), (), "triviaqa"),
             QAItem("tqa_2", "Two plus two?", ("four", "4"), (), "triviaqa")]
    cfg = QAConfig(model="tiny", max_new_tokens=4, n_samples=3, clusterer="exact")
    store = Store(tmp_path / "store", label="the test store")
    qa_study.run_dataset(lm, items, cfg, progress=False, store=store)
    elsewhere = Store(store.root, label=store.label)
    elsewhere._fingerprint = another_platform(store.fingerprint)
    generated: list[str] = []
    original = engine.question_record
    monkeypatch.setattr(engine, "question_record", lambda *a, **k: generated.append(1) or original(*a, **k))
    qa_study.run_dataset(lm, items, cfg, progress=False, store=elsewhere, verify=2)
    assert not generated  # nothing was generated or sampled again
    checks = elsewhere.checks()
    assert len(checks) == 2 and all(not c.same_platform and c.compared > 20 and c.largest <= 1 for c in checks)
    (path,) = store.root.glob("qa/*.jsonl")
    header, *lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first["grad_sq"] *= 1.01
    path.write_text("\n".join([header, json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(ResultsDisagree, match="tqa_1.*grad_sq"):
        qa_study.run_dataset(lm, items, cfg, progress=False, store=elsewhere, verify=2)


def test_the_store_check_recomputes_under_the_records_thread_count(tmp_path, monkeypatch):
    """A sampled token can change with torch's thread count (the order of float sums), so the
    check recomputes a record under the count it was made with (or, for a record that predates
    the field, under this process's count, then 1, then 2)."""
    import json

    import torch

    from gnuq_core.lm.models import LoadedModel
    from gnuq_core.qa import engine
    from gnuq_core.qa.engine import QAConfig

    def thread_dependent_record(loaded, item, config, **kwargs):
        return {"style": "chat", "generation": {"answer": "a"}, "value": float(torch.get_num_threads())}

    monkeypatch.setattr(engine, "question_record", thread_dependent_record)
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    lm = LoadedModel(tiny_llama(), byte_tokenizer(), "tiny", "memory", "chat")
    items = [QAItem("tqa_1", "Capital of France?", ("Paris",), (), "triviaqa")]
    cfg = QAConfig(model="tiny", max_new_tokens=3, n_samples=0, clusterer="exact")
    store, before = Store(tmp_path / "store", label="the test store"), torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        (rec,) = qa_study.run_dataset(lm, items, cfg, progress=False, store=store, verify=0)
        assert rec["value"] == 1.0 and rec[qa_study.THREADS_FIELD] == 1
        torch.set_num_threads(2)
        qa_study.run_dataset(lm, items, cfg, progress=False, store=store, verify=1)
        assert torch.get_num_threads() == 2  # restored after the check
        (path,) = store.root.glob("qa/*.jsonl")
        header, line = path.read_text().splitlines()
        old = {k: v for k, v in json.loads(line).items() if k != qa_study.THREADS_FIELD}  # a record from before
        path.write_text(f"{header}\n{json.dumps(old)}\n")
        qa_study.run_dataset(lm, items, cfg, progress=False, store=store, verify=1)
        path.write_text(f"{header}\n{json.dumps({**old, 'value': 7.0})}\n")  # no thread count reproduces it
        with pytest.raises(ResultsDisagree, match="tqa_1"):
            qa_study.run_dataset(lm, items, cfg, progress=False, store=store, verify=1)
    finally:
        torch.set_num_threads(before)


def _tiny_run(tmp_path):
    from gnuq_core.lm.models import LoadedModel
    from gnuq_core.qa.engine import QAConfig

    lm = LoadedModel(tiny_llama(), byte_tokenizer(), "tiny", "memory", "chat")
    items = [QAItem("tqa_1", "Capital of France?", ("Paris",), (), "triviaqa"),
             QAItem("tqa_2", "Two plus two?", ("four", "4"), (), "triviaqa")]
    return lm, items, QAConfig(model="tiny", max_new_tokens=3, n_samples=2, clusterer="exact")


def test_verify_all_checks_every_record_by_its_exact_part_resumably_and_names_an_altered_one(tmp_path, monkeypatch):
    import json

    import gnuq_core.qa.engine as engine

    lm, items, cfg = _tiny_run(tmp_path)
    made = qa_study.run_dataset(lm, items, cfg, progress=False, store=Store(tmp_path / "s", label="test"))
    calls = []
    real = engine.rescore_answers
    monkeypatch.setattr(engine, "rescore_answers", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    store = Store(tmp_path / "s", label="test", verify_all=True, missing="error")
    again = qa_study.run_dataset(lm, items, cfg, progress=False, store=store, verify=0, read_only=True)
    assert again == made and len(calls) == 2 and len(store.checks()) == 2
    (report,) = (tmp_path / "s" / "qa").glob("*.verified.json")
    info = json.loads(report.read_text())
    assert (info["items"], info["exact_part"], info["whole"]) == (2, 2, 0) and info["largest_deviation"] <= 1
    assert not list((tmp_path / "s" / "qa").glob("*.verify-*"))  # the log goes once the report is written
    # an altered stored number stops the verification, naming the item and the field
    (path,) = (tmp_path / "s" / "qa").glob("*.jsonl")
    lines = path.read_text().splitlines()
    rec = json.loads(lines[2])
    rec["grad_sq"] *= 1.5
    path.write_text("\n".join(lines[:2] + [json.dumps(rec)]) + "\n")
    with pytest.raises(ResultsDisagree, match=r"item tqa_2 .*\.grad_sq: stored"):
        qa_study.run_dataset(lm, items, cfg, progress=False, store=Store(tmp_path / "s", label="t", verify_all=True),
                             verify=0, read_only=True)
