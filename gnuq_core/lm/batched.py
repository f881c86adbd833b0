"""Score B answers in one forward–backward pass, with the exact squared gradient norm of each.

`gnuq_core.lm.gradient.forward_backward` scores one (prompt, answer) pair per pass. Here the
B sequences are right-padded into one batch (the attention mask hides the padding, so a
real position never sees it) and one backward pass gives, for every answer b, log p_b and
``‖∇θ log p_b‖²`` — the norm of *its own* gradient, not of the batch's sum. Autograd only
ever forms the gradient of the sum, so no parameter gradient is formed at all: every
parameter's per-answer squared norm comes from the activations its module saw and the
gradients that reached its output, by one registered rule per module type (as Opacus
registers per-sample gradient rules):

* ``nn.Linear`` (:func:`linear_rule`): ghost norms per answer, ``‖G_bᵀX_b‖² = ⟨X_bX_bᵀ,
  G_bG_bᵀ⟩`` with the padded rows masked; a bias gets ``‖Σ_t g_bt‖²``;
* RMS norms (:func:`rms_norm_rule`, any module whose class name ends in ``RMSNorm``): the
  weight's gradient is ``Σ_t g_bt ⊙ x̂_bt`` with x̂ the normalised input, as the module
  computes it (Llama's ``w ⊙ x̂`` and Gemma's ``(1 + w) ⊙ x̂`` alike);
* ``nn.LayerNorm`` (:func:`layer_norm_rule`: weight ``Σ_t g_bt ⊙ x̂_bt``, bias ``Σ_t g_bt``),
  transformers' ``Conv1D`` (GPT-2: a linear layer, :func:`linear_rule`), a learned position
  embedding (:func:`embedding_rule`; OPT's, :func:`distinct_rows_rule`): GPT-2, OPT and
  Pythia batch too. The decoder is given one row of position ids per answer, so a position
  embedding sees the batch rather than one row shared by all answers;
* the input embedding: one row per position (a small leaf tensor), summed per answer over
  the positions of each distinct token; the LM head: ``‖δ_bᵀH_b‖²`` from T×T Gram matrices of
  the answer's own positions; a tied matrix adds the cross term, as in `forward_backward`.

A selected parameter whose module type has no rule is an error naming the type
(`register_norm_rule` adds one; `gnuq_core.lm.scoring.score_many` then scores one answer at a
time and says so in one `BatchingFallback` warning). A module that does not see one row per
answer (or the batch's positions flattened batch-major, as OPT's MLP does) is an error, never
a norm of mixed answers. Tests check every number against one-at-a-time `forward_backward` in
float64 on tiny Llama, Gemma-3, GPT-2, Pythia and OPT models (different lengths in one batch):
equal to 1e-6.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F

from gnuq_core.estimators.core import select, unique_params
from gnuq_core.lm.anatomy import decoder_of, device_of, in_eval_mode, resolve_groups
from gnuq_core.lm.decoding import check_length, check_token_ids
from gnuq_core.lm.gradient import GradientPass, gradient_pass, log_probs_and_logit_grad, vocab_product
from gnuq_core.lm.prompts import PromptError

__all__ = ["NormRule", "NORM_RULES", "register_norm_rule", "rule_for", "linear_rule", "rms_norm_rule",
           "layer_norm_rule", "embedding_rule", "distinct_rows_rule", "batched_forward_backward", "batchable"]

NormRule = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]
"""``rule(module, input, output_grad, mask) -> {parameter attribute: per-answer squared norms (B,)}``;
``input`` and ``output_grad`` have the batch first, ``mask`` (B, T) marks the real positions."""

NORM_RULES: dict[str | type, NormRule] = {}
"""Per-answer norm rules by module class name or class (`register_norm_rule`); `rule_for` looks them up."""

_FIX = "run the model in float32 (dtype='float32') and check the prompts/answers for unusual input"


def register_norm_rule(*keys: str | type) -> Callable[[NormRule], NormRule]:
    """Register ``rule`` for modules of these classes.

    A class name is a suffix match (``"RMSNorm"`` covers ``LlamaRMSNorm`` and
    ``Gemma3RMSNorm``); a class (``torch.nn.LayerNorm``) covers that class and its subclasses
    that keep its ``forward`` (a subclass that computes something else needs its own rule).
    """
    def deco(rule: NormRule) -> NormRule:
        for key in keys:
            NORM_RULES[key] = rule
        return rule
    return deco


def rule_for(module: torch.nn.Module) -> NormRule | None:
    """The registered rule of ``module``'s class: its exact name first, then a registered class
    whose ``forward`` it runs, then the longest registered name suffix."""
    cls = type(module)
    name = cls.__name__
    if name in NORM_RULES:
        return NORM_RULES[name]
    for key, rule in NORM_RULES.items():
        if isinstance(key, type) and issubclass(cls, key) and cls.forward is key.forward:
            return rule
    matches = [k for k in NORM_RULES if isinstance(k, str) and name.endswith(k)]
    return NORM_RULES[max(matches, key=len)] if matches else None


def _float(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _per_answer(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``x`` as (B, rows, features) with the padded positions' rows zeroed (``x`` is (B, T, …, f)
    or (B, heads, T, f))."""
    b, f = x.shape[0], x.shape[-1]
    if x.dim() == 3 and x.shape[1] == mask.shape[1]:
        x = x * mask[:, :, None].to(x.dtype)
    return x.reshape(b, -1, f)


