"""Semantic clustering by bidirectional entailment, as the reference implementations run it.

Kuhn et al. (2023) and Farquhar et al. (2024, ``get_semantic_ids``) cluster N sampled
answers with an NLI cross-encoder (DeBERTa-large fine-tuned on MNLI): answer ``i`` opens a
cluster if no earlier answer claimed it, and is then compared with *every* later answer
``j`` (claimed or not); two answers mean the same iff each entails the other, which costs
two forward passes of the cross-encoder, one pair at a time. `EntailmentClusterer` runs
that loop (with any sequence-classification model whose label 2 is "entailment");
`reference_comparisons` counts the comparisons the loop makes for a given partition, so
the cost of the reference clustering follows from the cost of one comparison
(`EntailmentClusterer.check`).

No NLI weights install offline here. The cost of a forward does not depend on the
weights, so `random_nli_model` builds a randomly initialised cross-encoder of
DeBERTa-large-MNLI's architecture and size (406M parameters) for timing: its decisions
are meaningless, its cost is the reference's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

__all__ = ["NLI_ARCHITECTURES", "EntailmentClusterer", "reference_comparisons", "random_nli_model", "ENTAILMENT"]

ENTAILMENT = 2
"""Label index of "entailment" in MNLI heads (contradiction, neutral, entailment)."""

NLI_ARCHITECTURES: dict[str, dict[str, Any]] = {
    "deberta-large-mnli": dict(vocab_size=50265, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                               intermediate_size=4096, max_position_embeddings=512, relative_attention=True,
                               pos_att_type=["c2p", "p2c"], position_biased_input=False, max_relative_positions=-1,
                               type_vocab_size=0, num_labels=3),
    "tiny": dict(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=512, relative_attention=True, pos_att_type=["c2p", "p2c"],
                 position_biased_input=False, max_relative_positions=-1, type_vocab_size=0, num_labels=3),
}
"""DeBERTa configurations by name: ``microsoft/deberta-large-mnli``'s (the reference
implementations' cross-encoder) and a tiny one for tests."""


@functools.cache
def random_nli_model(architecture: str = "deberta-large-mnli", seed: int = 0) -> Any:
    """A randomly initialised DeBERTa sequence classifier of ``architecture``
    (:data:`NLI_ARCHITECTURES`), in eval mode, built once per process: the reference
    cross-encoder's cost without its weights."""
    import torch
    from transformers import DebertaConfig, DebertaForSequenceClassification

    if architecture not in NLI_ARCHITECTURES:
        raise ValueError(f"unknown NLI architecture {architecture!r}; known: {', '.join(NLI_ARCHITECTURES)}")
    torch.manual_seed(seed)
    return DebertaForSequenceClassification(DebertaConfig(**NLI_ARCHITECTURES[architecture])).eval()


def reference_comparisons(clusters: Sequence[int]) -> int:
    """Bidirectional-entailment comparisons the reference loop makes for the partition
    ``clusters`` (cluster id per answer, in sampling order): each cluster's first answer
    ``i`` is compared with all ``N − 1 − i`` later answers. Between ``N − 1`` (one meaning)
    and ``N(N − 1)/2`` (all different)."""
    n, seen, total = len(clusters), set(), 0
    for i, c in enumerate(clusters):
        if c not in seen:
            seen.add(c)
            total += n - 1 - i
    return total


class EntailmentClusterer:
    """Semantic clusters by bidirectional entailment, one pair per forward (the reference loop).

    Parameters
    ----------
    model : transformers sequence classifier
        An NLI cross-encoder (label :data:`ENTAILMENT` = entailment), e.g. DeBERTa-large-MNLI.
    encode : callable
        ``encode(premise, hypothesis) -> list[int]``: the pair's input ids (the model's
        tokenizer with its separator tokens).
    """

    def __init__(self, model: Any, encode: Any) -> None:
        self.model, self.encode = model, encode

    def entails(self, premise: str, hypothesis: str) -> bool:
        """One forward of the cross-encoder: does ``premise`` entail ``hypothesis``?"""
        import torch

        ids = torch.tensor([self.encode(premise, hypothesis)])
        with torch.inference_mode():
            logits = self.model(input_ids=ids).logits[0]
        return int(logits.argmax()) == ENTAILMENT

    def check(self, a: str, b: str) -> bool:
        """One comparison of the reference loop: both directions (two forwards, both always run)."""
        forward, backward = self.entails(a, b), self.entails(b, a)
        return forward and backward

    def __call__(self, answers: Sequence[str]) -> list[int]:
        """Cluster id per answer (Farquhar et al.'s ``get_semantic_ids`` with strict entailment)."""
        ids = [-1] * len(answers)
        nxt = 0
        for i, a in enumerate(answers):
            if ids[i] != -1:
                continue
            ids[i] = nxt
            for j in range(i + 1, len(answers)):
                if self.check(a, answers[j]):  # the reference relabels even a claimed answer
                    ids[j] = nxt
            nxt += 1
        return ids
