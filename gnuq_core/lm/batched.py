"""Score B answers in one forward–backward pass, with the exact squared gradient norm of each.

`gnuq_core.lm.gradient.forward_backward` scores one (prompt, answer) pair per pass. Here the
B sequences are right-padded into one batch (the attention mask hides the padding, so a
real position never sees it) and one backward pass gives, for every answer b, log p_b and
``‖∇θ log p_b‖²`` — the norm of *its own* gradient, not of the batch's sum. Autograd only
ever forms the gradient of the sum, so no parameter gradient is formed at all: every
parameter's per-answer squared norm comes from the activations its module saw and the
gradients that reached its output, by the one registry of norm rules per module type
(`gnuq_core.estimators.norm_rules`: linear layers, RMS and layer norms, learned position
embeddings), which the single answer's pass uses too. The decoder is given one row of position
ids per answer, so a position embedding sees the batch rather than one row shared by all
answers. The input embedding (one row per position, a small leaf tensor, summed per answer over
the positions of each distinct token) and the LM head (``‖δ_bᵀH_b‖²`` from the answer's own
A×A Gram matrices; a tied matrix adds the cross term) are
`gnuq_core.lm.gradient.head_and_embedding_sq`, per answer, as for one answer.

A selected parameter whose module type has no rule is an error naming the type
(`gnuq_core.estimators.norm_rules.register_norm_rule` adds one; `gnuq_core.lm.scoring.score_many`
then scores one answer at a time and says so in one `BatchingFallback` warning). A module that does not see one row per
answer (or the batch's positions flattened batch-major, as OPT's MLP does) is an error, never
a norm of mixed answers. Tests check every number against one-at-a-time `forward_backward` in
float64 on tiny Llama, Gemma-3, GPT-2, Pythia and OPT models (different lengths in one batch):
equal to 1e-6.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gnuq_core.estimators.core import select, unique_params
from gnuq_core.estimators.norm_rules import choose_rules, owners_of, rule_hooks
from gnuq_core.lm.anatomy import decoder_of, device_of, in_eval_mode, resolve_groups
from gnuq_core.lm.decoding import check_length, check_token_ids
from gnuq_core.lm.gradient import (GradientPass, gradient_pass, head_and_embedding_sq, log_probs_and_logit_grad,
                                   vocab_product)
from gnuq_core.lm.prompts import PromptError

__all__ = ["batched_forward_backward", "batchable"]

_FIX = "run the model in float32 (dtype='float32') and check the prompts/answers for unusual input"


def _takes_positions(decoder: torch.nn.Module) -> bool:
    """Whether the decoder takes ``position_ids``: given one row per answer, a learned position
    embedding (GPT-2's, OPT's) sees the batch, not one row shared by every answer."""
    try:
        return "position_ids" in inspect.signature(decoder.forward).parameters
    except (TypeError, ValueError):
        return False


def _owners(model: Any, wanted: set[int]) -> dict[torch.nn.Module, list[tuple[int, str]]]:
    """The module owning each wanted parameter, with the attribute it sits in (`choose_rules`);
    an error for a parameter shared by several modules or a module type without a rule."""
    by_rule, rest = choose_rules(model, wanted)
    if rest:
        holders = owners_of(model, rest[:1])[rest[0]]
        if len(holders) != 1:
            raise ValueError(f"batched norms: a parameter is used by {len(holders)} modules; score one answer at a "
                             "time (gnuq_core.lm.scoring.score_many)")
        raise ValueError(f"batched norms: no per-answer norm rule for {type(holders[0][0]).__name__}: register one "
                         "with gnuq_core.estimators.norm_rules.register_norm_rule, or score one answer at a time")
    return by_rule


def batchable(model: Any, groups: str | Sequence[str] | Mapping[str, Any] | None = None) -> str | None:
    """None if `batched_forward_backward` can score ``model`` over ``groups`` (every selected
    parameter sits in one module whose type has a norm rule), else why not, in words."""
    params, names = unique_params(model)
    members = select(params, names, resolve_groups(model, groups))
    selected = {k for m in members.values() for k in m}
    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    special = {id(emb.weight), id(head.weight)} | ({id(head.bias)} if getattr(head, "bias", None) is not None else set())
    try:
        _owners(model, {k for k in selected if k not in special})
    except ValueError as err:
        return str(err).removeprefix("batched norms: ")
    return None


def batched_forward_backward(model: Any, prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]], *,
                             groups: str | Sequence[str] | Mapping[str, Any] | None = None,
                             per_group: bool = False) -> list[GradientPass]:
    """`forward_backward` of B (prompt, answer) pairs in one pass: a `GradientPass` per pair,
    each with its own ``‖∇ log p‖²`` (see the module docstring).

    The model is left as it was (parameters, ``requires_grad`` flags, ``.grad``, train/eval
    mode: a model in train mode is switched to eval mode for the pass and back). Raises as
    `forward_backward` does (empty or too long inputs, token ids outside the vocabulary,
    ``torch.inference_mode()``, non-finite values), and `ValueError` for a parameter whose
    module type has no norm rule.
    """
    if torch.is_inference_mode_enabled():
        raise RuntimeError("batched_forward_backward was called inside torch.inference_mode(), where no gradient "
                           "can be computed: call it outside that block")
    if len(prompts) != len(answers):
        raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
    if not prompts:
        return []
    return _batched(model, [list(p) for p in prompts], [list(a) for a in answers], groups, per_group)


@in_eval_mode
def _batched(model: Any, prompts: list[list[int]], answers: list[list[int]], groups: Any,
             per_group: bool) -> list[GradientPass]:
    started = time.perf_counter()
    for i, (p, a) in enumerate(zip(prompts, answers)):
        if not a:
            raise PromptError(f"answer {i} has zero tokens: nothing to score")
        if not p:
            raise PromptError(f"prompt {i} has zero tokens: pass a non-empty prompt")
        check_token_ids(model, p, f"prompt {i}")
        check_token_ids(model, a, f"answer {i}")
        check_length(model, len(p), len(a))
    spec = resolve_groups(model, groups)
    params, names = unique_params(model)
    members = select(params, names, spec)
    selected = {k for m in members.values() for k in m}
    emb_mod, head = model.get_input_embeddings(), model.get_output_embeddings()
    w_in, w_out = emb_mod.weight, head.weight
    bias = getattr(head, "bias", None)
    need_rows = id(w_in) in selected
    special = {id(w_in), id(w_out)} | ({id(bias)} if bias is not None else set())
    owners = _owners(model, {k for k in selected if k not in special})

    dev = device_of(model)
    b, lengths = len(prompts), [len(p) + len(a) for p, a in zip(prompts, answers)]
    t_max = max(lengths)
    ids = torch.zeros(b, t_max, dtype=torch.long, device=dev)
    mask = torch.zeros(b, t_max, dtype=torch.long, device=dev)
    for i, (p, a) in enumerate(zip(prompts, answers)):
        ids[i, :lengths[i]] = torch.tensor(p + a, device=dev)
        mask[i, :lengths[i]] = 1
    rows_of = [(i, t) for i, (p, a) in enumerate(zip(prompts, answers)) for t in range(len(p) - 1, lengths[i] - 1)]
    ex = torch.tensor([i for i, _ in rows_of], device=dev)
    pos = torch.tensor([t for _, t in rows_of], device=dev)
    targets = ids[ex, pos + 1]
    saved_flags = {k: p.requires_grad for k, p in params.items()}
    try:
        for p in params.values():
            p.requires_grad_(False)
        with rule_hooks(owners, mask) as sq, torch.enable_grad():
            leaf = w_in.detach()[ids.reshape(-1)].clone().requires_grad_(bool(owners) or need_rows)
            old_pad = getattr(emb_mod, "padding_idx", None)
            emb_mod.padding_idx = None
            try:
                emb = torch.func.functional_call(emb_mod, {"weight": leaf},
                                                 (torch.arange(b * t_max, device=dev).reshape(b, t_max),))
            finally:
                emb_mod.padding_idx = old_pad
            decoder = decoder_of(model)
            extra = {"position_ids": torch.arange(t_max, device=dev).expand(b, t_max)} if _takes_positions(decoder) \
                else {}
            hidden = decoder(inputs_embeds=emb, attention_mask=mask, use_cache=False, **extra).last_hidden_state
            h_ans = hidden[ex, pos]
            with torch.no_grad():
                z = F.linear(h_ans.detach(), w_out.detach(), bias.detach() if bias is not None else None)
            tok_lp, dz = log_probs_and_logit_grad(model, z, targets)
            if h_ans.requires_grad:
                dh = vocab_product(dz.to(w_out.dtype), w_out.detach())
                torch.autograd.backward(h_ans, grad_tensors=dh.to(h_ans.dtype))
        per = {k: v.tolist() for k, v in sq.items()}
        grad = leaf.grad.reshape(b, t_max, -1) if leaf.grad is not None else None
        for i in range(b):  # the embedding rows of answer i's distinct tokens, and the head's pieces
            tokens, inv = torch.unique(ids[i, :lengths[i]], return_inverse=True)
            r = None
            if need_rows:
                r = torch.zeros(len(tokens), w_in.shape[1], dtype=torch.float64, device=dev)
                if grad is not None:
                    r.index_add_(0, inv, grad[i, :lengths[i]].double())
                if old_pad is not None:
                    r[tokens == old_pad] = 0.0  # the embedding lookup gives the padding index no gradient
            rows = ex == i
            for k, v in head_and_embedding_sq(model, dz[rows], h_ans.detach()[rows], r, tokens, selected).items():
                per.setdefault(k, [0.0] * b)[i] = float(v)
    finally:
        for k, p in params.items():
            p.requires_grad_(saved_flags[k])
    out = []
    lp = tok_lp.double().tolist()
    seconds = (time.perf_counter() - started) / b
    for i in range(b):
        token_log_probs = [v for v, e in zip(lp, ex.tolist()) if e == i]
        if not math.isfinite(math.fsum(token_log_probs)):
            raise FloatingPointError(f"log p of answer {i} is {math.fsum(token_log_probs)}; {_FIX}")
        out.append(gradient_pass(token_log_probs, {k: float(v[i]) for k, v in per.items()}, selected, names, members,
                                 per_group, seconds, _FIX))
    return out
