"""The forward–backward pass: log p of an answer and ‖∇θ log p‖², efficiently.

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
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from gnuq_core.estimators.hooks import hooked_sq_norms, raise_if_non_finite
from gnuq_core.lm.anatomy import (
    _decoder,
    _device,
    _logit_transform,
    _select,
    _unique_params,
    _up,
    resolve_groups,
)
from gnuq_core.lm.decoding import check_length
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
