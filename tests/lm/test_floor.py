"""gnuq_core.lm.floor: the forward + activation backward that bounds the gradient pass from below."""

from __future__ import annotations

import math
from contextlib import contextmanager

import pytest

from gnuq_core.lm import floor
from gnuq_core.lm.floor import activation_backward, ghost_layers_of
from gnuq_core.lm.gradient import answer_log_probs, forward_backward
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


@pytest.mark.parametrize("make", [lambda: tiny_llama(tied=True), lambda: tiny_gemma(seed=3)], ids=["llama", "gemma"])
def test_floor_with_grams_forms_the_gradient_pass_s_ghost_norms_and_nothing_else(make, monkeypatch) -> None:
    """The Gram variant forms the ghost norms of exactly the layers the gradient pass takes the
    ghost way, with the same values, and still leaves no parameter gradient behind."""
    m = make()
    formed = []
    real = floor.ghost_linear_sq_norms

    @contextmanager
    def spy(layers):
        with real(layers) as norms:
            yield norms
        formed.append((set(layers), dict(norms.floats())))

    monkeypatch.setattr(floor, "ghost_linear_sq_norms", spy)
    log_p = activation_backward(m, PROMPT, ANSWER, with_grams=True)
    assert log_p == pytest.approx(math.fsum(answer_log_probs(m, PROMPT, ANSWER)), rel=1e-5)
    assert all(p.grad is None for p in m.parameters())
    (layers, sq), = formed
    ghosted = ghost_layers_of(m, len(PROMPT) + len(ANSWER))
    assert layers == set(ghosted) and 0 < len(ghosted) < sum(type(x).__name__ == "Linear" for x in m.modules())
    assert set(sq) == layers  # every Gram product formed once the gradient arrived
    names = {id(p): n for n, p in m.named_parameters()}
    exact = forward_backward(m, PROMPT, ANSWER).param_sq
    assert {names[k]: v for k, v in sq.items()} == pytest.approx({names[k]: exact[names[k]] for k in sq}, rel=1e-9)
    activation_backward(m, PROMPT, ANSWER)
    assert formed[-1][0] == set()  # without the flag no Gram matrix is formed