@register_norm_rule("Linear")
def linear_rule(module: torch.nn.Module, x: torch.Tensor, g: torch.Tensor, mask: torch.Tensor
                ) -> dict[str, torch.Tensor]:
    """Ghost norms per answer: ``‖G_bᵀX_b‖² = ⟨X_bX_bᵀ, G_bG_bᵀ⟩`` (and ``‖Σ_t g_bt‖²`` for a bias)."""
    xb, gb = _float(_per_answer(x, mask)), _float(_per_answer(g, mask))
    out = {"weight": ((xb @ xb.transpose(1, 2)) * (gb @ gb.transpose(1, 2))).sum((1, 2), dtype=torch.float64)}
    if getattr(module, "bias", None) is not None:
        out["bias"] = (gb.sum(1, dtype=torch.float64) ** 2).sum(1)
    return out


@register_norm_rule("RMSNorm")
def rms_norm_rule(module: torch.nn.Module, x: torch.Tensor, g: torch.Tensor, mask: torch.Tensor
                  ) -> dict[str, torch.Tensor]:
    """``Σ_t g_bt ⊙ x̂_bt`` per answer, with x̂ the input normalised as the module does it
    (its ``_norm`` where it has one, Gemma; else in float32 and cast back, Llama)."""
    if hasattr(module, "_norm"):
        xhat = module._norm(x.float())
    else:
        xf = x.to(torch.float32)
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", 1e-6))
        xhat = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    grad = (_per_answer(g.to(xhat.dtype) * xhat, mask)).sum(1, dtype=torch.float64)
    return {"weight": (grad ** 2).sum(1)}


@register_norm_rule(torch.nn.LayerNorm)
def layer_norm_rule(module: torch.nn.Module, x: torch.Tensor, g: torch.Tensor, mask: torch.Tensor
                    ) -> dict[str, torch.Tensor]:
    """``Σ_t g_bt ⊙ x̂_bt`` (weight) and ``Σ_t g_bt`` (bias) per answer, with x̂ the input
    standardised over ``normalized_shape`` as ``nn.LayerNorm`` does it (GPT-2, OPT, Pythia)."""
    shape = tuple(module.normalized_shape)
    xhat = F.layer_norm(x, shape, eps=module.eps)
    flat = (x.shape[0], x.shape[1], -1)
    out = {}
    if module.weight is not None:
        grad = _per_answer((g.to(xhat.dtype) * xhat).reshape(flat), mask).sum(1, dtype=torch.float64)
        out["weight"] = (grad ** 2).sum(1)
    if module.bias is not None:
        out["bias"] = (_per_answer(g.reshape(flat), mask).sum(1, dtype=torch.float64) ** 2).sum(1)
    return out


