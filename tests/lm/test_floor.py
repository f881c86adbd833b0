"""gnuq_core.lm.floor: the forward + activation backward that bounds the gradient pass from below."""

from __future__ import annotations

import math
from contextlib import contextmanager

import pytest
import torch

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
    real = floor.rule_hooks

    @contextmanager
    def spy(modules, mask):
        with real(modules, mask) as norms:
            yield norms
        formed.append(({id(mod.weight) for mod in modules}, {k: float(v[0]) for k, v in norms.items()}))

    monkeypatch.setattr(floor, "rule_hooks", spy)
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


def _flops(fn) -> int:
    """Floating-point operations of ``fn()`` by PyTorch's flop counter (matrix products and
    attention; CPU flash attention counted as PyTorch counts it on other devices)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

    def cpu_flash(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
        return sdpa_flop_count(query_shape, key_shape, value_shape)

    with FlopCounterMode(display=False,
                         custom_mapping={torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: cpu_flash}) as fc:
        fn()
    return fc.get_total_flops()


@pytest.mark.parametrize("make", [lambda: tiny_llama(tied=True), lambda: tiny_llama(tied=False),
                                  lambda: tiny_gemma(seed=3)], ids=["llama-tied", "llama-untied", "gemma"])
@pytest.mark.parametrize("prompt", [PROMPT, list(range(3, 40)) + [3, 3]], ids=["short", "long"])
def test_counted_multiply_adds_are_what_the_passes_multiply(make, prompt) -> None:
    """The count from the shapes equals PyTorch's flop counter (2 flops per multiply-add) on
    the real passes: one forward, and the gradient pass minus the floor. The long prompt
    takes some layers the explicit way (the count follows the engine's choice)."""
    m = make()
    n = floor.norm_multiply_adds(m, prompt, ANSWER)
    assert 2 * n["forward"] == _flops(lambda: answer_log_probs(m, prompt, ANSWER))
    floor_flops = _flops(lambda: activation_backward(m, prompt, ANSWER))
    assert 2 * n["norm"] == _flops(lambda: forward_backward(m, prompt, ANSWER)) - floor_flops
    # symmetric: every Gram matrix's T(T+1)/2 entries instead of T², the rest unchanged
    t, a = len(prompt) + len(ANSWER), len(ANSWER)
    grams = (_flops(lambda: activation_backward(m, prompt, ANSWER, with_grams=True)) - floor_flops) // 2
    assert grams == t * t * sum(width * n for width, n in floor.gram_widths(m, t).items())
    head = m.get_output_embeddings()
    saved = grams - grams // (t * t) * (t * (t + 1) // 2) + (a * a - a * (a + 1) // 2) * (head.in_features + head.out_features)
    assert n["norm_symmetric"] == n["norm"] - saved
    assert (0 < grams and n["norm_symmetric"] < n["norm"]) == (len(ghost_layers_of(m, t)) > 0)


def test_linear_input_groups_share_the_attention_and_mlp_inputs() -> None:
    m = tiny_llama(tied=True)
    groups = floor.linear_input_groups(m)
    assert [len(g) for g in groups] == [3, 1, 2, 1] * m.config.num_hidden_layers  # q/k/v, o, gate/up, down
    assert floor.norm_multiply_adds(m, PROMPT, ANSWER, groups=groups) == floor.norm_multiply_adds(m, PROMPT, ANSWER)


@pytest.mark.parametrize("rows", [1, 5, 12])
def test_every_kernel_forms_the_gram_matrix(rows: int) -> None:
    x = torch.randn(rows, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(rows))
    full = x @ x.T
    kernels = floor.gram_products("cpu")
    assert set(kernels) == {"full", "syrk", *(f"blocks{b}" for b in floor.GRAM_BLOCKS)}
    for b in floor.GRAM_BLOCKS:
        blocks = kernels[f"blocks{b}"][0](x)
        lower = torch.zeros_like(full)
        start = 0
        for blk in blocks:  # row block i: its rows against every row up to its end
            lower[start:start + len(blk), :blk.shape[1]] = blk
            start += len(blk)
        assert start == rows
        torch.testing.assert_close(torch.tril(lower), torch.tril(full))
        assert kernels[f"blocks{b}"][1] == (b + 1) / (2 * b)
    upper = torch.from_numpy(kernels["syrk"][0](x))
    torch.testing.assert_close(torch.triu(upper), torch.triu(full))


def test_syrk_only_on_one_cpu_thread() -> None:
    assert "syrk" not in floor.gram_products("cuda") and "full" in floor.gram_products("cuda")
    assert "syrk" not in floor.gram_products("cpu", threads=2) and "blocks3" in floor.gram_products("cpu", threads=2)
