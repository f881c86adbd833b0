"""gnuq_core.lm.scoring on tiny random models: the fast backward path against plain gradients."""

from __future__ import annotations


import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from gnuq_core.lm.prompts import PromptError
from gnuq_core.lm.gradient import reference_pass, answer_log_probs, forward_backward
from gnuq_core.lm.decoding import generate
from gnuq_core.lm.anatomy import resolve_groups
from gnuq_core.estimators import sequence_and_normalized
from gnuq_core.lm.scoring import score, score_many, to_frame
from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_llama

PROMPT = [1, 40, 0, 41, 42, 0, 43]  # contains the padding id 0 twice
ANSWER = [44, 45, 40, 46]
GROUPS = [None, "all", "lm_head", "last_block", "no_embeddings", "embeddings", ["lm_head", "last_block", "all"],
          {"attn": ["model.layers.0.self_attn", "model.layers.1.self_attn"]}]


@pytest.fixture(scope="module")
def models():
    return {"llama_tied": tiny_llama(tied=True), "llama_untied": tiny_llama(tied=False), "gemma": tiny_gemma(),
            "gemma_nocap": tiny_gemma(softcap=None, seed=1)}


def plain_sq(model, prompt, answer, names=None):
    """Plain backward() + sum of squares over unique parameters (optionally a subset)."""
    model.zero_grad(set_to_none=True)
    ids = torch.tensor([prompt + answer])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1]
    lp = torch.log_softmax(logits.double(), -1).gather(1, ids[0, len(prompt):, None]).sum()
    lp.backward()
    seen, total = set(), 0.0
    per = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen or p.grad is None:
            continue
        seen.add(id(p))
        per[n] = float((p.grad.double() ** 2).sum())
        if names is None or n in names:
            total += per[n]
    model.zero_grad(set_to_none=True)
    return float(lp.detach()), total, per


@pytest.mark.parametrize("name", ["llama_tied", "llama_untied", "gemma", "gemma_nocap"])
@pytest.mark.parametrize("groups", GROUPS, ids=lambda g: str(g)[:20])
def test_fast_path_equals_reference(models, name, groups):
    m = models[name]
    fast = forward_backward(m, PROMPT, ANSWER, groups=groups, per_group=True)
    ref = reference_pass(m, PROMPT, ANSWER, groups=groups, per_group=True)
    assert fast.grad_sq == pytest.approx(ref.grad_sq, rel=1e-10)
    assert fast.group_sq.keys() == ref.group_sq.keys()
    for g in fast.group_sq:
        assert fast.group_sq[g] == pytest.approx(ref.group_sq[g], rel=1e-10)
    assert fast.token_log_probs == pytest.approx(ref.token_log_probs, abs=1e-10)


@pytest.mark.parametrize("name", ["llama_tied", "llama_untied", "gemma"])
def test_hook_path_equals_plain_backward(models, name):
    m = models[name]
    log_p, total, per = plain_sq(m, PROMPT, ANSWER)
    fast = forward_backward(m, PROMPT, ANSWER)
    assert sum(fast.token_log_probs) == pytest.approx(log_p, abs=1e-10)
    assert fast.grad_sq == pytest.approx(total, rel=1e-10)
    for n, v in fast.param_sq.items():
        assert v == pytest.approx(per.get(n, 0.0), rel=1e-9, abs=1e-300), n


@pytest.mark.parametrize("name", ["llama_tied", "gemma"])
def test_tied_matrix_norm_equals_full_gradient(models, name):
    """The tied V x d matrix: pieces (head Gram + embedding rows + cross term) == naive grad."""
    m = models[name]
    w = m.get_input_embeddings().weight
    assert w is m.get_output_embeddings().weight
    m.zero_grad(set_to_none=True)
    _, _, per = plain_sq(m, PROMPT, ANSWER)
    wname = next(n for n, p in m.named_parameters() if p is w)
    fast = forward_backward(m, PROMPT, ANSWER, groups="lm_head")
    assert fast.grad_sq == pytest.approx(per[wname], rel=1e-10)
    # the padding row receives only the head contribution, as in the full gradient
    m.zero_grad(set_to_none=True)
    ids = torch.tensor([PROMPT + ANSWER])
    logits = m(input_ids=ids).logits[0, len(PROMPT) - 1:-1]
    torch.log_softmax(logits, -1).gather(1, ids[0, len(PROMPT):, None]).sum().backward()
    assert m.get_input_embeddings().padding_idx == 0
    m.zero_grad(set_to_none=True)


