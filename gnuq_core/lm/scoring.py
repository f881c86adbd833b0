"""Score an LLM answer: one forward-backward pass gives epistemic, aleatoric and combined.

For an answer y = (y_1..y_T) to a prompt x, the prediction is either

* ``"sequence"``: p = prod_t p(y_t | y_<t, x)  (log p = sum_t log p_t), or
* ``"normalized"``: the length-normalised geometric mean p = exp(mean_t log p_t).

Both come from the same backward pass: grad log p_norm = grad log p_seq / T. Epistemic is
``||grad_theta p||^2 = p^2 ||grad_theta log p||^2`` computed in log space
(`gnuq_core.estimators.from_log_p_and_grad_sq`), aleatoric is ``p (1 - p)`` and combined
is their sum (law of total variance, as in the paper).

Efficient backward path (`forward_backward`, ``backend="fast"``):

* the LM head is applied only at the T answer positions: the decoder's hidden states are
  sliced *before* the vocabulary projection (Gemma-3 has a 262k vocabulary);
* the squared gradient norm of every decoder parameter is accumulated in float64 by a
  post-accumulate-grad hook that frees the gradient at once (the model's own ``.grad``
  is saved and restored; nothing else keeps a parameter-sized gradient);
* only the asked-for parameters get ``requires_grad``; with ``groups="lm_head"`` the
  decoder runs under no_grad;
* the input-embedding and output-projection matrices W (tied in both real models: one
  V x d matrix with two full-size gradient contributions) never get a V x d gradient.
  With delta = d log p / d logits (T x V) and H the answer-position hidden states (T x d)
  the head part is G_h = delta^T H, and the embedding part G_e is non-zero only in the rows
  of the U distinct input tokens (R = its U x d rows, from a small leaf tensor). Then

      ||G_h||^2       = sum((delta delta^T) * (H H^T))          (T x T Gram matrices)
      <G_h, G_e>      = sum((delta[:, rows]^T H) * R)
      ||G_h + G_e||^2 = ||G_h||^2 + 2 <G_h, G_e> + ||R||^2

  all in float64. Rows with no gradient (the padding index) are zero in R as in the full
  gradient, because the embedding lookup keeps ``padding_idx``.

``backend="reference"`` computes the same numbers the plain way (full logits, full
gradients via `gnuq_core.estimators.torch_uncertainty`); tests check the two agree.

Prompt longer than the context window: an error (not truncation), because cutting the
start of a prompt silently changes the question (and drops the few-shot examples or the
chat header). The message says how many tokens are too many.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from gnuq_core.estimators.hooks import hooked_sq_norms, raise_if_non_finite
from gnuq_core.lm.prompts import PromptError, encode_answer, encode_prompt, format_prompt

__all__ = ["Generation", "Sample", "ScoreResult", "GradientPass", "PRESET_GROUPS", "resolve_groups",
           "stop_token_ids", "generate", "sample_answers", "forward_backward", "score", "score_many",
           "answer_log_probs", "uncertainties", "context_length", "check_length"]

PRESET_GROUPS = ("all", "no_embeddings", "last_block", "lm_head", "embeddings")
PREDICTIONS = ("sequence", "normalized")
_FIX = "run the model in float32 (dtype='float32') and check the prompt/answer for unusual input"


# --------------------------------------------------------------------------- model anatomy


def _decoder(model: Any) -> torch.nn.Module:
    get = getattr(model, "get_decoder", None)
    dec = get() if callable(get) else None
    if dec is None:
        dec = getattr(model, getattr(model, "base_model_prefix", "model"), None)
    if dec is None or dec is model:
        raise TypeError(f"cannot find the decoder body of {type(model).__name__}: use backend='reference'")
    return dec


def _logit_transform(model: Any, z: torch.Tensor) -> torch.Tensor:
    """Apply the architecture's post-projection logit transforms (softcap, scaling)."""
    cfg = model.config
    scale = getattr(cfg, "logit_scale", None)  # Cohere
    if scale is not None:
        z = z * scale
    div = getattr(cfg, "logits_scaling", None)  # Granite
    if div is not None:
        z = z / div
    cap = getattr(cfg, "final_logit_softcapping", None)  # Gemma 2/3
    if cap is not None:
        z = torch.tanh(z / cap) * cap
    return z


