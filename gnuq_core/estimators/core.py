"""Gradient-norm uncertainty for one prediction, in PyTorch and in JAX.

For a prediction p = p(y|x, theta) at the point estimate theta*:

    epistemic = ||grad_theta p||^2          (delta method + isotropic Cov[theta] = s^2 I)
    aleatoric = p (1 - p)                   (Bernoulli variance of the point prediction)
    combined  = epistemic + aleatoric       (the paper sums the two variance terms,
                                             as in the law of total variance)

An LLM answer has p = prod_t p(y_t | y_<t, x), which underflows float32 for long
answers (log p = -200 gives p = 0). Since grad p = p grad log p,

    ||grad p||^2 = p^2 ||grad log p||^2
    log10 ||grad p||^2 = 2 log p / ln 10 + log10 ||grad log p||^2

so everything is computed from log p and ||grad log p||^2, and the log10 fields stay
finite even when p or the epistemic term underflow to 0.0. aleatoric uses
p (1 - p) = p * (-expm1(log p)), which keeps its precision near p = 1.

PyTorch: `torch_uncertainty` runs one backward pass; a per-parameter
post-accumulate-grad hook adds ||grad||^2 in float64 and frees `.grad` at once, so no
parameter-sized gradient buffers are kept. JAX: `jax_uncertainty` vmaps
`value_and_grad` over a batch of inputs under `jit`. `from_log_p_and_grad_sq` is the
pure log-space arithmetic that both use.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from gnuq_core.arguments import real, real_list
from gnuq_core.options import InputTypeError

__all__ = [
    "unique_params",
    "select",
    "Uncertainty",
    "log10_epistemic",
    "log10_combined",
    "sequence_and_normalized",
    "from_log_p_and_grad_sq",
]

LN10 = math.log(10.0)
# log p in (0, LOG_P_TOL] is treated as rounding error of a p that is 1 and clamped to 0.
LOG_P_TOL = 1e-6
_FIX_HINT = (
    "check the inputs for NaN/inf, and run the model in float32 or float64 rather than "
    "float16/bfloat16 (overflow in half precision is the usual cause)"
)

GroupSpec = Sequence[str] | Callable[[str], bool]


class Uncertainty(NamedTuple):
    """Uncertainty of one prediction p = p(y|x, theta*).

    Attributes
    ----------
    log_p : float
        Natural log of the prediction p.
    p : float
        ``exp(log_p)``; may be 0.0 by underflow, the log fields stay exact.
    log10_grad_log_p_sq : float
        ``log10 ||grad_theta log p||^2`` (``-inf`` if the gradient is exactly zero).
    log10_epistemic : float
        ``log10 ||grad_theta p||^2 = 2 log10 p + log10 ||grad_theta log p||^2``.
    epistemic : float
        ``||grad_theta p||^2`` (may underflow to 0.0; use `log10_epistemic`).
    aleatoric : float
        ``p (1 - p)``.
    combined : float
        ``epistemic + aleatoric``: the paper sums the two variance terms (law of total
        variance: Var[y] = E[Var[y|theta]] + Var[E[y|theta]]).
    group_sq_norms : dict[str, float]
        ``||grad_{theta_group} log p||^2`` per requested group; ``{}`` unless
        ``per_group=True``.
    """

    log_p: float
    p: float
    log10_grad_log_p_sq: float
    log10_epistemic: float
    epistemic: float
    aleatoric: float
    combined: float
    group_sq_norms: dict[str, float]

    def to_dict(self, *, groups: bool = True) -> dict[str, float | None | dict[str, float]]:
        """JSON-ready fields (a non-finite float, e.g. ``log10`` of a zero gradient, is None);
        ``groups=False`` leaves out ``group_sq_norms``."""
        out: dict[str, float | None | dict[str, float]] = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self._asdict().items()}
        if not groups:
            del out["group_sq_norms"]
        return out


# --------------------------------------------------------------------------- log space


def _number(value: Any, argument: str) -> float:
    """``value`` as a float, or `gnuq_core.arguments.real`'s one error naming ``argument``."""
    return value if type(value) is float else real(value, argument)


