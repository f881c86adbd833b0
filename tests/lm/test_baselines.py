"""gnuq_core.lm.baselines: definitions checked by hand, and the P(True) pass on a tiny model."""

from __future__ import annotations


import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from gnuq_core.lm import baselines as bl
from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_llama


def test_generation_pass_baselines():
    lps = [-0.1, -0.7, -1.2]
    assert bl.max_sequence_probability(lps) == pytest.approx(math.exp(-2.0))
    assert bl.perplexity(lps) == pytest.approx(math.exp(2.0 / 3))
    assert bl.mean_token_entropy([0.5, 1.5]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least one token"):
        bl.perplexity([])


def test_predictive_entropies():
    lps = [-1.0, -3.0]
    assert bl.predictive_entropy(lps) == pytest.approx(2.0)
    assert bl.length_normalized_predictive_entropy(lps, [1, 3]) == pytest.approx((1.0 + 1.0) / 2)
    assert bl.length_normalized_predictive_entropy([-2.0], [0]) == pytest.approx(2.0)  # empty counts as 1
    with pytest.raises(ValueError, match="lengths"):
        bl.length_normalized_predictive_entropy(lps, [1])


def test_semantic_entropy():
    # two clusters with equal mass -> ln 2
    assert bl.semantic_entropy([-1.0, -1.0, math.log(2) - 1.0], [0, 0, 1]) == pytest.approx(math.log(2))
    assert bl.semantic_entropy([-5.0, -9.0], [0, 0]) == pytest.approx(0.0)
    # very long answers do not underflow (logsumexp)
    assert bl.semantic_entropy([-5000.0, -5000.0], [0, 1]) == pytest.approx(math.log(2))
    # length normalisation: per-sample log p / L before summing per cluster
    se = bl.semantic_entropy([-2.0, -1.0], [0, 1], lengths=[2, 1])
    assert se == pytest.approx(math.log(2))
    assert bl.discrete_semantic_entropy([0, 0, 1, 2]) == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))
    assert bl.discrete_semantic_entropy([3, 3]) == 0.0


def test_semantic_entropies_do_not_depend_on_cluster_numbering():
    """Equal cluster masses give bit-equal values (exact ties for AUROC), however numbered."""
    # (unsorted sums differ in the last bit for both of these)
    lps = [-1.2, -0.5, -0.8, -0.6]
    assert bl.semantic_entropy(lps, [0, 1, 2, 1]) == bl.semantic_entropy(lps, [2, 0, 1, 0])
    assert bl.discrete_semantic_entropy([0, 0, 0, 1, 1, 2]) == bl.discrete_semantic_entropy([2, 2, 2, 1, 1, 0])


def test_semantic_entropy_checks_its_inputs():
    with pytest.raises(ValueError, match="cluster ids"):
        bl.semantic_entropy([-1.0, -2.0], [0])
    with pytest.raises(ValueError, match="no samples"):
        bl.discrete_semantic_entropy([])


@pytest.mark.parametrize("style", ["chat", "fewshot"])
def test_p_true_one_forward(style):
    model = tiny_llama(dtype=torch.float64) if style == "chat" else tiny_gemma()
    tok = byte_tokenizer(chat=(style == "chat"))
    out = bl.p_true(model, tok, "Who wrote Hamlet?", "Shakespeare", style=style)
    assert 0 < out["p_true"] < 1
    assert out["p_true"] == pytest.approx(1 / (1 + math.exp(out["log_p_false"] - out["log_p_true"])))
    # by hand: the same prompt, the same first tokens
    from gnuq_core.lm.prompts import encode_prompt, format_prompt, p_true_question

    q = p_true_question("Who wrote Hamlet?", "Shakespeare")
    text = format_prompt(tok, q, "chat", brief=False) if style == "chat" else f"{q}\nAnswer:"
    ids = encode_prompt(tok, text, style)
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)
    word = "True" if style == "chat" else " True"
    assert out["log_p_true"] == pytest.approx(float(lp[tok(word, add_special_tokens=False)["input_ids"][0]]))


def test_p_true_rejects_empty_question():
    from gnuq_core.lm.prompts import PromptError

    with pytest.raises(PromptError, match="empty"):
        bl.p_true(tiny_gemma(), byte_tokenizer(chat=False), "  ", "x", style="fewshot")
