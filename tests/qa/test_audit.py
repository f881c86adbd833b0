"""The audit of the graders: post-stratified precision and recall, weighted AUROC."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from gnuq_core.qa import audit


def _labels() -> pd.DataFrame:
    # 10 audited per stratum; the grader's "correct" stratum holds 100 answers, its "incorrect" 900
    rows = []
    for k in range(10):
        rows.append({"model": "m", "dataset": "triviaqa", "id": f"c{k}", "label": "correct" if k < 8 else "incorrect",
                     "stratum": "graded correct", "stratum_size": 100})
        rows.append({"model": "m", "dataset": "triviaqa", "id": f"i{k}", "label": "correct" if k < 1 else "incorrect",
                     "stratum": "graded incorrect", "stratum_size": 900})
    rows.append({"model": "m", "dataset": "triviaqa", "id": "u", "label": "unclear", "stratum": "graded incorrect",
                 "stratum_size": 900})
    return pd.DataFrame(rows)


def test_precision_and_recall_are_weighted_back_to_the_population() -> None:
    labels = _labels()
    primary = {("m", i): i.startswith("c") for i in labels["id"]}
    q = audit.grader_quality(labels, {"primary": primary}, n_boot=200)
    (row,) = q.to_dict("records")
    assert row["precision"] == pytest.approx(0.8)  # 8 of the 10 it calls correct
    # truly correct: 100·0.8 in its "correct" stratum, 900·0.1 in the other → recall 80 / 170
    assert row["recall"] == pytest.approx(80 / 170)
    assert row["true_accuracy"] == pytest.approx(170 / 1000) and row["accuracy"] == pytest.approx(0.1)
    assert row["unclear"] == 1 and row["audited"] == 21 and row["precision_lo"] <= 0.8 <= row["precision_hi"]
    perfect = {("m", i): labels.set_index("id").loc[i, "label"] == "correct" for i in labels["id"]}
    assert audit.grader_quality(labels, {"hand": perfect}, n_boot=50)["precision"].iloc[0] == 1.0


def test_a_grader_that_leaves_answers_out_is_judged_on_the_rest() -> None:
    labels = _labels()
    some = {("m", i): True for i in labels["id"] if i.startswith("c")}
    (row,) = audit.grader_quality(labels, {"ties dropped": some}, n_boot=50).to_dict("records")
    assert row["judged"] == 10 and row["precision"] == pytest.approx(0.8)


def test_weighted_auroc() -> None:
    y, s = [1, 1, 0, 0], [0.9, 0.2, 0.5, 0.1]
    assert audit.weighted_auroc(y, s, [1, 1, 1, 1]) == pytest.approx(0.75)
    assert audit.weighted_auroc(y, s, [1, 0.001, 1, 1]) == pytest.approx(1.0, abs=1e-3)  # the miss barely counts
    assert np.isnan(audit.weighted_auroc([1, 1], [0.1, 0.2], [1, 1]))


def test_audited_aurocs_and_a_damaged_file(tmp_path) -> None:
    labels = _labels()
    table = pd.DataFrame({"id": labels["id"], "x": np.linspace(0, 1, len(labels))})
    out = audit.audited_aurocs(labels, {("m", "triviaqa"): table}, ["x"], n_boot=50)
    assert len(out) == 1 and 0 <= out["auroc"].iloc[0] <= 1 and out["n"].iloc[0] == 20
    bad = tmp_path / "labels.jsonl"
    bad.write_text(json.dumps({"model": "m"}) + "\n")
    with pytest.raises(ValueError, match="line 1: needs model, dataset, id, label"):
        audit.load_labels(bad)
    bad.write_text("{not json\n")
    with pytest.raises(ValueError, match="line 1: not valid JSON"):
        audit.load_labels(bad)


def test_the_committed_audit_set() -> None:
    labels = audit.load_labels()
    assert len(labels) >= 400 and labels.groupby(["model", "dataset"]).size().min() >= 100
    assert set(labels["label"]) <= set(audit.LABELS)
    assert not any(c in labels.columns for c in ("question", "answer", "reference"))  # ids and labels only


def _careful(folder, keys, a, b, second, adjudication=()):
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "keys.jsonl").write_text("".join(json.dumps({"key": k, "model": m, "id": i}) + "\n" for k, m, i in keys))
    for name, rows in (("labels_a", a), ("labels_b", b), ("labels_second", second)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps({"key": k, "label": l, "reason": "r"}) + "\n"
                                                      for k, l in rows))
    if adjudication:
        (folder / "adjudication.jsonl").write_text("".join(json.dumps({"key": k, "final": l, "why": "w"}) + "\n"
                                                           for k, l in adjudication))


def test_cohen_kappa_against_its_textbook_cases() -> None:
    from gnuq_core.qa.audit import cohen_kappa

    assert cohen_kappa("aabb", "aabb") == 1.0
    assert cohen_kappa("aabb", "abab") == 0.0  # agreement at chance
    assert cohen_kappa("aaab", "aaba") == pytest.approx((0.5 - 0.625) / (1 - 0.625))


def test_careful_labels_take_the_adjudication_and_agreement_the_labellings_as_made(tmp_path) -> None:
    from gnuq_core.qa.audit import careful_agreement, careful_labels

    keys = [("k1", "m", "q1"), ("k2", "m", "q2"), ("k3", "n", "q1"), ("k4", "n", "q2")]
    _careful(tmp_path, keys, [("k1", "correct"), ("k2", "incorrect")], [("k3", "incorrect"), ("k4", "unclear")],
             [("k1", "correct"), ("k2", "correct"), ("k3", "incorrect")], adjudication=[("k2", "correct")])
    t = careful_labels(tmp_path).set_index("key")
    assert t.loc["k2", "label"] == "correct" and t.loc["k2", "labeller"] == "adjudicated"
    assert t.loc["k3", "labeller"] == "b" and list(t["model"]) == ["m", "m", "n", "n"]
    agree = careful_agreement(tmp_path, n_boot=50)
    assert (agree["n"], agree["decided"]) == (3, 3) and agree["agreement"] == pytest.approx(2 / 3)
    assert [d["key"] for d in agree["disagreements"]] == ["k2"] and agree["disagreements"][0]["primary"] == "incorrect"
    _careful(tmp_path / "gap", keys, [("k1", "correct")], [("k3", "incorrect")], [])
    with pytest.raises(ValueError, match="2 answers have no primary label"):
        careful_labels(tmp_path / "gap")


def test_one_primary_labelling_in_labels_jsonl_is_read_the_same_way(tmp_path) -> None:
    from gnuq_core.qa.audit import careful_agreement, careful_labels

    keys = [("t1", "m", "q1"), ("t2", "n", "q1")]
    _careful(tmp_path, keys, [("t1", "correct"), ("t2", "incorrect")], [], [("t1", "correct"), ("t2", "correct")])
    (tmp_path / "labels_b.jsonl").unlink()
    (tmp_path / "labels_a.jsonl").rename(tmp_path / "labels.jsonl")  # one labeller read every answer
    t = careful_labels(tmp_path).set_index("key")
    assert t.loc["t2", "label"] == "incorrect" and set(t["labeller"]) == {"primary"}
    assert careful_agreement(tmp_path, n_boot=20)["agreement"] == pytest.approx(0.5)
    (tmp_path / "labels.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="holds no primary labels"):
        careful_labels(tmp_path)


def test_the_committed_careful_labels_cover_every_truthfulqa_answer() -> None:
    from gnuq_core.qa.audit import careful_agreement, careful_labels

    t = careful_labels()
    assert len(t) == 2 * 817 and t.groupby("model").size().tolist() == [817, 817] and t["key"].is_unique
    assert careful_agreement(n_boot=200)["kappa"] >= 0.6


def test_triviaqa_careful_labels_decide_only_where_the_graders_disagree() -> None:
    import pandas as pd

    from gnuq_core.qa.audit import answer_digest, triviaqa_careful_column

    table = pd.DataFrame({"id": ["q1", "q2", "q3", "q4"], "answer": ["Paris", "The New York Times", "x", "y"],
                          "correct_em": [True, False, False, False], "correct_contains": [True, True, True, True],
                          "correct_no_echo": [True, False, True, False]})
    labels = pd.DataFrame({"model": "m", "id": ["q2", "q3", "q4"], "label": ["incorrect", "unclear", "correct"],
                           "answer_sha1": [answer_digest("The New York Times"), answer_digest("x"),
                                           answer_digest("another answer")]})
    col = triviaqa_careful_column(table, "m", labels)
    # agreed: the graders' label; disputed: the careful one, unclear or another answer's label left out
    assert col.iloc[0] == 1.0 and col.iloc[1] == 0.0 and col.iloc[2:].isna().all()


def test_careful_triviaqa_labels_are_a_reading_only_where_every_disputed_answer_is_labelled() -> None:
    import pandas as pd

    from gnuq_core.qa.audit import answer_digest, triviaqa_disputes_labelled

    table = pd.DataFrame({"id": ["q1", "q2"], "answer": ["Paris", "The New York Times"],
                          "correct_em": [True, False], "correct_contains": [True, True],
                          "correct_no_echo": [True, False]})
    labels = pd.DataFrame({"model": "m", "id": ["q2"], "label": ["incorrect"],
                           "answer_sha1": [answer_digest("The New York Times")]})
    assert triviaqa_disputes_labelled(table, "m", labels)
    assert not triviaqa_disputes_labelled(table, "other model", labels)
    assert not triviaqa_disputes_labelled(table.assign(answer=["Paris", "The Times of India"]), "m", labels)
    assert triviaqa_disputes_labelled(table.iloc[:1], "other model", labels)  # nothing disputed: nothing to label