def _up(x: torch.Tensor) -> torch.Tensor:
    """Half-precision logits to float32 for the softmax; float32/float64 stay as they are."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _layers(model: Any) -> torch.nn.ModuleList:
    dec = _decoder(model)
    layers = getattr(dec, "layers", None) or getattr(dec, "h", None)
    if not isinstance(layers, torch.nn.ModuleList):
        lists = [m for m in dec.modules() if isinstance(m, torch.nn.ModuleList)]
        if not lists:
            raise ValueError("cannot find the decoder blocks (no ModuleList): pass explicit groups")
        layers = max(lists, key=len)
    return layers


def resolve_groups(model: Any, groups: str | Sequence[str] | Mapping[str, Any] | None
                   ) -> dict[str, list[str]] | Mapping[str, Any] | None:
    """Turn presets into ``{group: [parameter names]}`` (custom mappings pass through).

    Presets: ``"all"`` (every parameter), ``"no_embeddings"`` (all but nn.Embedding
    weights; in a tied model that also drops the output projection, which *is* the
    embedding matrix), ``"last_block"`` (the last decoder layer), ``"lm_head"`` (the output
    projection, plus its bias if any; in a tied model the shared matrix, with both of its
    gradient contributions), ``"embeddings"`` (nn.Embedding weights). A list of presets
    gives one group each. A mapping ``{name: prefixes | predicate}`` is used as in
    `gnuq_core.estimators.torch_uncertainty`.
    """
    if groups is None or isinstance(groups, Mapping):
        return groups
    names_list = [groups] if isinstance(groups, str) else list(groups)
    named = list(model.named_parameters(remove_duplicate=False))
    by_id: dict[int, list[str]] = {}
    for n, p in named:
        by_id.setdefault(id(p), []).append(n)
    emb_ids = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    head = model.get_output_embeddings()
    out: dict[str, list[str]] = {}
    for g in names_list:
        if g == "all":
            ids = list(by_id)
        elif g == "no_embeddings":
            ids = [k for k in by_id if k not in emb_ids]
        elif g == "embeddings":
            ids = [k for k in by_id if k in emb_ids]
        elif g == "lm_head":
            ids = [id(p) for p in head.parameters()]
        elif g == "last_block":
            ids = [id(p) for p in _layers(model)[-1].parameters()]
        else:
            raise ValueError(f"unknown parameter group {g!r}: use one of {', '.join(PRESET_GROUPS)}, or a "
                             "mapping {name: [parameter-name prefixes]}")
        out[g] = [n for k in ids for n in by_id[k]]
        if not out[g]:
            raise ValueError(f"parameter group {g!r} is empty for {type(model).__name__}")
    return out


def _match(spec: Any, name: str) -> bool:
    if callable(spec):
        return bool(spec(name))
    prefixes = [spec] if isinstance(spec, str) else list(spec)
    return any(name == p or name.startswith(p if p.endswith(".") else p + ".") for p in prefixes)


# --------------------------------------------------------------------------- results


@dataclass
class Generation:
    """Output of the greedy generation pass (reusable: cached generations can be re-scored).

    Attributes
    ----------
    prompt_ids, answer_ids : list[int]
    answer : str
        Decoded answer (special tokens skipped, stripped).
    token_log_probs, token_entropies : list[float]
        Per answer token: log p(y_t | ...) and the entropy (nats) of the full next-token
        distribution.
    stop_reason : str
        ``"eos"``, ``"newline"`` or ``"max_new_tokens"``.
    seconds : float
    """

    prompt_ids: list[int]
    answer_ids: list[int]
    answer: str
    token_log_probs: list[float]
    token_entropies: list[float]
    stop_reason: str
    seconds: float = 0.0


@dataclass
class Sample:
    """One temperature sample: its answer and per-token log-probs under the model (T=1)."""

    answer_ids: list[int]
    answer: str
    token_log_probs: list[float]
    stop_reason: str

    @property
    def log_prob(self) -> float:
        """log p of the whole sampled answer (sum over its tokens)."""
        return float(math.fsum(self.token_log_probs))


@dataclass
class GradientPass:
    """Raw output of `forward_backward`: log p per token and squared gradient norms.

    Attributes
    ----------
    token_log_probs : list[float]
    grad_sq : float
        ``||grad log p_seq||^2`` over the selected parameters.
    group_sq : dict[str, float]
        Per group (only when requested).
    param_sq : dict[str, float]
        Per parameter (first name of each unique tensor).
    seconds : float
    """

    token_log_probs: list[float]
    grad_sq: float
    group_sq: dict[str, float]
    param_sq: dict[str, float]
    seconds: float = 0.0


@dataclass
class ScoreResult:
    """Scored answer.

    Attributes
    ----------
    answer : str
    answer_ids : list[int]
    token_log_probs : list[float]
    sequence : Uncertainty
        For p = prod_t p_t.
    normalized : Uncertainty
        For p = exp(mean_t log p_t).
    prediction : str
        Which of the two `uncertainty` returns.
    generation : Generation or None
        The greedy pass, when the answer was generated.
    timings : dict[str, float]
        Seconds for ``generate`` and ``gradient``.
    """

    answer: str
    answer_ids: list[int]
    token_log_probs: list[float]
    sequence: Any
    normalized: Any
    prediction: str = "sequence"
    generation: Generation | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def uncertainty(self) -> Any:
        """The `Uncertainty` of the chosen prediction."""
        return self.sequence if self.prediction == "sequence" else self.normalized

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (infinite log10 values become None)."""
        def unc(u: Any) -> dict[str, Any]:
            d = u._asdict()
            return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}

        return {"answer": self.answer, "answer_ids": self.answer_ids, "token_log_probs": self.token_log_probs,
                "prediction": self.prediction, "sequence": unc(self.sequence),
                "normalized": unc(self.normalized),
                "generation": asdict(self.generation) if self.generation else None, "timings": self.timings}


