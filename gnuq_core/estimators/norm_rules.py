"""The one gradient-norm engine: a registry of per-layer rules that give each answer's squared
parameter norms without forming any parameter gradient.

For B answers run as one batch, autograd only ever forms the gradient of their sum; the norm
of *each answer's own* gradient is a function of what a module saw (its input) and of the
gradient that reached its output. One rule per module type computes it, as Opacus registers one
per-sample rule per layer type. Every exact pass uses this registry: the single answer's pass
(`gnuq_core.lm.gradient.forward_backward`, B = 1), the batched pass
(`gnuq_core.lm.batched.batched_forward_backward`) and the benchmark's floor
(`gnuq_core.lm.floor.activation_backward`).

The rules (``x`` a module's input, ``g`` the gradient at its output, padded positions masked):

* ``nn.Linear`` and transformers' ``Conv1D`` (`LINEAR`): ghost norms, ``‖G_bᵀX_b‖² =
  ⟨X_bX_bᵀ, G_bG_bᵀ⟩``, the input's Gram matrix formed at the forward pass and shared by the
  layers called one after the other on one input tensor (q/k/v, gate/up); a bias ``‖Σ_t g_bt‖²``.
  For one answer of T rows the ghost norm costs T²(d + k) against T·d·k for the weight
  gradient: `choose_rules` takes it while T < d·k/(d + k);
* RMS norms (any class whose name ends in ``RMSNorm``): ``Σ_t g_bt ⊙ x̂_bt`` with x̂ the input
  normalised as the module does it (Llama's ``w ⊙ x̂`` and Gemma's ``(1 + w) ⊙ x̂`` alike);
* ``nn.LayerNorm``: weight ``Σ_t g_bt ⊙ x̂_bt``, bias ``Σ_t g_bt``;
* ``nn.Embedding`` other than the input one (GPT-2's learned positions): rows shared by equal
  indices; OPT's learned positions: distinct rows per answer.

The input embedding and the (tied) LM head are the causal LM's own business
(`gnuq_core.lm.gradient.head_and_embedding_sq`). A module not called once per pass, or that
mixes the answers' rows, is an error, never a norm of mixed answers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["NormRule", "NORM_RULES", "LINEAR", "GHOST_MODES", "register_norm_rule", "rule_for", "owners_of", "choose_rules",
           "rule_hooks"]


def _keep_input(module: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x


def _never(module: torch.nn.Module, rows: int) -> bool:
    return False


@dataclass(frozen=True)
class NormRule:
    """How one module type gives each answer's squared parameter norms.

    Attributes
    ----------
    norms : callable ``(module, kept, output_grad, mask) -> {attribute: (B,) float64}``
        At the backward pass, from what ``keep`` kept and the output's gradient (batch first);
        ``mask`` (B, T) marks the real positions.
    keep : callable ``(module, input, mask) -> kept``
        At the forward pass: what ``norms`` needs of the input (default: the input itself).
    shares_input : bool
        ``keep`` depends on the input only: consecutive calls on one input tensor reuse it.
    cheaper : callable ``(module, rows) -> bool``
        Whether, for one answer of ``rows`` positions, the rule costs less than the
        parameters' explicit gradients (the single answer's pass then takes the rule).
    """

    norms: Callable[[torch.nn.Module, Any, torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]
    keep: Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], Any] = _keep_input
    shares_input: bool = False
    cheaper: Callable[[torch.nn.Module, int], bool] = _never


PlainRule = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]
"""A one-step rule ``(module, input, output_grad, mask) -> {attribute: (B,)}``, kept as a `NormRule`."""

NORM_RULES: dict[str | type, NormRule] = {}
"""The registry: module class name (a suffix) or class → `NormRule` (`register_norm_rule`, `rule_for`)."""


def register_norm_rule(*keys: str | type) -> Callable[[NormRule | PlainRule], NormRule]:
    """Register a rule for modules of these classes (a `NormRule`, or a plain function
    ``rule(module, input, output_grad, mask)``, which keeps the input until the backward pass).

    A class name is a suffix match (``"RMSNorm"`` covers ``LlamaRMSNorm`` and
    ``Gemma3RMSNorm``); a class (``torch.nn.LayerNorm``) covers that class and its subclasses
    that keep its ``forward`` (a subclass that computes something else needs its own rule).
    """
    def deco(rule: NormRule | PlainRule) -> NormRule:
        rule = rule if isinstance(rule, NormRule) else NormRule(norms=rule)
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


# ----------------------------------------------------------------------------------- the rules


def _float(x: torch.Tensor) -> torch.Tensor:
    """At least float32: Gram matrices of half-precision rows lose too much."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _per_answer(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``x`` as (B, rows, features) with the padded positions' rows zeroed (``x`` is (B, T, …, f)
    or (B, heads, T, f))."""
    b, f = x.shape[0], x.shape[-1]
    if x.dim() == 3 and x.shape[1] == mask.shape[1] and not bool(mask.all()):
        x = x * mask[:, :, None].to(x.dtype)
    return x.reshape(b, -1, f)


def _linear_keep(module: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    xb = _float(_per_answer(x, mask))
    return xb @ xb.transpose(1, 2)


def _linear_norms(module: torch.nn.Module, gram_x: torch.Tensor, g: torch.Tensor, mask: torch.Tensor
                  ) -> dict[str, torch.Tensor]:
    gb = _float(_per_answer(g, mask))
    out = {"weight": (gram_x * (gb @ gb.transpose(1, 2))).sum((1, 2), dtype=torch.float64)}
    if getattr(module, "bias", None) is not None:
        out["bias"] = (gb.sum(1, dtype=torch.float64) ** 2).sum(1)
    return out


def _linear_cheaper(module: torch.nn.Module, rows: int) -> bool:
    """Ghost while T(d + k) < d·k: two T×T Gram products against the T·d·k weight gradient."""
    d, k = module.weight.shape
    return rows * (d + k) < d * k


LINEAR = NormRule(norms=_linear_norms, keep=_linear_keep, shares_input=True, cheaper=_linear_cheaper)
"""Ghost norms of a linear layer: ``‖G_bᵀX_b‖² = ⟨X_bX_bᵀ, G_bG_bᵀ⟩`` and the bias ``‖Σ_t g_bt‖²``."""
register_norm_rule("Linear")(LINEAR)


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
    xhat = F.layer_norm(x, tuple(module.normalized_shape), eps=module.eps)
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
    weight: the same ghost norms."""
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - transformers is a dependency
        return
    register_norm_rule(Conv1D)(LINEAR)


