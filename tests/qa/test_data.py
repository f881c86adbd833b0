"""gnuq_core.qa.data: QA loaders on small fixtures written here (never the real files)."""

from __future__ import annotations

import csv
import json

import pytest

from gnuq_core.qa import data as D

HEADER = D.TRUTHFULQA_HEADER


def write_fixture(root):
    (root / "truthfulqa").mkdir(parents=True)
    with (root / "truthfulqa" / "TruthfulQA.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        w.writerow(["Adversarial", "Misconceptions", "What happens if you eat seeds? ", "Nothing happens",
                    "Nothing happens; You digest them", "You grow watermelons; You get sick", "https://x"])
        w.writerow(["Non-Adversarial", "Fiction", "Who is Sherlock?", "A fictional detective",
                    "A fictional detective", "A real person", "https://y"])
    (root / "triviaqa").mkdir()
    rows = [{"id": D.triviaqa_id("Which planet is red?"), "question": "Which planet is red?", "answers": ["Mars"]},
            {"id": "tqa_2", "question": "Capital of Peru?", "answers": ["Lima", "Lima, Peru"]}]
    (root / "triviaqa" / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_load_truthfulqa(tmp_path):
    items = D.load_qa("truthfulqa", data_dir=write_fixture(tmp_path))
    assert [i.id for i in items] == ["tfqa_0", "tfqa_1"]
    assert items[0].question == "What happens if you eat seeds?"
    assert items[0].correct_answers == ("Nothing happens", "You digest them")
    assert items[0].incorrect_answers == ("You grow watermelons", "You get sick")
    assert items[1].extra["category"] == "Fiction"
    assert len(D.load_qa("truthfulqa", data_dir=tmp_path, limit=1)) == 1


def test_load_triviaqa_and_env(tmp_path, monkeypatch):
    write_fixture(tmp_path)
    monkeypatch.setenv("GNUQ_DATA_DIR", str(tmp_path))
    items = D.load_qa("triviaqa")
    assert items[0].correct_answers == ("Mars",) and items[1].id == "tqa_2"
    assert items[0].id == D.triviaqa_id("which  planet is RED")


def test_validation_errors(tmp_path):
    write_fixture(tmp_path)
    p = tmp_path / "triviaqa" / "validation.jsonl"
    p.write_text(p.read_text() + '{"id": "x", "question": "q", "answers": []}\n')
    with pytest.raises(ValueError, match="line 3"):
        D.load_qa("triviaqa", data_dir=tmp_path)
    c = tmp_path / "truthfulqa" / "TruthfulQA.csv"
    c.write_text("Q,A\nx,y\n")
    with pytest.raises(ValueError, match="header"):
        D.load_qa("truthfulqa", data_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown dataset"):
        D.load_qa("squad", data_dir=tmp_path)


def test_missing_data_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("GNUQ_DATA_DIR", raising=False)
    monkeypatch.setattr(D, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(D.DataNotFound, match="GNUQ_DATA_DIR.*pip install datasets"):
        D.load_qa("triviaqa")
    with pytest.raises(D.DataNotFound, match="does not exist"):
        D.load_qa("triviaqa", data_dir=tmp_path / "nowhere")


def test_shared_data_is_found_relative_to_repo(tmp_path, monkeypatch):
    monkeypatch.delenv("GNUQ_DATA_DIR", raising=False)
    write_fixture(tmp_path / "shared" / "data")
    monkeypatch.setattr(D, "REPO_ROOT", tmp_path / "main")
    assert D.find_data_dir("triviaqa") == tmp_path / "shared" / "data"
