"""gnuq_core.lm.batched: B answers in one pass, each with its own exact ‖∇ log p‖², equal to
one-at-a-time `forward_backward` (float64; tiny Llama, Gemma-3, GPT-2, Pythia and OPT; different
lengths in one batch)."""

from __future__ import annotations

import pytest
import torch

from gnuq_core.estimators.norm_rules import NORM_RULES, register_norm_rule, rule_for
from gnuq_core.lm.batched import batchable, batched_forward_backward
from gnuq_core.lm.gradient import forward_backward
from gnuq_core.lm import scoring
from gnuq_core.lm.scoring import score, score_many
from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_gpt2, tiny_llama, tiny_opt, tiny_pythia

PROMPTS = [[1, 40, 41, 42, 43, 44], [1, 50, 51], [1, 60, 61, 62, 63, 64, 65, 66, 67], [1, 0, 70, 70]]
ANSWERS = [[80, 81, 82], [90], [100, 101, 102, 103, 104, 105], [110, 0, 110]]  # 0: the padding id


def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


@pytest.mark.parametrize("make", [lambda: tiny_llama(), lambda: tiny_llama(tied=False), lambda: tiny_gemma(),
                                  tiny_gpt2, tiny_pythia, tiny_opt],
                         ids=["llama-tied", "llama-untied", "gemma3-softcap", "gpt2", "pythia", "opt"])
@pytest.mark.parametrize("groups", [None, "per_block", "last_block", "lm_head", "no_embeddings"])
def test_every_answer_gets_its_own_norm(make, groups) -> None:
    model = make()
    batch = batched_forward_backward(model, PROMPTS, ANSWERS, groups=groups, per_group=groups is not None)
    assert len(batch) == len(PROMPTS)
    for p, a, got in zip(PROMPTS, ANSWERS, batch):
        want = forward_backward(model, p, a, groups=groups, per_group=groups is not None)
        assert got.token_log_probs == pytest.approx(want.token_log_probs, rel=1e-9, abs=1e-12)
        assert _close(got.grad_sq, want.grad_sq), (got.grad_sq, want.grad_sq)
        assert set(got.group_sq) == set(want.group_sq)
        assert all(_close(got.group_sq[g], want.group_sq[g]) for g in want.group_sq)
        assert set(got.param_sq) == set(want.param_sq)
        assert all(_close(got.param_sq[n], want.param_sq[n]) or want.param_sq[n] < 1e-20 for n in want.param_sq)


def test_the_batch_is_not_the_sum() -> None:
    """The norm of each answer's gradient, not of the batch's summed gradient."""
    model = tiny_llama()
    batch = batched_forward_backward(model, PROMPTS[:2], ANSWERS[:2])
    one = [forward_backward(model, p, a).grad_sq for p, a in zip(PROMPTS[:2], ANSWERS[:2])]
    assert [g.grad_sq for g in batch] == pytest.approx(one, rel=1e-6)
    assert batch[0].grad_sq != pytest.approx(batch[1].grad_sq, rel=1e-3)


def test_the_model_is_left_as_it_was() -> None:
    model = tiny_llama().train()
    p0 = next(model.parameters())
    p0.grad = torch.ones_like(p0)
    flags = [p.requires_grad for p in model.parameters()]
    batched_forward_backward(model, PROMPTS, ANSWERS)  # train mode: eval for the pass (dropout off)
    assert model.training and [p.requires_grad for p in model.parameters()] == flags
    assert torch.equal(p0.grad, torch.ones_like(p0))


def test_bad_input_and_unknown_modules() -> None:
    model = tiny_llama()
    with pytest.raises(ValueError, match="2 prompts but 1 answers"):
        batched_forward_backward(model, PROMPTS[:2], ANSWERS[:1])
    with pytest.raises(Exception, match="answer 1 has zero tokens"):
        batched_forward_backward(model, PROMPTS[:2], [[5], []])
    with pytest.raises(RuntimeError, match="inference_mode"), torch.inference_mode():
        batched_forward_backward(model, PROMPTS[:1], ANSWERS[:1])
    assert batched_forward_backward(model, [], []) == []
    rule = NORM_RULES.pop("RMSNorm")
    try:
        assert rule_for(model.model.norm) is None
        with pytest.raises(ValueError, match="no per-answer norm rule for LlamaRMSNorm"):
            batched_forward_backward(model, PROMPTS[:1], ANSWERS[:1])
    finally:
        register_norm_rule("RMSNorm")(rule)
    assert rule_for(model.model.norm) is rule