def test_tied_trick_float32_close(models):
    m = tiny_gemma(dtype=torch.float32)
    _, total, _ = plain_sq(m, PROMPT, ANSWER)
    assert forward_backward(m, PROMPT, ANSWER).grad_sq == pytest.approx(total, rel=1e-4)


def test_model_state_untouched(models):
    m = models["llama_tied"]
    p0 = next(m.parameters())
    sentinel = torch.ones_like(p0)
    p0.grad = sentinel
    frozen = m.model.layers[0].mlp.up_proj.weight
    frozen.requires_grad_(False)
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    try:
        forward_backward(m, PROMPT, ANSWER)
        assert p0.grad is sentinel
        assert not frozen.requires_grad
        assert all(p.grad is None for p in m.parameters() if p is not p0)
        assert all(torch.equal(before[n], p) for n, p in m.named_parameters())
    finally:
        p0.grad = None
        frozen.requires_grad_(True)


def test_lm_head_only_runs_decoder_without_grad(models):
    m = models["llama_untied"]
    seen = []
    h = m.model.layers[0].self_attn.q_proj.register_forward_hook(lambda mod, i, o: seen.append(o.requires_grad))
    try:
        forward_backward(m, PROMPT, ANSWER, groups="lm_head")
        assert seen == [False]
        seen.clear()
        forward_backward(m, PROMPT, ANSWER, groups="last_block")
        assert seen == [False]  # block 0 needs no grad when only the last block is asked
        seen.clear()
        forward_backward(m, PROMPT, ANSWER)
        assert seen == [True]
    finally:
        h.remove()


def test_answer_log_probs_match_full_logits(models):
    m = models["gemma"]
    ids = torch.tensor([PROMPT + ANSWER])
    with torch.no_grad():
        full = torch.log_softmax(m(input_ids=ids).logits[0, len(PROMPT) - 1:-1], -1)
    want = full.gather(1, ids[0, len(PROMPT):, None])[:, 0].tolist()
    assert answer_log_probs(m, PROMPT, ANSWER) == pytest.approx(want, abs=1e-10)


def test_sequence_and_normalized_predictions():
    seq, norm = sequence_and_normalized([-0.5, -1.5], 8.0, {"g": 4.0})
    assert seq.log_p == pytest.approx(-2.0)
    assert norm.log_p == pytest.approx(-1.0)
    assert norm.log10_grad_log_p_sq == pytest.approx(math.log10(8.0 / 4))
    assert norm.group_sq_norms == {"g": 1.0}
    # log space: a long answer underflows p but not the log10 fields
    seq, _ = sequence_and_normalized([-50.0] * 40, 1e6)
    assert seq.p == 0.0 and math.isfinite(seq.log10_epistemic)
    assert seq.log10_epistemic == pytest.approx(2 * -2000 / math.log(10) + 6)


def test_score_end_to_end_and_options(models):
    tok = byte_tokenizer()
    m = models["llama_tied"]
    r = score(m, tok, "Who wrote Hamlet?", max_new_tokens=4)
    assert r.generation is not None and len(r.answer_ids) >= 1
    assert r.token_log_probs == pytest.approx(r.generation.token_log_probs, abs=1e-9)
    assert r.uncertainty is r.sequence
    assert r.sequence.combined == pytest.approx(r.sequence.epistemic + r.sequence.aleatoric)
    r2 = score(m, tok, "Who wrote Hamlet?", answer="Shakespeare", prediction="normalized", groups=["lm_head", "last_block"],
               per_group=True)
    assert r2.uncertainty is r2.normalized and set(r2.normalized.group_sq_norms) == {"lm_head", "last_block"}
    assert r2.answer_ids == tok("Shakespeare", add_special_tokens=False)["input_ids"]
    r3 = score(m, tok, "Who wrote Hamlet?", answer="Shakespeare", backend="reference")
    assert r3.sequence.log10_grad_log_p_sq == pytest.approx(
        score(m, tok, "Who wrote Hamlet?", answer="Shakespeare").sequence.log10_grad_log_p_sq, abs=1e-9)
    cached = score(m, tok, "Who wrote Hamlet?", generation=r.generation)
    assert cached.answer == r.answer and "generate" in cached.timings
    d = r.to_dict()
    assert d["sequence"]["p"] == r.sequence.p
    many = score_many(m, tok, ["A?", "B?"], ["x", None], progress=False, max_new_tokens=2)
    assert len(many) == 2 and many[0].answer == "x"
    frame = to_frame(many)  # one row per answer, the chosen reading's fields as columns
    assert list(frame["answer"]) == [r.answer for r in many] and len(frame) == 2
    assert frame["log10_epistemic"].tolist() == [r.uncertainty.log10_epistemic for r in many]
    assert "seconds:gradient" in frame and "group_sq_norms" not in frame
    for bad in (many[0], None, "x", [many[0], 3]):
        with pytest.raises(TypeError, match=r"\[result\]"):
            to_frame(bad)
    fs = score(models["gemma"], byte_tokenizer(chat=False), "Q?", answer="yes", style="fewshot")
    assert fs.answer_ids == byte_tokenizer()(" yes", add_special_tokens=False)["input_ids"]


