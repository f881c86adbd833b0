"""The forward–backward pass: log p of an answer and ‖∇θ log p‖², efficiently.

Efficient backward path (`forward_backward`, ``backend="fast"``):

* the LM head is applied only at the T answer positions: the decoder's hidden states are
  sliced *before* the vocabulary projection (Gemma-3 has a 262k vocabulary);
* exact ghost norms for the decoder's linear layers, by the one norm-rule registry
  (`gnuq_core.estimators.norm_rules`, the batched pass's too, with B = 1): with layer input
  X (T x d) and output gradient G (T x k), ``||G^T X||^2 = <X X^T, G G^T>`` costs
  T^2 (d + k) instead of T d k, so while T < d k / (d + k) (per layer; ``ghost=`` forces
  either way) the weight stays ``requires_grad=False`` and autograd skips its
  weight-gradient GEMM; X X^T is shared by q/k/v and by gate/up;
* every other decoder parameter (norm weights, Linear weights past the threshold)
  gets its squared norm in float64 from a post-accumulate-grad hook that frees the
  gradient at once (the model's own ``.grad`` is saved and restored; nothing else keeps a
  parameter-sized gradient); per-parameter and per-group norms (any groups, also
  ``"per_block"``) come from this one pass;
* ``d log p / d logits`` is formed directly, 1 - p_target as the sum of the other
  probabilities (through autograd's log-softmax it is 1 minus a number near 1, which
  lost four digits in float32 for a 1-token answer with p = 0.9996), and the product of
  those T x V gradients with the V x d head sums over the vocabulary in float64 chunks
  for T <= 8 rows (a float32 matrix-vector product: 4e-5 relative error);
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
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from gnuq_core.estimators import torch_uncertainty
from gnuq_core.estimators.core import select, unique_params
from gnuq_core.estimators.hooks import hooked_sq_norms, raise_if_non_finite
from gnuq_core.estimators.norm_rules import GHOST_MODES, choose_rules, rule_hooks
from gnuq_core.lm.anatomy import decoder_of, device_of, in_eval_mode, logit_transform, resolve_groups, upcast
from gnuq_core.lm.decoding import check_length, check_token_ids
from gnuq_core.lm.prompts import PromptError

_FIX = "run the model in float32 (dtype='float32') and check the prompt/answer for unusual input"


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



def forward_backward(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int], *,
                     groups: str | Sequence[str] | Mapping[str, Any] | None = None,
                     per_group: bool = False, ghost: str = "auto") -> GradientPass:
    """log p of the answer tokens and ``||grad log p||^2``, efficiently (see module docstring).

    Parameters
    ----------
    model : transformers causal LM
        Its parameters, ``requires_grad`` flags, ``.grad`` and train/eval mode are unchanged
        on return. A model in train mode is switched to eval mode for the pass (dropout
        would make the number random) and back.
    prompt_ids, answer_ids : sequence of int
        Token ids; the answer must have at least one token.
    groups, per_group
        Which parameters count (see `resolve_groups`) and whether to report per group.
    ghost : {"auto", "always", "never"}
        How the decoder's parameters with a registered norm rule get their norms (linear
        layers, norm weights: `gnuq_core.estimators.norm_rules`): ``"auto"`` takes a rule where
        it is cheaper than the explicit gradient (ghost norms of a linear layer while the
        sequence is shorter than d·k/(d+k)), ``"always"`` / ``"never"`` force the rules /
        explicit gradients. Same numbers either way.

    Raises
    ------
    FloatingPointError
        If log p or a gradient is NaN/inf; names the parameter and its group.
    RuntimeError
        Inside ``torch.inference_mode()``, where no gradient can be computed.
    PromptError
        For an empty prompt or answer, or a token id outside the vocabulary.
    """
    if torch.is_inference_mode_enabled():
        raise RuntimeError("forward_backward was called inside torch.inference_mode(), where no gradient can be "
                           "computed: call it outside that block (torch.no_grad() is fine: the pass turns "
                           "gradients on for itself)")
    return _forward_backward(model, prompt_ids, answer_ids, groups=groups, per_group=per_group, ghost=ghost)


@in_eval_mode
def _forward_backward(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int], *,
                      groups: str | Sequence[str] | Mapping[str, Any] | None, per_group: bool,
                      ghost: str) -> GradientPass:
    """`forward_backward` in eval mode."""
    started = time.perf_counter()
    if ghost not in GHOST_MODES:
        raise ValueError(f"ghost={ghost!r}: use one of {', '.join(map(repr, GHOST_MODES))}")
    if len(answer_ids) == 0:
        raise PromptError("the answer has zero tokens: nothing to score")
    if len(prompt_ids) == 0:
        raise PromptError("the prompt has zero tokens: pass a non-empty prompt")
    check_token_ids(model, prompt_ids, "the prompt")
    check_token_ids(model, answer_ids, "the answer")
    check_length(model, len(prompt_ids), len(answer_ids))
    spec = resolve_groups(model, groups)
    params, names = unique_params(model)
    members = select(params, names, spec)
    selected = {k for m in members.values() for k in m}

    emb_mod = model.get_input_embeddings()
    head = model.get_output_embeddings()
    w_in, w_out = emb_mod.weight, head.weight
    bias = getattr(head, "bias", None)
    need_rows = id(w_in) in selected
    special = {id(w_in), id(w_out)} | ({id(bias)} if bias is not None else set())
    body = [k for k in params if k in selected and k not in special]

    dev = device_of(model)
    ids = torch.tensor(list(prompt_ids) + list(answer_ids), device=dev)
    n_p = len(prompt_ids)
    targets = ids[n_p:]
    by_rule, explicit = choose_rules(model, body, len(ids), ghost)
    with hooked_sq_norms(params, explicit) as norms, rule_hooks(by_rule, torch.ones_like(ids)[None]) as ruled:
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
            h_ans = decoder_of(model)(inputs_embeds=emb, use_cache=False).last_hidden_state[0, n_p - 1:-1]
        with torch.no_grad():
            z = F.linear(h_ans.detach(), w_out.detach(), bias.detach() if bias is not None else None)
        tok_lp, dz = log_probs_and_logit_grad(model, z, targets)
        token_log_probs = tok_lp.double().tolist()
        log_p_value = math.fsum(token_log_probs)
        if not math.isfinite(log_p_value):
            raise FloatingPointError(f"log p of the answer is {log_p_value}; {_FIX}")
        if h_ans.requires_grad:
            dh = vocab_product(dz.to(w_out.dtype), w_out.detach())
            torch.autograd.backward(h_ans, grad_tensors=dh.to(h_ans.dtype))
        sq = {**norms.sq, **{k: v[0] for k, v in ruled.items()}}
        r = (rows.grad if rows.grad is not None else torch.zeros_like(rows)) if need_rows else None
        sq.update(head_and_embedding_sq(model, dz, h_ans.detach(), r, uniq, selected))
        sq_f = {k: float(v) for k, v in sq.items()}
    return gradient_pass(token_log_probs, sq_f, selected, names, members, per_group, time.perf_counter() - started,
                         _FIX)


def gradient_pass(token_log_probs: list[float], sq: Mapping[int, float], selected: set[int],
                  names: Mapping[int, list[str]], members: Mapping[str, list[int]], per_group: bool, seconds: float,
                  fix: str) -> GradientPass:
    """The `GradientPass` of one answer from its squared norms per parameter tensor ``sq``
    (by ``id``): the total over ``selected`` and per group, summed with ``math.fsum``;
    raises `FloatingPointError` naming the first non-finite parameter and its group
    (with ``fix``: what to do). Shared by `forward_backward` and the batched pass."""
    raise_if_non_finite(sq, selected, names, members, fix)
    total = math.fsum(sq.get(k, 0.0) for k in selected)
    group_sq = {g: math.fsum(sq.get(k, 0.0) for k in m) for g, m in members.items()} if per_group else {}
    return GradientPass(token_log_probs, total, group_sq, {names[k][0]: sq.get(k, 0.0) for k in selected}, seconds)


def head_and_embedding_sq(model: Any, dz: torch.Tensor, h: torch.Tensor, r: torch.Tensor | None,
                          tokens: torch.Tensor, selected: set[int]) -> dict[int, torch.Tensor]:
    """One answer's squared norms of the input embedding, the LM head (tied or not) and its bias,
    by ``id`` of each selected one, in float64 (see the module docstring).

    ``dz`` (A×V): d log p / d logits at the answer's A positions; ``h`` (A×d): the hidden states
    there; ``r`` (U×d): the gradient of the embedding rows of the answer's U distinct input
    ``tokens`` (None when the embedding is not selected)."""
    w_in, head = model.get_input_embeddings().weight, model.get_output_embeddings()
    bias = getattr(head, "bias", None)
    out: dict[int, torch.Tensor] = {}
    need_head = id(head.weight) in selected
    if need_head:
        hd = h.double()
        out[id(head.weight)] = ((dz @ dz.T).double() * (hd @ hd.T)).sum()
    if r is not None and id(w_in) in selected:
        rd = r.double()
        emb_sq = (rd * rd).sum()
        if w_in is head.weight:  # tied: ‖G_h + G_e‖² = ‖G_h‖² + 2⟨G_h, G_e⟩ + ‖G_e‖²
            cross = ((dz[:, tokens.to(dz.device)].double().T @ h.double()) * rd.to(dz.device)).sum()
            emb_sq = out[id(w_in)] + 2 * cross + emb_sq.to(dz.device)
        out[id(w_in)] = emb_sq
    if bias is not None and id(bias) in selected:
        out[id(bias)] = (dz.sum(0, dtype=torch.float64) ** 2).sum()
    return out


def vocab_product(dz: torch.Tensor, w: torch.Tensor, chunk: int = 512, max_rows: int = 8) -> torch.Tensor:
    """``dz @ w`` (T x V times V x d) with the sum over the vocabulary accurate for few rows.

    With one or two rows the product is a matrix-vector product that sums the ~50k-260k
    terms in float32 one after the other: 4e-5 relative error measured on SmolLM2 (a
    many-row GEMM: 6e-7). For up to `max_rows` rows the vocabulary is cut into chunks of
    `chunk` entries, each chunk multiplied in float32 (one batched product) and the
    partial sums added in float64: 1.6e-7, and no slower than the plain product.
    """
    t, v = dz.shape
    if t > max_rows or v < 2 * chunk or dz.dtype == torch.float64:
        with torch.no_grad():
            return dz @ w
    n = v // chunk * chunk
    with torch.no_grad():
        parts = torch.bmm(dz[:, :n].reshape(t, n // chunk, chunk).transpose(0, 1), w[:n].reshape(n // chunk, chunk, -1))
        out = parts.sum(0, dtype=torch.float64)
        if n < v:
            out += (dz[:, n:] @ w[n:]).double()
    return out.to(dz.dtype)


def log_probs_and_logit_grad(model: Any, z: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log p and ``d log p / d z`` for the raw head outputs z (T x V), exactly.

    Through autograd, ``d log p / d z_target = 1 - p_target`` is formed as 1 minus a number
    close to 1: in float32 a 1-token answer with p = 0.9996 loses four digits (+1.4e-4
    relative in ``||grad log p||^2``). Here it is the sum of the other tokens' probabilities,
    accumulated in float64. The architecture's logit transforms (softcap, scaling) are
    differentiated by autograd on the T x V logits only.
    """
    tgt = targets[:, None]
    with torch.enable_grad():
        leaf = z.detach().requires_grad_(True)
        zt = upcast(logit_transform(model, leaf))
    transformed = zt is not leaf
    zd = zt.detach()
    lse = torch.logsumexp(zd, dim=-1, keepdim=True)
    tok = (zd.gather(1, tgt) - lse)[:, 0]
    p = torch.exp(zd - lse)
    p.scatter_(1, tgt, 0.0)
    rest = p.sum(1, keepdim=True, dtype=torch.float64)  # 1 - p_target, without cancellation
    dz = p.neg_().scatter_(1, tgt, rest.to(p.dtype))
    if transformed:
        dz = torch.autograd.grad(zt, leaf, dz)[0]
    return tok, dz


