"""gnuq_core.lm.entailment: the reference entailment loop, its comparison count, the random cross-encoder."""

from __future__ import annotations

import pytest

from gnuq_core.lm.entailment import ENTAILMENT, EntailmentClusterer, random_nli_model, reference_comparisons


class _Judge:
    """A stand-in cross-encoder: entailment iff both texts start with the same letter; counts forwards."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def encode(self, premise: str, hypothesis: str) -> list[int]:
        self.calls.append((premise, hypothesis))
        return [int(premise[0] == hypothesis[0])]

    def __call__(self, input_ids):  # noqa: ANN001 - a torch tensor
        import torch

        same = bool(input_ids[0, 0])
        logits = torch.zeros(1, 3)
        logits[0, ENTAILMENT if same else 0] = 1.0
        return type("Out", (), {"logits": logits})()


@pytest.mark.parametrize("clusters, expected", [([0, 0, 0, 0], 3), ([0, 1, 2, 3], 6), ([0, 1, 0, 1], 3 + 2),
                                                ([0], 0), ([], 0)])
def test_reference_comparisons_count_the_loop(clusters: list[int], expected: int) -> None:
    assert reference_comparisons(clusters) == expected


def test_the_loop_clusters_by_bidirectional_entailment_and_makes_the_counted_comparisons() -> None:
    judge = _Judge()
    clusterer = EntailmentClusterer(judge, judge.encode)
    answers = ["apple", "banana", "avocado", "berry", "cherry"]
    ids = clusterer(answers)
    assert ids == [0, 1, 0, 1, 2]
    # two forwards per comparison, both directions, as many comparisons as the count says
    assert len(judge.calls) == 2 * reference_comparisons(ids) == 2 * (4 + 3 + 0)
    assert ("apple", "banana") in judge.calls and ("banana", "apple") in judge.calls


def test_random_cross_encoder_classifies_a_pair() -> None:
    import torch

    model = random_nli_model("tiny")
    assert model is random_nli_model("tiny") and not model.training  # built once, eval mode
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([[1, 7, 8, 2, 9, 2]])).logits
    assert out.shape == (1, 3)
    with pytest.raises(ValueError, match="unknown NLI architecture"):
        random_nli_model("roberta-huge")
