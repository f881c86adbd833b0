"""gnuq_core.lm.floor: the forward + activation backward that bounds the gradient pass from below."""

from __future__ import annotations

import math

import pytest

from gnuq_core.lm.floor import activation_backward
from gnuq_core.lm.gradient import answer_log_probs
from tests.tiny_models import tiny_gemma, tiny_llama

PROMPT, ANSWER = [5, 9, 3, 17, 2, 11], [4, 8, 21]


@pytest.mark.parametrize("make", [lambda: tiny_llama(tied=True), lambda: tiny_gemma(seed=3)], ids=["llama", "gemma"])
def test_floor_returns_log_p_and_leaves_the_model_as_it_was(make) -> None:
    m = make()
    params = list(m.parameters())
    params[0].requires_grad_(False)  # a caller's flags must come back as they were
    flags = [p.requires_grad for p in params]
    log_p = activation_backward(m, PROMPT, ANSWER)
    assert log_p == pytest.approx(math.fsum(answer_log_probs(m, PROMPT, ANSWER)), rel=1e-5)
    assert [p.requires_grad for p in params] == flags
    assert all(p.grad is None for p in params)  # no parameter gradient was formed