def test_score_many_scores_batches_like_score(monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = tiny_llama(), byte_tokenizer()
    prompts, answers = ["What is 2+2?", "Name a colour.", "Capital of France?"], ["four", None, "Paris, France"]
    calls: list[int] = []
    real = scoring.batched_forward_backward
    monkeypatch.setattr(scoring, "batched_forward_backward",
                        lambda m, p, a, **kw: calls.append(len(p)) or real(m, p, a, **kw))
    got = score_many(model, tok, prompts, answers, batch_size=2, per_group=True, groups="per_block",
                     max_new_tokens=3, progress=False)
    assert calls == [2, 1]  # two passes for three answers: the batched path ran
    for p, a, r in zip(prompts, answers, got):
        want = score(model, tok, p, a, per_group=True, groups="per_block", max_new_tokens=3)
        assert r.answer_ids == want.answer_ids and r.answer == want.answer
        assert (r.generation is None) == (a is not None)
        assert r.sequence.log10_epistemic == pytest.approx(want.sequence.log10_epistemic, abs=1e-6)
        assert r.normalized.combined == pytest.approx(want.normalized.combined, rel=1e-6)
        assert r.sequence.group_sq_norms == pytest.approx(want.sequence.group_sq_norms, rel=1e-5)
    with pytest.raises(ValueError, match="batch_size=0"):
        score_many(model, tok, prompts, answers, batch_size=0)


def test_a_model_without_rules_is_scored_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = tiny_llama(), byte_tokenizer()
    rule = NORM_RULES.pop("RMSNorm")
    try:
        assert "no per-answer norm rule for LlamaRMSNorm" in batchable(model)
        assert batchable(model, "lm_head") is None  # the head needs no module rule
        monkeypatch.setattr(scoring, "batched_forward_backward", lambda *a, **k: pytest.fail("batched"))
        with pytest.warns(UserWarning, match="one answer at a time"):
            got = score_many(model, tok, ["A?", "B?"], ["x", "y"], progress=False)
        assert [r.answer for r in got] == ["x", "y"]
    finally:
        register_norm_rule("RMSNorm")(rule)


@pytest.mark.parametrize("make", [tiny_gpt2, tiny_pythia, tiny_opt], ids=["gpt2", "pythia", "opt"])
def test_layer_norm_models_batch(make) -> None:
    """LayerNorm (weight and bias), GPT-2's Conv1D and learned positions, OPT's offset positions:
    every selected parameter has a rule, so score_many batches these models."""
    assert batchable(make()) is None


def test_rules_by_class_cover_subclasses_that_keep_forward() -> None:
    class Same(torch.nn.LayerNorm):
        pass

    class Other(torch.nn.LayerNorm):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) * 2

    assert rule_for(torch.nn.LayerNorm(4)) is rule_for(Same(4)) is not None
    assert rule_for(Other(4)) is None  # computes something else: it needs its own rule


def test_a_module_that_mixes_the_answers_rows_is_refused() -> None:
    """A module that sees the batch as one row cannot have its norm split per answer: an error, not
    a wrong number."""
    model = tiny_llama()
    layer = model.model.layers[0].mlp.down_proj
    handle = layer.register_forward_pre_hook(lambda m, inputs: (inputs[0].sum(0, keepdim=True),))
    try:
        with pytest.raises(RuntimeError, match="did not see one row per answer"):
            batched_forward_backward(model, PROMPTS[:2], ANSWERS[:2])
    finally:
        handle.remove()


def test_falling_back_says_why_once(monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = tiny_llama(), byte_tokenizer()
    rule = NORM_RULES.pop("RMSNorm")
    try:
        with pytest.warns(UserWarning, match=r"one answer at a time.*LlamaRMSNorm.*register_norm_rule") as seen:
            score_many(model, tok, ["A?", "B?", "C?"], ["x", "y", "z"], progress=False)
        assert len([w for w in seen if "one answer at a time" in str(w.message)]) == 1
    finally:
        register_norm_rule("RMSNorm")(rule)