def _numbers(value: Any, argument: str) -> list[float]:
    """``value`` as a list of floats (`gnuq_core.arguments.real_list`)."""
    return real_list(value, argument)


def log10_epistemic(log_p: float, grad_log_p_sq: float) -> float:
    """``log10 ||grad p||^2 = 2 log p / ln 10 + log10 ||grad log p||^2``: the epistemic term
    in log space, finite where p underflows; ``-inf`` for a zero gradient (or p = 0)."""
    log_p, grad_log_p_sq = _number(log_p, "log_p"), _number(grad_log_p_sq, "grad_log_p_sq")
    return 2.0 * log_p / LN10 + (math.log10(grad_log_p_sq) if grad_log_p_sq > 0 else -math.inf)


def log10_combined(log10_epi: float, aleatoric: float) -> float:
    """``log10(epistemic + aleatoric)`` from ``log10 epistemic`` and the aleatoric term,
    without overflow or underflow; ``-inf`` when both terms are 0."""
    log10_epi, aleatoric = _number(log10_epi, "log10_epi"), _number(aleatoric, "aleatoric")
    if aleatoric <= 0:
        return log10_epi
    a = math.log10(aleatoric)
    hi, lo = max(a, log10_epi), min(a, log10_epi)
    return hi + math.log10(1.0 + 10.0 ** (lo - hi))


def sequence_and_normalized(token_log_probs: Sequence[float], grad_log_p_sq: float,
                            group_sq_norms: Mapping[str, float] | None = None) -> tuple[Uncertainty, Uncertainty]:
    """``(sequence, normalized)`` `Uncertainty` of an answer of T tokens from its per-token
    log-probs and ``||grad log p_seq||^2``: p = prod_t p_t, and the length-normalised
    p = exp(mean_t log p_t), whose gradient is grad(log p_seq) / T, so its squared norm
    (and every per-group value) is divided by T^2."""
    token_log_probs = _numbers(token_log_probs, "token_log_probs")
    n = len(token_log_probs)
    if n == 0:
        raise ValueError("an answer of zero tokens has no probability to score")
    log_p = math.fsum(token_log_probs)
    seq = from_log_p_and_grad_sq(log_p, grad_log_p_sq, group_sq_norms)
    norm = from_log_p_and_grad_sq(log_p / n, grad_log_p_sq / n**2,
                                  {k: v / n**2 for k, v in (group_sq_norms or {}).items()})
    return seq, norm