@register_norm_rule(torch.nn.Embedding)
def embedding_rule(module: torch.nn.Module, x: torch.Tensor, g: torch.Tensor, mask: torch.Tensor
                   ) -> dict[str, torch.Tensor]:
    """An embedding other than the input one (GPT-2's learned positions): the gradient of row r
    is ``Σ_{t: x_bt = r} g_bt``, so ``‖G_b‖² = Σ_{t,s: x_bt = x_bs} ⟨g_bt, g_bs⟩`` over the real
    positions (the padding index gets no gradient)."""
    if x.dim() != 2 or x.shape != mask.shape:
        raise ValueError(f"batched norms: {type(module).__name__} was called on indices of shape {tuple(x.shape)}, "
                         f"not one row per answer {tuple(mask.shape)}; score one answer at a time")
    real = mask.bool()
    if module.padding_idx is not None:
        real = real & (x != module.padding_idx)
    same = (x[:, :, None] == x[:, None, :]) & real[:, :, None] & real[:, None, :]
    gb = _float(g).double()
    return {"weight": ((gb @ gb.transpose(1, 2)) * same).sum((1, 2))}


@register_norm_rule("OPTLearnedPositionalEmbedding")
def distinct_rows_rule(module: torch.nn.Module, x: torch.Tensor, g: torch.Tensor, mask: torch.Tensor
                       ) -> dict[str, torch.Tensor]:
    """A learned position embedding whose positions are distinct within an answer (OPT's, fed
    ``position_ids`` 0, 1, …): ``‖G_b‖² = Σ_t ‖g_bt‖²`` over the real positions."""
    gb = _per_answer(_float(g), mask).double()
    return {"weight": (gb * gb).sum((1, 2))}


def _register_conv1d() -> None:
    """transformers' ``Conv1D`` (GPT-2's attention and MLP) is a linear layer with a transposed
    weight: the same ghost norms (`linear_rule`)."""
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - transformers is a dependency
        return
    register_norm_rule(Conv1D)(linear_rule)


_register_conv1d()


def _batch_shape(x: torch.Tensor | None, y: Any, mask: torch.Tensor) -> tuple[int, ...] | None:
    """``(B,)`` if the module's input and output have the batch first, ``(B, T)`` if both are the
    batch's positions flattened batch-major (OPT's MLP), None if neither (a module that mixes
    the answers' rows cannot have its norm split per answer)."""
    if x is None or not isinstance(y, torch.Tensor) or x.dim() == 0 or y.dim() == 0:
        return None
    b, t = mask.shape
    if x.shape[0] == y.shape[0] == b:
        return (b,)
    if x.shape[0] == y.shape[0] == b * t:
        return (b, t)
    return None


@contextmanager
def _rule_hooks(modules: Mapping[torch.nn.Module, list[tuple[int, str]]], mask: torch.Tensor
                ) -> Iterator[dict[int, torch.Tensor]]:
    """Within the block, each module's rule adds its per-answer squared norms to ``sq[id(param)]``
    when the gradient of its output arrives."""
    sq: dict[int, torch.Tensor] = {}
    called: set[int] = set()
    handles = []

    def hook_for(mod: torch.nn.Module, params: list[tuple[int, str]], rule: NormRule) -> Callable[..., Any]:
        def forward_hook(m: torch.nn.Module, inputs: tuple[torch.Tensor, ...], y: torch.Tensor) -> torch.Tensor | None:
            if not torch.is_grad_enabled():
                return None
            if id(m) in called:
                raise RuntimeError(f"batched norms: the module {type(m).__name__} was called twice in one pass; "
                                   "its per-answer norm would miss the cross terms")
            called.add(id(m))
            x = inputs[0].detach() if inputs and isinstance(inputs[0], torch.Tensor) else None
            shape = _batch_shape(x, y, mask)
            if shape is None:
                raise RuntimeError(f"batched norms: the module {type(m).__name__} did not see one row per answer "
                                   f"(batch of {mask.shape[0]}); its per-answer norm cannot be split: score one "
                                   "answer at a time (gnuq_core.lm.scoring.score_many with batch_size=1)")
            if not y.requires_grad:  # an input that carries no gradient (position indices): start one here
                y = y.detach().requires_grad_(True)

            def grad_hook(g: torch.Tensor) -> None:
                norms = rule(m, x.reshape(*shape, *x.shape[1:]) if len(shape) == 2 else x,
                             g.detach().reshape(*shape, *g.shape[1:]) if len(shape) == 2 else g.detach(), mask)
                for k, attr in params:
                    v = norms[attr]
                    sq[k] = sq[k] + v if k in sq else v

            y.register_hook(grad_hook)
            return y
        return forward_hook

    try:
        for mod, params in modules.items():
            rule = rule_for(mod)
            handles.append(mod.register_forward_hook(hook_for(mod, params, rule)))
        yield sq
    finally:
        for h in handles:
            h.remove()


