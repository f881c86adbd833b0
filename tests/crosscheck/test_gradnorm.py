"""The engine's ‖∇θ log p‖² vs plain autograd on tiny random Llama and Gemma-3 models."""

from __future__ import annotations

import pytest

from gnuq_core.crosscheck import gradnorm as xgrad
from gnuq_core.lm.models import LoadedModel
from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_llama


@pytest.mark.parametrize("make", [tiny_llama, tiny_gemma], ids=["llama", "gemma"])
def test_engine_agrees_with_autograd(make) -> None:
    model = make()
    lm = LoadedModel(model, byte_tokenizer(), "tiny", "memory", "chat")
    answers = xgrad.fixed_answers(lm)[:2]
    answers[0]["stored_grad_sq"] = xgrad.autograd_pass(model, answers[0]["prompt_ids"], answers[0]["answer_ids"])[1]
    df = xgrad.compare_answers(model, answers, label="tiny")
    assert len(df) == 3 and df["agrees"].all(), df[["quantity", "max_rel_error"]]
    assert (df["max_rel_error"] < 1e-10).all()  # float64 tiny models


def test_a_wrong_stored_value_is_a_disagreement() -> None:
    model = tiny_llama()
    lm = LoadedModel(model, byte_tokenizer(), "tiny", "memory", "chat")
    answers = xgrad.fixed_answers(lm)[:1]
    answers[0]["stored_grad_sq"] = 1.001 * xgrad.autograd_pass(model, answers[0]["prompt_ids"],
                                                                answers[0]["answer_ids"])[1]
    df = xgrad.compare_answers(model, answers)
    assert not df.loc[df["ours_by"].str.startswith("stored"), "agrees"].any()


def test_autograd_restores_grads_and_flags() -> None:
    model = tiny_llama()
    flags = [p.requires_grad for p in model.parameters()]
    xgrad.autograd_pass(model, [5, 6, 7], [8, 9])
    assert [p.requires_grad for p in model.parameters()] == flags
    assert all(p.grad is None for p in model.parameters())
    with pytest.raises(ValueError, match="no answers"):
        xgrad.compare_answers(model, [])
