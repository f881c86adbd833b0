"""`gnuq_core.lm.anatomy`: every pass runs in eval mode and gives the model its modes back."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

from gnuq_core.lm import anatomy, baselines, batched, decoding, gradient, scoring
from tests.tiny_models import byte_tokenizer, tiny_llama

PROMPT, ANSWER = [5, 6, 7, 8, 9], [10, 11, 12]


def _dropout_model() -> Any:
    """A tiny Llama whose attention dropout (p = 0.5) changes every number in train mode."""
    model = tiny_llama(tied=True, seed=3)
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.5
    return model


def _numbers(out: Any) -> list[float]:
    """The numbers of a pass's output, flat, without its timings."""
    if isinstance(out, (list, tuple)):
        return [v for x in out for v in _numbers(x)]
    if isinstance(out, gradient.GradientPass):
        return [*out.token_log_probs, out.grad_sq]
    if isinstance(out, scoring.ScoreResult):
        return [*out.answer_ids, *out.token_log_probs, out.sequence.log10_epistemic]
    if isinstance(out, dict):
        return [v for k, v in sorted(out.items()) if k != "seconds"]
    if hasattr(out, "token_log_probs"):  # Generation, Sample
        return [*out.answer_ids, *out.token_log_probs]
    return [out]


TOK = byte_tokenizer()
PASSES: dict[str, Callable[[Any], Any]] = {
    "decode": lambda m: decoding.decode(m, TOK, PROMPT, 3, max_new_tokens=3, seed=1),
    "generate": lambda m: decoding.generate(m, TOK, PROMPT, max_new_tokens=3),
    "sample_answers": lambda m: decoding.sample_answers(m, TOK, PROMPT, 3, max_new_tokens=3, seed=1),
    "teacher_forced": lambda m: decoding.teacher_forced(m, PROMPT, [ANSWER, ANSWER[:1]]),
    "p_true": lambda m: baselines.p_true(m, TOK, "Who?", "Ann"),
    "forward_backward": lambda m: gradient.forward_backward(m, PROMPT, ANSWER),
    "reference_pass": lambda m: gradient.reference_pass(m, PROMPT, ANSWER, groups=None, per_group=False),
    "answer_log_probs": lambda m: gradient.answer_log_probs(m, PROMPT, ANSWER),
    "batched_forward_backward": lambda m: batched.batched_forward_backward(m, [PROMPT, PROMPT[:3]], [ANSWER, [4]]),
    "score": lambda m: scoring.score(m, TOK, "Who?", "Ann"),
    "score_many": lambda m: scoring.score_many(m, TOK, ["Who?", "Why?"], ["Ann", "Because"], progress=False),
}


@pytest.mark.parametrize("name", list(PASSES))
def test_every_pass_gives_its_eval_value_in_train_mode_and_restores_the_modes(name: str) -> None:
    model = _dropout_model().eval()
    want = _numbers(PASSES[name](model))
    model.train()
    model.model.layers[0].eval()  # a mixed state: each module gets its own mode back
    for _ in range(2):
        assert _numbers(PASSES[name](model)) == want  # the same arithmetic: equal, not close
    assert model.training and model.model.layers[1].training and not model.model.layers[0].training


def test_eval_mode_restores_the_modes_after_an_error() -> None:
    model = _dropout_model().train()
    with pytest.raises(RuntimeError, match="boom"), anatomy.eval_mode(model):
        assert not any(m.training for m in model.modules())
        raise RuntimeError("boom")
    assert all(m.training for m in model.modules())


def test_a_pass_on_an_eval_model_does_not_touch_its_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _dropout_model().eval()
    monkeypatch.setattr(torch.nn.Module, "eval", lambda self: pytest.fail("eval() called on an eval-mode model"))
    gradient.forward_backward(model, PROMPT, ANSWER)
