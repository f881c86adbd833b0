"""gnuq_core.bench.peers: gnuq's per-answer norms equal torch.func's and Opacus's (float64, tiny models)."""

from __future__ import annotations

import pytest
import torch

from gnuq_core.bench import peers
from gnuq_core.lm.batched import batched_forward_backward
from tests.tiny_models import tiny_gemma, tiny_gpt2, tiny_llama

pytest.importorskip("opacus")

PROMPTS = [[1, 5, 6, 7], [1, 9], [1, 12, 13, 14, 15, 16]]  # different lengths: padding in one batch
ANSWERS = [[20, 21, 22], [30], [40, 41]]
RTOL = 1e-6


def gnuq_norms(model, groups=None) -> torch.Tensor:
    passes = batched_forward_backward(model, PROMPTS, ANSWERS, groups=groups)
    return torch.tensor([p.grad_sq for p in passes], dtype=torch.float64)


def assert_left_as_it_was(model) -> None:
    assert not model.training and all(p.grad is None and not hasattr(p, "grad_sample") for p in model.parameters())
    assert not any(m._forward_hooks or m._backward_hooks for m in model.modules())


@pytest.mark.parametrize("make", [lambda: tiny_llama(tied=False), tiny_llama, tiny_gpt2],
                         ids=["llama", "llama-tied", "gpt2"])
def test_every_peer_gives_gnuqs_per_answer_norms(make) -> None:
    model = make()
    ours = gnuq_norms(model)
    batch = peers.padded_batch(PROMPTS, ANSWERS)
    assert torch.allclose(peers.torch_func_norms(model, batch), ours, rtol=RTOL, atol=0)
    assert torch.allclose(peers.opacus_norms(model, batch), ours, rtol=RTOL, atol=0)
    assert_left_as_it_was(model)
    if not model.config.tie_word_embeddings:  # Opacus's ghost clipping refuses tied parameters
        assert torch.allclose(peers.opacus_norms(model, batch, ghost=True), ours, rtol=RTOL, atol=0)
    else:
        with pytest.raises(NotImplementedError, match="tying"):
            peers.opacus_norms(model, batch, ghost=True)
    assert_left_as_it_was(model)


def test_gemma_is_compared_on_the_parameters_opacus_covers() -> None:
    model = tiny_gemma()
    batch = peers.padded_batch(PROMPTS, ANSWERS)
    assert torch.allclose(peers.torch_func_norms(model, batch), gnuq_norms(model), rtol=RTOL, atol=0)
    with pytest.raises(NotImplementedError, match="buffers"):  # Gemma's scaled embedding holds a buffer
        peers.opacus_norms(model, batch)
    assert_left_as_it_was(model)  # a refusal half-way through wrapping leaves no hook behind
    for name, p in model.named_parameters():
        p.requires_grad_("embed" not in name)  # the embedding, and the head tied to it
    ours = gnuq_norms(model, groups="no_embeddings")
    assert torch.allclose(peers.opacus_norms(model, batch), ours, rtol=RTOL, atol=0)
    assert torch.allclose(peers.torch_func_norms(model, batch), ours, rtol=RTOL, atol=0)


def test_the_floor_computes_the_log_probabilities_and_no_norm() -> None:
    model = tiny_llama()
    batch = peers.padded_batch(PROMPTS, ANSWERS)
    log_p = peers.floor_pass(model, batch)
    assert torch.allclose(log_p, peers.answer_log_probs(model, batch).detach())
    passes = batched_forward_backward(model, PROMPTS, ANSWERS)
    assert log_p.tolist() == pytest.approx([sum(p.token_log_probs) for p in passes], rel=1e-9)
    assert all(p.grad is None for p in model.parameters())


def test_a_batch_needs_pairs_of_tokens() -> None:
    with pytest.raises(ValueError, match="as many answers as prompts"):
        peers.padded_batch([[1]], [])
    with pytest.raises(ValueError, match="at least one token"):
        peers.padded_batch([[1]], [[]])
