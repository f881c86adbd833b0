"""Text task: the data split is deterministic and disjoint; embeddings from a tiny model."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest

from gnuq_core.isotropy import text_proxy


@pytest.fixture()
def data_root(tmp_path):
    (tmp_path / "truthfulqa").mkdir()
    (tmp_path / "triviaqa").mkdir()
    with (tmp_path / "truthfulqa" / "TruthfulQA.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Type", "Category", "Question", "Best Answer", "Correct Answers", "Incorrect Answers", "Source"])
        for i in range(40):
            w.writerow(["Adversarial" if i % 3 else "Non-Adversarial", "c", f"Question number {i}? ", "a", "a", "b", "s"])
    with (tmp_path / "triviaqa" / "validation.jsonl").open("w") as f:
        for i in range(50):
            f.write(json.dumps({"id": str(i), "question": f"Trivia {i}?", "answers": ["x"]}) + "\n")
    return tmp_path


def test_split_is_deterministic_and_disjoint(data_root):
    tqa, tri = text_proxy.load_truthfulqa(data_root), text_proxy.load_triviaqa(data_root)
    assert tqa[0] == ("Question number 0?", 0) and len(tri) == 50
    a = text_proxy.make_split(tqa, tri)
    shuffled = tqa[:]
    random.Random(1).shuffle(shuffled)
    b = text_proxy.make_split(shuffled, list(reversed(tri)))
    assert a == b
    assert [len(a[k]) for k in ("train", "proxy_same", "query_same")] == [20, 10, 10]
    assert len(a["proxy_other"]) == 10 and len(a["query_other"]) == 10
    qs = [q for k in ("train", "proxy_same", "query_same") for q, _ in a[k]]
    assert len(set(qs)) == 40
    assert not set(a["proxy_other"]) & set(a["query_other"])
    small = text_proxy.make_split(tqa, tri, n_truthfulqa=20)
    assert {q for q, _ in small["train"]} <= {q for q, _ in a["train"]}


def test_embed_with_tiny_bert(tmp_path):
    from transformers import BertConfig, BertModel, BertTokenizer

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "what", "is", "the", "capital", "?"]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    tok = BertTokenizer(str(tmp_path / "vocab.txt"))
    model = BertModel(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=32)).eval()
    e = text_proxy.embed(["what is the capital?", "what?", "the capital"], model, tok, batch_size=2)
    assert e.shape == (3, 16)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1, rtol=1e-5)
    e2 = text_proxy.embed(["what?"], model, tok)
    np.testing.assert_allclose(e2[0], e[1], rtol=1e-4, atol=1e-5)