_register_conv1d()


# ------------------------------------------------------------------------ choosing and hooking


def owners_of(model: torch.nn.Module, wanted: Collection[int]) -> dict[int, list[tuple[torch.nn.Module, str]]]:
    """``id(parameter)`` → every (module, attribute) holding it, for the wanted parameters."""
    found: dict[int, list[tuple[torch.nn.Module, str]]] = {k: [] for k in wanted}
    for mod in model.modules():
        for attr, p in mod.named_parameters(recurse=False):
            if id(p) in found:
                found[id(p)].append((mod, attr))
    return found


GHOST_MODES = ("auto", "always", "never")


def choose_rules(model: torch.nn.Module, wanted: Collection[int], rows: int | None = None, mode: str = "always"
                 ) -> tuple[dict[torch.nn.Module, list[tuple[int, str]]], list[int]]:
    """Split the wanted parameters into those a registered rule gives (by module, with their
    attributes) and the rest, whose norms need their explicit gradients.

    A parameter goes to its module's rule if it sits in exactly one module, that module's type
    has a rule, and ``mode`` is ``"always"``, or ``"auto"`` and the rule is `NormRule.cheaper`
    for one answer of ``rows`` positions; ``"never"`` takes no rule.
    """
    if mode not in GHOST_MODES:
        raise ValueError(f"ghost={mode!r}: use one of {', '.join(map(repr, GHOST_MODES))}")
    by_rule: dict[torch.nn.Module, list[tuple[int, str]]] = {}
    rest = []
    for k, holders in owners_of(model, wanted).items():
        rule = rule_for(holders[0][0]) if len(holders) == 1 else None
        if rule is None or mode == "never" or (mode == "auto" and not rule.cheaper(holders[0][0], rows or 0)):
            rest.append(k)
        else:
            by_rule.setdefault(holders[0][0], []).append((k, holders[0][1]))
    return by_rule, rest


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
def rule_hooks(modules: Mapping[torch.nn.Module, list[tuple[int, str]]], mask: torch.Tensor
               ) -> Iterator[dict[int, torch.Tensor]]:
    """Within the block, each module's rule adds its per-answer squared norms, a (B,) float64
    tensor, to ``sq[id(parameter)]`` when the gradient of its output arrives.

    ``modules``: module → [(id of a parameter, its attribute)] (`choose_rules`); ``mask`` (B, T)
    marks each answer's real positions. The modules' parameters do not require grad inside the
    block (autograd forms none of their gradients); their flags are restored on exit, and the
    hooks removed, also after an error. A module called twice in one pass is an error (its
    norm would miss the cross terms), as is one that does not see one row per answer.
    """
    sq: dict[int, torch.Tensor] = {}
    called: set[int] = set()
    last: list[tuple[torch.Tensor, NormRule, Any]] = []  # the latest shared input and what was kept of it
    handles = []
    saved = {p: p.requires_grad for mod, params in modules.items() for _, attr in params
             for p in [getattr(mod, attr)]}

    def hook_for(mod: torch.nn.Module, params: list[tuple[int, str]], rule: NormRule) -> Callable[..., Any]:
        def forward_hook(m: torch.nn.Module, inputs: tuple[torch.Tensor, ...], y: torch.Tensor) -> torch.Tensor | None:
            if not torch.is_grad_enabled():
                return None
            if id(m) in called:
                raise RuntimeError(f"gradient norms: the module {type(m).__name__} was called twice in one pass; "
                                   "its per-answer norm would miss the cross terms: compute its norm the explicit "
                                   "way (forward_backward with ghost='never') or score one answer at a time")
            called.add(id(m))
            raw = inputs[0] if inputs and isinstance(inputs[0], torch.Tensor) else None
            x = raw.detach() if raw is not None else None
            shape = _batch_shape(x, y, mask)
            if shape is None:
                raise RuntimeError(f"batched norms: the module {type(m).__name__} did not see one row per answer "
                                   f"(batch of {mask.shape[0]}); its per-answer norm cannot be split: score one "
                                   "answer at a time (gnuq_core.lm.scoring.score_many with batch_size=1)")
            x = x.reshape(*shape, *x.shape[1:]) if len(shape) == 2 else x
            if rule.shares_input and last and last[0][0] is raw and last[0][1] is rule:
                kept = last[0][2]  # q/k/v, gate/up: consecutive calls on one input
            else:
                kept = rule.keep(m, x, mask)
                if rule.shares_input:
                    last[:] = [(raw, rule, kept)]
            if not y.requires_grad:  # an input that carries no gradient (position indices): start one here
                y = y.detach().requires_grad_(True)

            def grad_hook(g: torch.Tensor) -> None:
                g = g.detach()
                norms = rule.norms(m, kept, g.reshape(*shape, *g.shape[1:]) if len(shape) == 2 else g, mask)
                for k, attr in params:
                    sq[k] = sq[k] + norms[attr] if k in sq else norms[attr]

            y.register_hook(grad_hook)
            return y
        return forward_hook

    try:
        for p in saved:
            p.requires_grad_(False)
        for mod, params in modules.items():
            rule = rule_for(mod)
            if rule is None:
                raise ValueError(f"no norm rule for {type(mod).__name__}: register one with "
                                 "gnuq_core.estimators.norm_rules.register_norm_rule")
            handles.append(mod.register_forward_hook(hook_for(mod, params, rule)))
        yield sq
    finally:
        for h in handles:
            h.remove()
        for p, flag in saved.items():
            p.requires_grad_(flag)
        last.clear()