def from_log_p_and_grad_sq(
    log_p: float,
    grad_log_p_sq: float,
    group_sq_norms: Mapping[str, float] | None = None,
) -> Uncertainty:
    """Build an `Uncertainty` from log p and ||grad log p||^2 (pure log-space arithmetic).

    Parameters
    ----------
    log_p : float
        Natural log of the prediction, ``<= 0`` (``-inf`` allowed: p = 0).
    grad_log_p_sq : float
        ``||grad_theta log p||^2 >= 0``; 0 gives ``log10_grad_log_p_sq = -inf``.
    group_sq_norms : Mapping[str, float], optional
        Per-group ``||grad log p||^2``, copied into the result.

    Returns
    -------
    Uncertainty

    Raises
    ------
    FloatingPointError
        If `log_p` or `grad_log_p_sq` is NaN or `grad_log_p_sq` is infinite.
    ValueError
        If ``log_p > 0`` (p > 1) or ``grad_log_p_sq < 0``.
    InputTypeError
        (a `TypeError`) if a value is not a number (text, a bool, None) or `group_sq_norms`
        is not a mapping of names to numbers.
    """
    log_p = _number(log_p, "log_p")
    g = _number(grad_log_p_sq, "grad_log_p_sq")
    if group_sq_norms is not None and not (isinstance(group_sq_norms, Mapping) and all(
            isinstance(k, str) for k in group_sq_norms)):
        raise InputTypeError(f"group_sq_norms is a {type(group_sq_norms).__name__}: pass a mapping {{group name: "
                             "squared norm}} or None")
    group_sq_norms = {k: _number(v, f"group_sq_norms[{k!r}]") for k, v in (group_sq_norms or {}).items()}
    if math.isnan(log_p):
        raise FloatingPointError(f"log p is NaN; {_FIX_HINT}")
    if log_p > LOG_P_TOL:
        raise ValueError(
            f"log p = {log_p:.6g} > 0, i.e. p > 1: pass the natural log of a probability "
            "(e.g. a sum of log_softmax values), not a logit or a log-density"
        )
    log_p = min(log_p, 0.0)
    if math.isnan(g) or math.isinf(g):
        raise FloatingPointError(f"||grad log p||^2 = {g}; {_FIX_HINT}")
    if g < 0:
        raise ValueError(f"||grad log p||^2 = {g:.6g} < 0: a squared norm cannot be negative")
    log10_g = math.log10(g) if g > 0 else -math.inf
    log10_epi = log10_epistemic(log_p, g)
    epistemic = 10.0**log10_epi if log10_epi > -math.inf else 0.0
    p = math.exp(log_p)
    aleatoric = p * -math.expm1(log_p)
    return Uncertainty(
        log_p=log_p,
        p=p,
        log10_grad_log_p_sq=log10_g,
        log10_epistemic=log10_epi,
        epistemic=epistemic,
        aleatoric=aleatoric,
        combined=epistemic + aleatoric,
        group_sq_norms=dict(group_sq_norms or {}),
    )


# --------------------------------------------------------------------------- frameworks


def matches(spec: GroupSpec, name: str) -> bool:
    """Whether parameter ``name`` belongs to a group given as prefixes or a predicate.

    A prefix matches the name itself or the name's dotted children (``"model.layers.1"``
    matches ``"model.layers.1.mlp.weight"`` but not ``"model.layers.10.mlp.weight"``).
    """
    if callable(spec):
        return bool(spec(name))
    prefixes = [spec] if isinstance(spec, str) else list(spec)
    return any(name == p or name.startswith(p if p.endswith(".") else p + ".") for p in prefixes)


def unique_params(model: Any) -> tuple[dict[int, Any], dict[int, list[str]]]:
    """The model's parameter tensors once each (a tied weight appears under several names), in
    registration order: ``({id: tensor}, {id: [every name of it]})``."""
    params: dict[int, Any] = {}
    names: dict[int, list[str]] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        params.setdefault(id(p), p)
        names.setdefault(id(p), []).append(n)
    return params, names


def select(params: dict[int, Any], names: dict[int, list[str]], groups: Mapping[str, Any] | None
            ) -> dict[str, list[int]]:
    """``{group: [id of each floating-point parameter tensor in it]}`` for groups as
    `resolve_groups` returns them (None: one group ``"all"``); a group that matches no
    parameter is an error naming what the parameter names look like.

    A group given as full parameter names (what the presets resolve to) is looked up by
    name; prefixes and predicates are matched with `gnuq_core.estimators.core.matches`
    (a parameter name is never a dotted prefix of another, so both give the same members).
    """
    if groups is None:
        return {"all": [k for k, p in params.items() if p.is_floating_point()]}
    owner = {n: k for k, ns in names.items() for n in ns}
    members: dict[str, list[int]] = {}
    for g, spec in groups.items():
        if isinstance(spec, (list, tuple)) and all(isinstance(n, str) and n in owner for n in spec):
            found = {owner[n] for n in spec}
            members[g] = [k for k in params if k in found and params[k].is_floating_point()]
        else:
            members[g] = [k for k in params
                          if params[k].is_floating_point() and any(matches(spec, n) for n in names[k])]
        if not members[g]:
            sample = ", ".join(n for k in list(names)[:6] for n in names[k][:1])
            raise ValueError(f"group {g!r} matches no parameter; parameter names look like: {sample}, ...")
    return members

