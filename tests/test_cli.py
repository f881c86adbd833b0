"""gnuq_core.cli on a tiny model saved to a folder (no download, no real model)."""

from __future__ import annotations


import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json

import pytest
import torch

from gnuq_core.cli import main
from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_llama


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    tiny_llama(dtype=torch.float32).save_pretrained(root / "chat")
    byte_tokenizer().save_pretrained(root / "chat")
    tiny_gemma(dtype=torch.float32).save_pretrained(root / "base")
    byte_tokenizer(chat=False).save_pretrained(root / "base")
    return root


def test_score_table_and_json(folders, capsys):
    assert main(["score", "--model", str(folders / "chat"), "Who wrote Hamlet?", "--max-new-tokens", "3",
                 "--p-true"]) == 0
    out = capsys.readouterr().out
    assert "answer:" in out and "log10 epistemic" in out and "p_true" in out and "(chat prompt)" in out
    assert main(["score", "--model", str(folders / "base"), "Q?", "--answer", "yes", "--json",
                 "--groups", "lm_head,last_block", "--prediction", "normalized"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["answer"] == "yes" and d["style"] == "fewshot" and d["prediction"] == "normalized"
    assert set(d["normalized"]["group_sq_norms"]) == {"lm_head", "last_block"}


def test_bad_input_exits_2_with_advice(folders, capsys):
    assert main(["score", "--model", "nope-model", "Q?"]) == 2
    assert "Known aliases: smollm2-135m-instruct" in capsys.readouterr().err
    assert main(["score", "--model", str(folders / "chat"), "   "]) == 2
    assert "empty" in capsys.readouterr().err
    assert main(["score", "--model", str(folders / "base"), "Q?", "--style", "chat"]) == 2
    assert "no chat template" in capsys.readouterr().err
    assert main(["models"]) == 0
    assert "gemma3-270m" in capsys.readouterr().out


def test_qa_resumable_and_config_mismatch(folders, tmp_path, capsys):
    data = tmp_path / "data" / "triviaqa"
    data.mkdir(parents=True)
    data.joinpath("validation.jsonl").write_text("".join(
        json.dumps({"id": f"tqa_{i}", "question": f"Question {i}?", "answers": ["x"]}) + "\n" for i in range(3)))
    out = tmp_path / "run.jsonl"
    args = ["qa", "--model", str(folders / "chat"), "--dataset", "triviaqa", "--data-dir", str(tmp_path / "data"),
            "--out", str(out), "--samples", "2", "--clusterer", "exact", "--max-new-tokens", "2", "--no-progress"]
    assert main(args + ["--limit", "2"]) == 0  # --limit selects the slice; it is not part of the config
    capsys.readouterr()
    assert main(args + ["--limit", "3"]) == 0
    assert "wrote 1 new records" in capsys.readouterr().out
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x.get("id") for x in lines[1:]] == ["tqa_0", "tqa_1", "tqa_2"]
    assert main(args + ["--temperature", "0.5"]) == 2
    assert "different configuration" in capsys.readouterr().err