def _takes_positions(decoder: torch.nn.Module) -> bool:
    """Whether the decoder takes ``position_ids``: given one row per answer, a learned position
    embedding (GPT-2's, OPT's) sees the batch, not one row shared by every answer."""
    try:
        return "position_ids" in inspect.signature(decoder.forward).parameters
    except (TypeError, ValueError):
        return False


def _owners(model: Any, wanted: set[int]) -> dict[torch.nn.Module, list[tuple[int, str]]]:
    """The module owning each wanted parameter, with the attribute it sits in; an error for a
    parameter shared by several modules or a module type without a rule."""
    found: dict[int, list[tuple[torch.nn.Module, str]]] = {}
    for mod in model.modules():
        for attr, p in mod.named_parameters(recurse=False):
            if id(p) in wanted:
                found.setdefault(id(p), []).append((mod, attr))
    out: dict[torch.nn.Module, list[tuple[int, str]]] = {}
    for k in wanted:
        owners = found.get(k, [])
        if len(owners) != 1:
            raise ValueError(f"batched norms: a parameter is used by {len(owners)} modules; score one answer at a "
                             "time (gnuq_core.lm.scoring.score_many)")
        mod, attr = owners[0]
        if rule_for(mod) is None:
            raise ValueError(f"batched norms: no per-answer norm rule for {type(mod).__name__}: register one with "
                             "gnuq_core.lm.batched.register_norm_rule, or score one answer at a time")
        out.setdefault(mod, []).append((k, attr))
    return out


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
    tied = w_in is w_out
    need_rows, need_head = id(w_in) in selected, id(w_out) in selected
    need_bias = bias is not None and id(bias) in selected
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
        with _rule_hooks(owners, mask) as sq, torch.enable_grad():
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
        head_sq, emb_sq, cross, bias_sq = _head_and_embedding(ids, lengths, ex, dz, h_ans.detach(), leaf, old_pad,
                                                              need_head or need_bias, need_rows and tied, need_rows)
        if tied and need_rows:
            per[id(w_in)] = [h + 2 * c + e for h, c, e in zip(head_sq, cross, emb_sq)]
        else:
            if need_rows:
                per[id(w_in)] = emb_sq
            if need_head:
                per[id(w_out)] = head_sq
        if need_bias:
            per[id(bias)] = bias_sq
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


def _head_and_embedding(ids: torch.Tensor, lengths: list[int], ex: torch.Tensor, dz: torch.Tensor, h: torch.Tensor,
                        leaf: torch.Tensor, pad: int | None, need_head: bool, need_cross: bool, need_rows: bool
                        ) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per answer: ``‖δ_bᵀH_b‖²`` of the head, ``‖G_e,b‖²`` of the embedding rows, their cross
    term ``⟨δ_bᵀH_b, G_e,b⟩`` and the head bias's ``‖Σ_t δ_bt‖²`` (zeros where not needed)."""
    b, t_max = ids.shape
    zeros = [0.0] * b
    head_sq, emb_sq, cross, bias_sq = list(zeros), list(zeros), list(zeros), list(zeros)
    grad = leaf.grad.reshape(b, t_max, -1) if leaf.grad is not None else None
    for i in range(b):
        rows = ex == i
        d_i, h_i = dz[rows].double(), h[rows].double()
        if need_head:
            head_sq[i] = float(((d_i @ d_i.T) * (h_i @ h_i.T)).sum())
            bias_sq[i] = float((d_i.sum(0) ** 2).sum())
        if need_rows and grad is not None:
            tok = ids[i, :lengths[i]]
            uniq, inv = torch.unique(tok, return_inverse=True)
            r = torch.zeros(len(uniq), grad.shape[-1], dtype=torch.float64, device=grad.device)
            r.index_add_(0, inv, grad[i, :lengths[i]].double())
            if pad is not None:
                r[uniq == pad] = 0.0  # the embedding lookup gives the padding index no gradient
            emb_sq[i] = float((r * r).sum())
            if need_cross:
                cross[i] = float(((d_i[:, uniq.to(d_i.device)].T @ h_i) * r.to(d_i.device)).sum())
    return head_sq, emb_sq, cross, bias_sq