@in_eval_mode
def reference_pass(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int], *,
                    groups: Any, per_group: bool) -> GradientPass:
    """Plain path: full logits, full gradients, via `estimators.torch_uncertainty`."""
    started = time.perf_counter()
    check_length(model, len(prompt_ids), len(answer_ids))
    dev = device_of(model)
    ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=dev)
    n_p = len(prompt_ids)
    box: dict[str, Any] = {}

    def log_prob_fn(m: Any) -> torch.Tensor:
        logits = m(input_ids=ids, use_cache=False).logits[0, n_p - 1:-1]
        lp = torch.log_softmax(upcast(logits), -1).gather(1, ids[0, n_p:, None])[:, 0]
        box["tok"] = lp.detach().double().tolist()
        return lp.sum()

    spec = resolve_groups(model, groups)
    u = torch_uncertainty(model, log_prob_fn, groups=spec, per_group=per_group)
    return GradientPass(box["tok"], 10.0 ** u.log10_grad_log_p_sq if u.log10_grad_log_p_sq > -math.inf else 0.0,
                        dict(u.group_sq_norms), {}, time.perf_counter() - started)


@in_eval_mode
def answer_log_probs(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int]) -> list[float]:
    """Per-token log p of an answer (forward only, LM head at answer positions only)."""
    with torch.no_grad():
        dev = device_of(model)
        ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=dev)
        h = decoder_of(model)(input_ids=ids, use_cache=False).last_hidden_state[0, len(prompt_ids) - 1:-1]
        z = logit_transform(model, model.get_output_embeddings()(h))
        return torch.log_softmax(upcast(z), -1).gather(1, ids[0, len(prompt_ids):, None])[:, 0].double().tolist()