# --------------------------------------------------------------------------- checks


def context_length(model: Any, tokenizer: Any = None) -> int | None:
    """The model's context window in tokens (None if unknown)."""
    cfg = model.config
    for key in ("max_position_embeddings", "n_positions", "seq_length"):
        v = getattr(cfg, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def check_length(model: Any, n_prompt: int, n_more: int) -> None:
    """Raise `PromptError` if prompt + answer/new tokens exceed the context window."""
    ctx = context_length(model)
    if ctx is not None and n_prompt + n_more > ctx:
        raise PromptError(
            f"the prompt has {n_prompt} tokens and up to {n_more} more are needed, but the model's context "
            f"is {ctx} tokens: shorten the prompt by at least {n_prompt + n_more - ctx} tokens (or lower "
            "max_new_tokens); gnuq does not truncate prompts because that silently changes the question")


def stop_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """End-of-sequence / end-of-turn token ids of a model."""
    ids: set[int] = set()
    for src in (getattr(getattr(model, "generation_config", None), "eos_token_id", None),
                getattr(model.config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(src, int):
            ids.add(src)
        elif isinstance(src, (list, tuple)):
            ids.update(int(i) for i in src)
    unk = getattr(tokenizer, "unk_token_id", None)
    for tok in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|endoftext|>"):
        # convert_tokens_to_ids, not get_vocab(): building Gemma's 262k-entry dict costs ~0.7 s
        i = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(i, int) and i != unk and tokenizer.convert_ids_to_tokens(i) == tok:
            ids.add(i)
    return ids


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device


# --------------------------------------------------------------------------- generation


def _step(model: Any, input_ids: torch.Tensor, cache: Any) -> tuple[torch.Tensor, Any]:
    """One cached decoding step: (last-position logits, new cache). Handles the
    ``cache=`` (transformers >= 5.2x) and older ``past_key_values=`` keyword."""
    import inspect

    key = getattr(model, "_gnuq_cache_kw", None)
    if key is None:
        params = inspect.signature(model.forward).parameters
        key = "cache" if "cache" in params else "past_key_values"
        try:
            model._gnuq_cache_kw = key
        except AttributeError:
            pass
    kwargs = {key: cache} if cache is not None else {}
    out = model(input_ids=input_ids, use_cache=True, logits_to_keep=1, **kwargs)
    new = getattr(out, "cache", None)
    if new is None:
        new = getattr(out, "past_key_values", None)
    return out.logits[:, -1], new


def _is_newline(tokenizer: Any, tok: int, cache: dict[int, bool]) -> bool:
    if tok not in cache:
        cache[tok] = "\n" in tokenizer.decode([tok])
    return cache[tok]


@torch.no_grad()
def generate(model: Any, tokenizer: Any, prompt_ids: Sequence[int], *, max_new_tokens: int = 32,
             stop_at_newline: bool = False) -> Generation:
    """Greedy answer to a prompt, with per-token log-probs and entropies.

    Stops at an EOS / end-of-turn token, at a token containing a newline when
    ``stop_at_newline`` (few-shot prompts), or after ``max_new_tokens``. The stop token is
    not part of the answer. The first token is the most likely *non-stop* token (as
    ``min_new_tokens=1``), so the answer is never empty.
    """
    started = time.perf_counter()
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be at least 1")
    check_length(model, len(prompt_ids), max_new_tokens)
    stops = stop_token_ids(model, tokenizer)
    nl: dict[int, bool] = {}
    dev = _device(model)
    logits, past = _step(model, torch.tensor([list(prompt_ids)], device=dev), None)
    logits = logits[0]
    answer, lps, ents, reason = [], [], [], "max_new_tokens"
    for step in range(max_new_tokens):
        lp = torch.log_softmax(_up(logits), dim=-1)
        if step == 0:
            cand = torch.topk(lp, min(64, lp.numel())).indices.tolist()
            tok = next((c for c in cand if c not in stops and not (stop_at_newline and _is_newline(tokenizer, c, nl))),
                       cand[0])
        else:
            tok = int(torch.argmax(lp))
            if tok in stops:
                reason = "eos"
                break
            if stop_at_newline and _is_newline(tokenizer, tok, nl):
                reason = "newline"
                break
        answer.append(tok)
        lps.append(float(lp[tok]))
        ents.append(float(-(lp.exp() * lp).nan_to_num().sum()))
        if step + 1 == max_new_tokens:
            break
        logits, past = _step(model, torch.tensor([[tok]], device=dev), past)
        logits = logits[0]
    text = tokenizer.decode(answer, skip_special_tokens=True).strip()
    return Generation(list(prompt_ids), answer, text, lps, ents, reason, time.perf_counter() - started)


@torch.no_grad()
def sample_answers(model: Any, tokenizer: Any, prompt_ids: Sequence[int], n: int, *, temperature: float = 1.0,
                   max_new_tokens: int = 32, stop_at_newline: bool = False, seed: int = 0,
                   batch_size: int | None = None) -> list[Sample]:
    """``n`` answers by true temperature sampling (no top-k, no top-p), batched.

    Each batch runs the ``batch_size`` copies of the prompt together (same length, so no
    padding) with a KV cache until every row has stopped. Token log-probs are recorded
    under the model's own distribution (temperature 1), which is what predictive and
    semantic entropy need. Seeded: the same seed gives the same samples.
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    if temperature <= 0:
        raise ValueError("temperature must be > 0 (use `generate` for greedy decoding)")
    check_length(model, len(prompt_ids), max_new_tokens)
    stops = stop_token_ids(model, tokenizer)
    nl: dict[int, bool] = {}
    dev = _device(model)
    gen = torch.Generator(device=dev).manual_seed(seed)
    batch_size = batch_size or n
    samples: list[Sample] = []
    while len(samples) < n:
        b = min(batch_size, n - len(samples))
        ids = torch.tensor([list(prompt_ids)] * b, device=dev)
        logits, past = _step(model, ids, None)
        toks: list[list[int]] = [[] for _ in range(b)]
        lps: list[list[float]] = [[] for _ in range(b)]
        reason = ["max_new_tokens"] * b
        done = [False] * b
        for step in range(max_new_tokens):
            lp = torch.log_softmax(_up(logits), dim=-1)
            probs = torch.softmax(_up(logits) / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=gen)[:, 0]
            for i in range(b):
                if done[i]:
                    continue
                t = int(nxt[i])
                if t in stops:
                    done[i], reason[i] = True, "eos"
                elif stop_at_newline and _is_newline(tokenizer, t, nl):
                    done[i], reason[i] = True, "newline"
                else:
                    toks[i].append(t)
                    lps[i].append(float(lp[i, t]))
            if all(done) or step + 1 == max_new_tokens:
                break
            logits, past = _step(model, nxt[:, None], past)
        for i in range(b):
            samples.append(Sample(toks[i], tokenizer.decode(toks[i], skip_special_tokens=True).strip(), lps[i],
                                  reason[i]))
    return samples


# --------------------------------------------------------------------------- forward-backward


def _unique_params(model: Any) -> tuple[dict[int, torch.nn.Parameter], dict[int, list[str]]]:
    params: dict[int, torch.nn.Parameter] = {}
    names: dict[int, list[str]] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        params.setdefault(id(p), p)
        names.setdefault(id(p), []).append(n)
    return params, names


def _select(params: dict[int, Any], names: dict[int, list[str]], groups: Mapping[str, Any] | None
            ) -> dict[str, list[int]]:
    if groups is None:
        return {"all": [k for k, p in params.items() if p.is_floating_point()]}
    members: dict[str, list[int]] = {}
    for g, spec in groups.items():
        members[g] = [k for k in params if params[k].is_floating_point() and any(_match(spec, n) for n in names[k])]
        if not members[g]:
            sample = ", ".join(n for k in list(names)[:6] for n in names[k][:1])
            raise ValueError(f"group {g!r} matches no parameter; parameter names look like: {sample}, ...")
    return members


def forward_backward(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int], *,
                     groups: str | Sequence[str] | Mapping[str, Any] | None = None,
                     per_group: bool = False) -> GradientPass:
    """log p of the answer tokens and ``||grad log p||^2``, efficiently (see module docstring).

    Parameters
    ----------
    model : transformers causal LM
        In eval mode. Its parameters, ``requires_grad`` flags and ``.grad`` are unchanged on
        return.
    prompt_ids, answer_ids : sequence of int
        Token ids; the answer must have at least one token.
    groups, per_group
        Which parameters count (see `resolve_groups`) and whether to report per group.

    Raises
    ------
    FloatingPointError
        If log p or a gradient is NaN/inf; names the parameter and its group.
    """
    started = time.perf_counter()
    if len(answer_ids) == 0:
        raise PromptError("the answer has zero tokens: nothing to score")
    if len(prompt_ids) == 0:
        raise PromptError("the prompt has zero tokens: pass a non-empty prompt")
    check_length(model, len(prompt_ids), len(answer_ids))
    spec = resolve_groups(model, groups)
    params, names = _unique_params(model)
    members = _select(params, names, spec)
    selected = {k for m in members.values() for k in m}

    emb_mod = model.get_input_embeddings()
    head = model.get_output_embeddings()
    w_in, w_out = emb_mod.weight, head.weight
    tied = w_in is w_out
    bias = getattr(head, "bias", None)
    need_rows = id(w_in) in selected
    need_head = id(w_out) in selected
    need_bias = bias is not None and id(bias) in selected
    special = {id(w_in), id(w_out)} | ({id(bias)} if bias is not None else set())
    body = [k for k in params if k in selected and k not in special]

    dev = _device(model)
    ids = torch.tensor(list(prompt_ids) + list(answer_ids), device=dev)
    n_p, n_a = len(prompt_ids), len(answer_ids)
    targets = ids[n_p:]
    captured: dict[str, torch.Tensor] = {}
    with hooked_sq_norms(params, body) as norms:
        sq = norms.sq
        with torch.enable_grad():
            uniq, inv = torch.unique(ids, return_inverse=True)
            if need_rows:
                rows = w_in.detach()[uniq].clone().requires_grad_(True)
                old_pad = getattr(emb_mod, "padding_idx", None)
                hit = (uniq == old_pad).nonzero() if old_pad is not None else None
                emb_mod.padding_idx = int(hit[0, 0]) if hit is not None and hit.numel() else None
                try:
                    emb = torch.func.functional_call(emb_mod, {"weight": rows}, (inv[None],))
                finally:
                    emb_mod.padding_idx = old_pad
            else:
                rows = None
                with torch.no_grad():
                    emb = emb_mod(ids[None])
            h = _decoder(model)(inputs_embeds=emb, use_cache=False).last_hidden_state
            h_ans = h[0, n_p - 1:-1]
            if not h_ans.requires_grad:
                h_ans = h_ans.detach()
            z = F.linear(h_ans, w_out.detach(), bias.detach() if bias is not None else None)
            if not z.requires_grad and (need_head or need_bias):
                z = z.detach().requires_grad_(True)
            if need_head or need_bias:
                z.register_hook(lambda g: captured.__setitem__("dz", g.detach()))
            logp_all = torch.log_softmax(_up(_logit_transform(model, z)), dim=-1)
            tok_lp = logp_all.gather(1, targets[:, None])[:, 0]
            log_p = tok_lp.sum()
            token_log_probs = tok_lp.detach().double().tolist()
            log_p_value = float(log_p.detach())
            if not math.isfinite(log_p_value):
                raise FloatingPointError(f"log p of the answer is {log_p_value}; {_FIX}")
            inputs = [params[k] for k in body] + ([rows] if rows is not None else [])
            if z.is_leaf and z.requires_grad:
                inputs.append(z)
            if inputs:
                torch.autograd.backward(log_p, inputs=inputs)
        # -------------------------------------------------- tied / head / embedding pieces
        dz = captured.get("dz")
        H = h_ans.detach().double()
        if need_head or need_bias:
            if dz is None:
                raise RuntimeError("internal error: no gradient reached the LM head logits")
            d = dz.double()
        if need_head:
            head_sq = ((d @ d.T) * (H @ H.T)).sum()
        if need_rows:
            r = rows.grad.double() if rows.grad is not None else torch.zeros_like(rows, dtype=torch.float64)
            emb_sq = (r * r).sum()
        if tied and need_rows:
            cross = ((d[:, uniq.to(d.device)].T @ H) * r.to(d.device)).sum()
            sq[id(w_in)] = head_sq + 2 * cross + emb_sq.to(head_sq.device)
        else:
            if need_rows:
                sq[id(w_in)] = emb_sq
            if need_head:
                sq[id(w_out)] = head_sq
        if need_bias:
            sq[id(bias)] = (d.sum(0) ** 2).sum()
        sq_f = {k: float(v) for k, v in sq.items()}
    raise_if_non_finite(sq_f, selected, names, members, _FIX)
    total = math.fsum(sq_f.get(k, 0.0) for k in selected)
    group_sq = {g: math.fsum(sq_f.get(k, 0.0) for k in m) for g, m in members.items()} if per_group else {}
    return GradientPass(token_log_probs, total, group_sq, {names[k][0]: sq_f.get(k, 0.0) for k in selected},
                        time.perf_counter() - started)


def _reference_pass(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int], *,
                    groups: Any, per_group: bool) -> GradientPass:
    """Plain path: full logits, full gradients, via `estimators.torch_uncertainty`."""
    from gnuq_core.estimators import torch_uncertainty

    started = time.perf_counter()
    check_length(model, len(prompt_ids), len(answer_ids))
    dev = _device(model)
    ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=dev)
    n_p = len(prompt_ids)
    box: dict[str, Any] = {}

    def log_prob_fn(m: Any) -> torch.Tensor:
        logits = m(input_ids=ids, use_cache=False).logits[0, n_p - 1:-1]
        lp = torch.log_softmax(_up(logits), -1).gather(1, ids[0, n_p:, None])[:, 0]
        box["tok"] = lp.detach().double().tolist()
        return lp.sum()

    spec = resolve_groups(model, groups)
    u = torch_uncertainty(model, log_prob_fn, groups=spec, per_group=per_group)
    return GradientPass(box["tok"], 10.0 ** u.log10_grad_log_p_sq if u.log10_grad_log_p_sq > -math.inf else 0.0,
                        dict(u.group_sq_norms), {}, time.perf_counter() - started)


def answer_log_probs(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int]) -> list[float]:
    """Per-token log p of an answer (forward only, LM head at answer positions only)."""
    with torch.no_grad():
        dev = _device(model)
        ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=dev)
        h = _decoder(model)(input_ids=ids, use_cache=False).last_hidden_state[0, len(prompt_ids) - 1:-1]
        z = _logit_transform(model, model.get_output_embeddings()(h))
        return torch.log_softmax(_up(z), -1).gather(1, ids[0, len(prompt_ids):, None])[:, 0].double().tolist()


def uncertainties(token_log_probs: Sequence[float], grad_sq: float, group_sq: Mapping[str, float] | None = None
                  ) -> tuple[Any, Any]:
    """(sequence, normalized) `Uncertainty` from per-token log-probs and ``||grad log p_seq||^2``.

    The normalized prediction log p / T has gradient grad(log p)/T, so its squared norm
    (and every per-group value) is divided by T^2.
    """
    from gnuq_core.estimators import from_log_p_and_grad_sq

    n = len(token_log_probs)
    log_p = math.fsum(token_log_probs)
    seq = from_log_p_and_grad_sq(log_p, grad_sq, group_sq)
    norm = from_log_p_and_grad_sq(log_p / n, grad_sq / n**2, {k: v / n**2 for k, v in (group_sq or {}).items()})
    return seq, norm


def score(model: Any, tokenizer: Any, prompt: str, answer: str | None = None, *, style: str = "chat",
          brief: bool = True, max_new_tokens: int = 32, groups: Any = None, per_group: bool = False,
          prediction: str = "sequence", backend: str = "fast", generation: Generation | None = None
          ) -> ScoreResult:
    """Answer a prompt (greedy, unless ``answer`` is given) and score it in one forward-backward pass.

    Parameters
    ----------
    model, tokenizer
        A causal LM (eval mode) and its tokenizer.
    prompt : str
        The question; it is formatted with `gnuq_core.lm.prompts.format_prompt`.
    answer : str, optional
        Score this answer instead of generating one.
    style : {"chat", "fewshot"}
        Prompt format; few-shot generation stops at the first newline.
    brief : bool
        Chat mode: ask for an answer "in a few words".
    max_new_tokens : int
        Cap on generated tokens.
    groups, per_group
        Parameter groups for the epistemic term (`resolve_groups`) and per-group norms.
    prediction : {"sequence", "normalized"}
        Which p `ScoreResult.uncertainty` refers to (both are always computed).
    backend : {"fast", "reference"}
        ``"fast"`` is the efficient path; ``"reference"`` the plain full-gradient one.
    generation : Generation, optional
        A cached greedy pass to re-score (skips generation).

    Returns
    -------
    ScoreResult
    """
    if prediction not in PREDICTIONS:
        raise ValueError(f"unknown prediction {prediction!r}; use one of {', '.join(PREDICTIONS)}")
    if backend not in ("fast", "reference"):
        raise ValueError(f"unknown backend {backend!r}; use 'fast' or 'reference'")
    text = format_prompt(tokenizer, prompt, style, brief=brief)
    prompt_ids = encode_prompt(tokenizer, text, style)
    timings: dict[str, float] = {}
    if answer is None:
        if generation is None:
            generation = generate(model, tokenizer, prompt_ids, max_new_tokens=max_new_tokens,
                                  stop_at_newline=(style == "fewshot"))
        timings["generate"] = generation.seconds
        answer_ids, answer_text = generation.answer_ids, generation.answer
    else:
        answer_ids, answer_text = encode_answer(tokenizer, answer, style), answer.strip()
        generation = None
    run = forward_backward if backend == "fast" else _reference_pass
    gp = run(model, prompt_ids, answer_ids, groups=groups, per_group=per_group)
    timings["gradient"] = gp.seconds
    seq, norm = uncertainties(gp.token_log_probs, gp.grad_sq, gp.group_sq)
    return ScoreResult(answer_text, list(answer_ids), gp.token_log_probs, seq, norm, prediction, generation, timings)


def score_many(model: Any, tokenizer: Any, prompts: Sequence[str], answers: Sequence[str | None] | None = None,
               *, progress: bool = True, **kwargs: Any) -> list[ScoreResult]:
    """`score` for many (prompt, answer) pairs, with a progress bar. ``kwargs`` go to `score`."""
    from tqdm.auto import tqdm

    answers = list(answers) if answers is not None else [None] * len(prompts)
    if len(answers) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
    return [score(model, tokenizer, p, a, **kwargs)
            for p, a in tqdm(list(zip(prompts, answers)), desc="scoring", disable=not progress)]
