"""gnuq_core.lm.decoding on tiny random models: one prefill shared by the greedy answer and
the samples, checked against no-cache and teacher-forced references, and the stop-token
convention."""

from __future__ import annotations

import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from gnuq_core.lm.decoding import (_inverse_cdf, _prefill, _sample_rows, decode, generate, sample_answers, teacher_forced,
                                   stop_token_ids)
from gnuq_core.lm.gradient import answer_log_probs
from tests.tiny_models import ScriptedLM, byte_tokenizer, tiny_gemma, tiny_llama

PROMPT = [1, 40, 0, 41, 42, 0, 43]  # contains the padding id 0 twice
PROMPTS = [PROMPT, [1, 60, 61, 62], [1, 70, 71, 72, 73, 74, 75, 76, 77, 78]]  # the last is longer than the window
MANY_STOPS = [2] + list(range(100, 130))  # ~12% stop mass per step: rows finish at different steps


def tiny_gemma_hybrid(seed: int = 2):
    """A 3-layer Gemma 3 with sliding-window (window 4) and full-attention layers mixed."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    cfg = Gemma3TextConfig(vocab_size=261, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=512,
                           sliding_window=4, layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                           pad_token_id=0, bos_token_id=1, eos_token_id=2, final_logit_softcapping=30.0,
                           tie_word_embeddings=True)
    return Gemma3ForCausalLM(cfg).to(torch.float64).eval()


@pytest.fixture(scope="module")
def models():
    return {"llama_tied": tiny_llama(tied=True), "llama_untied": tiny_llama(tied=False), "gemma": tiny_gemma(),
            "gemma_hybrid": tiny_gemma_hybrid()}


@pytest.fixture(scope="module")
def stopping():
    """Models whose stop set holds 31 tokens, so that answers end early and at different steps."""
    out = {"llama": tiny_llama(seed=3), "gemma": tiny_gemma(seed=3), "gemma_hybrid": tiny_gemma_hybrid(seed=4)}
    for m in out.values():
        m.generation_config.eos_token_id = list(MANY_STOPS)
    return out


def greedy_without_cache(model, prompt, max_new_tokens, stops):
    """Reference greedy decoder: the full sequence re-run at every step, no KV cache."""
    ids, answer, lps, ents, stop_lp = list(prompt), [], [], [], None
    for step in range(max_new_tokens):
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1], -1)
        order = torch.argsort(lp, descending=True).tolist()
        tok = next(t for t in order if t not in stops) if step == 0 else order[0]
        if tok in stops:
            stop_lp = float(lp[tok])
            break
        answer.append(tok)
        lps.append(float(lp[tok]))
        ents.append(float(-(lp.exp() * lp).sum()))
        ids.append(tok)
    return answer, lps, ents, stop_lp


# ------------------------------------------------------------------ greedy


@pytest.mark.parametrize("name", ["llama_tied", "gemma", "gemma_hybrid"])
def test_greedy_equals_the_no_cache_reference(models, name):
    m, tok = models[name], byte_tokenizer()
    # an extra stop token that ends some greedy answers early and not others (chosen on the reference)
    candidates = [t for p in PROMPTS for t in greedy_without_cache(m, p, 12, {2})[0][1:]]
    extra = next(t for t in candidates
                 if len({greedy_without_cache(m, p, 12, {2, t})[3] is None for p in PROMPTS}) == 2)
    old = m.generation_config.eos_token_id
    m.generation_config.eos_token_id = [2, extra]
    try:
        stops = stop_token_ids(m, tok)
        reasons = set()
        for prompt in PROMPTS:
            g, _ = decode(m, tok, prompt, 4, max_new_tokens=12, seed=0)
            answer, lps, ents, stop_lp = greedy_without_cache(m, prompt, 12, stops)
            assert g.answer_ids == answer
            assert g.token_log_probs == pytest.approx(lps, abs=1e-10)
            assert g.token_entropies == pytest.approx(ents, abs=1e-10)
            if stop_lp is None:
                assert g.stop_reason == "max_new_tokens" and g.stop_log_prob is None and g.stop_token_id is None
            else:
                assert g.stop_reason == "eos" and g.stop_token_id in stops
                assert g.stop_log_prob == pytest.approx(stop_lp, abs=1e-10) and g.stop_log_prob < 0
            reasons.add(g.stop_reason)
        assert reasons == {"eos", "max_new_tokens"}  # both endings were exercised
    finally:
        m.generation_config.eos_token_id = old


@pytest.mark.parametrize("name", ["llama_untied", "gemma", "gemma_hybrid"])
def test_decode_greedy_is_bit_identical_to_generate_and_samples_to_sample_answers(models, name):
    """Decoding the samples first must leave the prefill cache the greedy pass reads untouched."""
    m, tok = models[name], byte_tokenizer()
    g, s = decode(m, tok, PROMPT, 5, max_new_tokens=6, seed=4)
    g_alone = generate(m, tok, PROMPT, max_new_tokens=6)
    assert (g.answer_ids, g.token_log_probs, g.token_entropies, g.stop_reason, g.stop_log_prob) == (
        g_alone.answer_ids, g_alone.token_log_probs, g_alone.token_entropies, g_alone.stop_reason,
        g_alone.stop_log_prob)
    assert s == sample_answers(m, tok, PROMPT, 5, max_new_tokens=6, seed=4)
    g0, none = decode(m, tok, PROMPT, 0, max_new_tokens=6)
    assert none == [] and g0.answer_ids == g.answer_ids


def test_generate_matches_hf_greedy(models):
    m = models["llama_untied"]
    out = generate(m, byte_tokenizer(), PROMPT, max_new_tokens=6)
    if out.stop_reason == "max_new_tokens":
        ids = torch.tensor([PROMPT])  # explicit mask: HF would mask the pad ids in the prompt
        hf = m.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=6, min_new_tokens=6,
                        eos_token_id=None, pad_token_id=0)
        assert out.answer_ids == hf[0, len(PROMPT):].tolist()
    assert len(out.token_entropies) == len(out.answer_ids)
    assert all(0 <= e <= math.log(m.config.vocab_size) + 1e-6 for e in out.token_entropies)


def test_generate_stopping_rules():
    tok = byte_tokenizer()
    nl = tok("\n", add_special_tokens=False)["input_ids"][0]
    a, b = tok("ab", add_special_tokens=False)["input_ids"]
    g = generate(ScriptedLM([a, b, nl, a]), tok, [1, a], max_new_tokens=10, stop_at_newline=True)
    assert (g.answer, g.stop_reason, g.stop_token_id) == ("ab", "newline", nl)
    g = generate(ScriptedLM([a, b, nl, 2]), tok, [1, a], max_new_tokens=10)  # newline kept in chat mode
    assert (g.answer_ids, g.stop_reason) == ([a, b, nl], "eos")
    g = generate(ScriptedLM([a]), tok, [1, a], max_new_tokens=3)
    assert (g.answer, g.stop_reason, g.stop_log_prob) == ("aaa", "max_new_tokens", None)
    # the first token is never a stop token (min_new_tokens = 1)
    g = generate(ScriptedLM([2, 2], second=b), tok, [1, a], max_new_tokens=5)
    assert (g.answer, g.stop_reason) == ("b", "eos")
    assert 2 in stop_token_ids(ScriptedLM([a]), tok)
    assert tok.convert_tokens_to_ids("<|im_end|>") in stop_token_ids(ScriptedLM([a]), tok)
    with pytest.raises(ValueError, match="max_new_tokens must be an integer of at least 1"):
        generate(ScriptedLM([a]), tok, [1, a], max_new_tokens=0)


# ------------------------------------------------------------------ the stop-token convention


def test_an_empty_sample_has_the_stop_tokens_probability():
    """A sample that stops at its first token has log p = log p(stop) < 0, not 0."""
    tok = byte_tokenizer()
    log_p_top = 10.0 - math.log(math.exp(10.0) + (ScriptedLM([2]).vocab - 1))  # the scripted token's log-prob
    samples = sample_answers(ScriptedLM([2]), tok, [1, 40], 20, max_new_tokens=5, seed=0)
    empty = [s for s in samples if not s.answer_ids]
    assert len(empty) >= 15
    for s in empty:
        assert (s.answer, s.stop_reason, s.stop_token_id, s.token_log_probs) == ("", "eos", 2, [])
        assert s.log_prob == pytest.approx(log_p_top, abs=1e-6) and s.log_prob < 0
    # a non-empty sample counts its tokens only (the reference code's convention); its stop
    # token's log-prob is kept beside it
    a = tok("a", add_special_tokens=False)["input_ids"][0]
    nonempty = [s for s in sample_answers(ScriptedLM([a, 2]), tok, [1], 20, max_new_tokens=5, seed=1)
                if s.answer_ids == [a] and s.stop_reason == "eos"]
    assert nonempty
    for s in nonempty:
        assert s.log_prob == pytest.approx(log_p_top, abs=1e-6)
        assert s.stop_log_prob == pytest.approx(log_p_top, abs=1e-6)
    # greedy: the stop token is recorded beside the answer, not inside its log-probs
    g = generate(ScriptedLM([a, 2]), tok, [1], max_new_tokens=5)
    assert (g.answer_ids, g.stop_reason, g.stop_token_id) == ([a], "eos", 2)
    assert g.token_log_probs == pytest.approx([log_p_top], abs=1e-6)
    assert g.stop_log_prob == pytest.approx(log_p_top, abs=1e-6)
    # a capped sample has no stop token
    s = sample_answers(ScriptedLM([a]), tok, [1], 3, max_new_tokens=2, seed=0)
    capped = [x for x in s if x.stop_reason == "max_new_tokens"]
    assert capped and all(x.stop_log_prob is None and x.log_prob == pytest.approx(math.fsum(x.token_log_probs))
                          for x in capped)


# ------------------------------------------------------------------ samples


@pytest.mark.parametrize("name", ["llama", "gemma", "gemma_hybrid"])
def test_sampled_log_probs_equal_teacher_forcing(stopping, name):
    """Each row's token and stop log-probs, decoded from the expanded prefill cache with
    finished rows dropped, equal a teacher-forced pass over its own answer."""
    m, tok = stopping[name], byte_tokenizer()
    _, samples = decode(m, tok, PROMPTS[2], 12, max_new_tokens=8, seed=1)
    lengths = {len(s.answer_ids) for s in samples if s.stop_reason == "eos"}
    assert len(lengths) >= 3 and any(s.stop_reason == "max_new_tokens" for s in samples)  # staggered finishes
    for s in samples:
        forced = answer_log_probs(m, PROMPTS[2], s.answer_ids + ([s.stop_token_id] if s.stop_token_id is not None
                                                                  else []))
        if s.stop_token_id is not None:
            assert s.stop_log_prob == pytest.approx(forced.pop(), abs=1e-10)
        assert s.token_log_probs == pytest.approx(forced, abs=1e-10)


@pytest.mark.parametrize("name", ["llama_tied", "gemma"])
@pytest.mark.parametrize("batch_size", [None, 2])
def test_sampled_log_probs_are_the_models_own(models, name, batch_size):
    """The prompt's KV cache, run once and copied to every row (and again for each batch),
    must give each row exactly the log-probs of a teacher-forced pass over its answer."""
    m, tok = models[name], byte_tokenizer()
    samples = sample_answers(m, tok, PROMPT, 5, max_new_tokens=6, seed=1, batch_size=batch_size)
    assert len(samples) == 5 and len({tuple(s.answer_ids) for s in samples}) > 1
    for s in samples:
        if s.answer_ids:
            assert s.token_log_probs == pytest.approx(answer_log_probs(m, PROMPT, s.answer_ids), abs=1e-6)


@pytest.mark.parametrize("name", ["llama", "gemma_hybrid"])
def test_dropping_finished_rows_changes_no_other_row(stopping, name):
    m, tok = stopping[name], byte_tokenizer()
    stops = stop_token_ids(m, tok)

    def run(drop):
        logits, cache = _prefill(m, PROMPTS[0])
        gen = torch.Generator().manual_seed(7)
        return _sample_rows(m, tok, logits, cache, 10, temperature=1.0, max_new_tokens=8, stops=stops,
                            stop_at_newline=False, nl={}, generator=gen, drop_finished=drop)

    dropped, kept = run(True), run(False)
    assert len({len(s.answer_ids) for s in dropped}) >= 3  # rows did finish at different steps
    for a, b in zip(dropped, kept):
        assert (a.answer_ids, a.stop_reason, a.stop_token_id) == (b.answer_ids, b.stop_reason, b.stop_token_id)
        assert a.token_log_probs == pytest.approx(b.token_log_probs, abs=1e-12)
        assert (a.stop_log_prob is None) == (b.stop_log_prob is None)
        if a.stop_log_prob is not None:
            assert a.stop_log_prob == pytest.approx(b.stop_log_prob, abs=1e-12)


def test_sampling_is_seeded_batched_and_consistent(models):
    m, tok = models["llama_tied"], byte_tokenizer()
    s1 = sample_answers(m, tok, PROMPT, 5, max_new_tokens=4, seed=3)
    s2 = sample_answers(m, tok, PROMPT, 5, max_new_tokens=4, seed=3)
    assert s1 == s2
    assert [s.answer_ids for s in sample_answers(m, tok, PROMPT, 5, max_new_tokens=4, seed=4)] != [
        s.answer_ids for s in s1]
    assert decode(m, tok, PROMPT, 5, max_new_tokens=4, seed=3)[1] == s1
    assert len(sample_answers(m, tok, PROMPT, 5, max_new_tokens=2, batch_size=2)) == 5
    # true temperature sampling: a near-uniform high temperature spreads over many tokens
    hot = sample_answers(m, tok, PROMPT, 40, max_new_tokens=1, temperature=50.0)
    assert len({tuple(s.answer_ids) for s in hot}) > 20
    cold = sample_answers(m, tok, PROMPT, 10, max_new_tokens=1, temperature=1e-4)
    assert {tuple(s.answer_ids) for s in cold} == {tuple(generate(m, tok, PROMPT, max_new_tokens=1).answer_ids)}
    tok_nl = tok("\n", add_special_tokens=False)["input_ids"][0]
    sc = sample_answers(ScriptedLM([40, tok_nl]), tok, [1], 3, max_new_tokens=5, stop_at_newline=True)
    assert all(s.stop_reason == "newline" and s.answer_ids == [40] and s.stop_token_id == tok_nl for s in sc)
    with pytest.raises(ValueError, match="temperature"):
        sample_answers(m, tok, PROMPT, 2, temperature=0)
    with pytest.raises(ValueError, match="temperature"):
        decode(m, tok, PROMPT, 2, temperature=-1.0)


def test_inverse_cdf_sampler():
    lp = torch.log(torch.tensor([[0.1, 0.0, 0.6, 0.3]], dtype=torch.float64))
    u = torch.tensor([0.0, 0.05, 0.0999, 0.1001, 0.69, 0.71], dtype=torch.float64)
    assert _inverse_cdf(lp.expand(6, -1), u).tolist() == [0, 0, 0, 2, 2, 3]
    u = torch.cat([torch.linspace(0, 1, 20001, dtype=torch.float64)[:-1], torch.tensor([1 - 2 ** -53], dtype=torch.float64)])
    draws = _inverse_cdf(lp.expand(len(u), -1), u)
    assert 1 not in draws.tolist() and draws[-1] == 3  # a zero-probability token is never drawn, even at u -> 1
    # frequencies follow the distribution (float32 log-probs, as real models give)
    p = torch.tensor([0.5, 0.25, 0.125, 0.125])
    draws = _inverse_cdf(torch.log(p).expand(40000, -1), torch.rand(40000, generator=torch.Generator().manual_seed(0),
                                                                      dtype=torch.float64))
    freq = torch.bincount(draws, minlength=4).double() / 40000
    assert freq.tolist() == pytest.approx(p.tolist(), abs=0.01)
    with pytest.raises(FloatingPointError, match="not finite"):
        _inverse_cdf(torch.full((1, 4), float("nan")), torch.zeros(1, dtype=torch.float64))


@pytest.mark.parametrize("name", ["llama_tied", "llama_untied", "gemma", "gemma_hybrid"])
def test_teacher_forced_equals_a_full_forward_per_continuation(models, name):
    """Continuations of different lengths (one empty) scored in one batched step, the head on
    the real positions only: each row's log-probs and entropies equal a no-cache forward."""
    m = models[name]
    conts = [[50, 51, 52, 53, 54], [60], [], [70, 71, 0, 72]]
    got = teacher_forced(m, PROMPTS[1], conts)
    for cont, (lps, ents) in zip(conts, got):
        if not cont:
            assert lps == [] and ents == []
            continue
        ids = torch.tensor([PROMPTS[1] + cont])
        with torch.no_grad():
            lp = torch.log_softmax(m(input_ids=ids).logits[0, len(PROMPTS[1]) - 1:-1], -1)
        assert lps == pytest.approx(lp.gather(1, ids[0, len(PROMPTS[1]):, None])[:, 0].tolist(), abs=1e-10)
        assert ents == pytest.approx((-(lp.exp() * lp).sum(-1)).tolist(), abs=1e-10)