# ------------------------------------------------------------------ bad input


def test_empty_prompt_and_answer_errors(models):
    m, tok = models["llama_tied"], byte_tokenizer()
    for bad in ["", "   \n"]:
        with pytest.raises(PromptError, match="empty"):
            score(m, tok, bad)
    with pytest.raises(PromptError, match="empty"):
        score(m, tok, "Q?", answer="  ")
    with pytest.raises(PromptError, match="zero tokens"):
        forward_backward(m, PROMPT, [])


def test_prompt_longer_than_context_is_an_error():
    m = tiny_llama()
    m.config.max_position_embeddings = 30
    with pytest.raises(PromptError, match="shorten the prompt by at least"):
        score(m, byte_tokenizer(), "x" * 40, answer="y")
    with pytest.raises(PromptError, match="max_new_tokens"):
        generate(m, byte_tokenizer(), list(range(5, 25)), max_new_tokens=20)


def test_chat_mode_without_template(models):
    with pytest.raises(PromptError, match="no chat template.*fewshot"):
        score(models["gemma"], byte_tokenizer(chat=False), "Q?", style="chat")


def test_nan_loss_and_nan_gradient_name_the_group():
    m = tiny_llama()
    with torch.no_grad():
        m.model.norm.weight[0] = float("nan")
    with pytest.raises(FloatingPointError, match="log p"):
        forward_backward(m, PROMPT, ANSWER)
    m = tiny_llama()
    w = m.model.layers[1].mlp.down_proj.weight
    h = w.register_hook(lambda g: g * float("inf"))
    try:
        with pytest.raises(FloatingPointError, match=r"model\.layers\.1\.mlp\.down_proj\.weight.*last_block"):
            forward_backward(m, PROMPT, ANSWER, groups=["lm_head", "last_block"])
    finally:
        h.remove()


def test_group_errors(models):
    m = models["llama_tied"]
    with pytest.raises(ValueError, match="unknown parameter group 'bogus'"):
        forward_backward(m, PROMPT, ANSWER, groups="bogus")
    with pytest.raises(ValueError, match="matches no parameter"):
        forward_backward(m, PROMPT, ANSWER, groups={"x": ["nothing.here"]})
    g = resolve_groups(m, "no_embeddings")
    assert "model.embed_tokens.weight" not in g["no_embeddings"] and "lm_head.weight" not in g["no_embeddings"]
    with pytest.raises(ValueError, match="prediction"):
        score(m, byte_tokenizer(), "Q?", answer="a", prediction="mean")


@pytest.mark.parametrize("make", [tiny_llama, tiny_gemma])
def test_per_block_groups_partition_the_parameters_and_agree_with_last_block(make) -> None:
    from gnuq_core.lm.anatomy import per_block_groups

    model = make()
    groups = per_block_groups(model)
    names = [n for ns in groups.values() for n in ns]
    assert sorted(names) == sorted(n for n, _ in model.named_parameters(remove_duplicate=False))
    last = sorted(k for k in groups if k.startswith("block"))[-1]
    assert sorted(groups[last]) == sorted(resolve_groups(model, "last_block")["last_block"])
    assert resolve_groups(model, ["per_block"]) == groups


def test_per_block_groups_of_a_tied_llama() -> None:
    from gnuq_core.lm.anatomy import per_block_groups

    g = per_block_groups(tiny_llama())
    assert list(g) == ["embeddings", "block 00", "block 01", "other"]
    assert "lm_head.weight" in g["embeddings"]  # tied: the output projection is the embedding matrix
