"""The PyTorch half of `gnuq_core.estimators`: one backward pass, hook-accumulated norms."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch

from gnuq_core.arguments import flag
from gnuq_core.estimators.core import (
    _FIX_HINT,
    LOG_P_TOL,
    GroupSpec,
    Uncertainty,
    from_log_p_and_grad_sq,
    select,
    unique_params,
)
from gnuq_core.estimators.hooks import hooked_sq_norms, raise_if_non_finite
from gnuq_core.options import InputTypeError

# --------------------------------------------------------------------------- PyTorch




def torch_uncertainty(
    model: torch.nn.Module,
    log_prob_fn: Callable[[torch.nn.Module], torch.Tensor],
    *,
    groups: Mapping[str, GroupSpec] | None = None,
    per_group: bool = False,
) -> Uncertainty:
    """Epistemic, aleatoric and combined uncertainty of one prediction, one backward pass.

    Parameters
    ----------
    model : torch.nn.Module
        The model at its point estimate theta*. Call ``model.eval()`` first if it has
        dropout. Parameters are not changed; ``requires_grad`` flags and any existing
        ``.grad`` are restored on return.
    log_prob_fn : Callable[[torch.nn.Module], torch.Tensor]
        ``log_prob_fn(model)`` returns the scalar natural log p(y|x, theta) (e.g. the sum
        of the answer tokens' log_softmax values). Input tensors should not require
        grad (if they do, backward accumulates their ``.grad`` as usual).
    groups : Mapping[str, Sequence[str] | Callable[[str], bool]], optional
        Group name -> parameter-name prefixes or a predicate on the parameter name. A
        prefix matches a name it equals or that continues it after a dot
        (``"layers.1"`` matches ``"layers.1.w"``, not ``"layers.10.w"``). When given, the
        epistemic term uses only parameters in the union of the groups (each counted
        once); the other parameters get ``requires_grad=False`` during the pass.
    per_group : bool
        If True, fill ``group_sq_norms`` with ``||grad log p||^2`` per group (a tied or
        shared parameter counts in every group it matches, so the per-group values sum
        to the total only for disjoint groups). Without `groups` there is one group,
        ``"all"``.

    Returns
    -------
    Uncertainty

    Raises
    ------
    ValueError
        If a group matches no parameter, nothing requires a gradient, or log p > 0.
    FloatingPointError
        If log p or a gradient is NaN/inf (names the parameter and group).
    RuntimeError
        If a parameter's gradient is accumulated twice in the pass (reentrant gradient
        checkpointing with a parameter shared across segments): the per-piece squares
        would not add up to the squared norm; use ``use_reentrant=False``.
    """
    if not isinstance(model, torch.nn.Module):
        raise InputTypeError(f"model is a {type(model).__name__}, not a torch.nn.Module: pass the model whose "
                             "parameters log p depends on")
    if not callable(log_prob_fn):
        raise InputTypeError(f"log_prob_fn is a {type(log_prob_fn).__name__}: pass a function model -> scalar log p")
    if groups is not None and not isinstance(groups, Mapping):
        raise InputTypeError(f"groups is a {type(groups).__name__}: pass a mapping {{name: parameter-name prefixes "
                             "or a predicate}} (for presets such as 'last_block' use "
                             "gnuq_core.lm.anatomy.resolve_groups(model, ...))")
    flag(per_group, "per_group")
    params, names = unique_params(model)
    if not params:
        raise ValueError("model has no parameters")
    group_members = select(params, names, groups)  # floating-point tensors only
    union = set().union(*group_members.values())
    selected = [k for k in params if k in union]
    if not selected:
        raise ValueError("no floating-point parameter selected: nothing to differentiate")

    with hooked_sq_norms(params, selected) as norms, torch.enable_grad():
        log_p_t = log_prob_fn(model)
        if not isinstance(log_p_t, torch.Tensor) or log_p_t.numel() != 1:
            raise ValueError("log_prob_fn(model) must return a scalar tensor (log p)")
        log_p_t = log_p_t.reshape(())
        log_p = float(log_p_t.detach())
        if not math.isfinite(log_p):
            raise FloatingPointError(f"log p = {log_p} from log_prob_fn; {_FIX_HINT}")
        if log_p > LOG_P_TOL:
            from_log_p_and_grad_sq(log_p, 0.0)  # raises the ValueError
        if not log_p_t.requires_grad:
            raise ValueError(
                "log p does not depend on the selected parameters (no grad_fn): do not "
                "detach or compute it under torch.no_grad(), and check `groups`"
            )
        # Plain backward, not inputs=[...]: reentrant gradient checkpointing only
        # reaches the parameters through a nested backward that inputs= would prune.
        log_p_t.backward()
    if norms.repeated:
        n = names[next(k for k in params if k in norms.repeated)][0]
        raise RuntimeError(
            f"gradient of parameter {n!r} was accumulated more than once in one backward "
            "pass (reentrant gradient checkpointing?); use use_reentrant=False"
        )
    sq_f = norms.floats()  # unused parameters stay absent: 0
    raise_if_non_finite(sq_f, selected, names, group_members if groups is not None else None, _FIX_HINT)
    total = math.fsum(sq_f.get(k, 0.0) for k in selected)
    per = (
        {g: math.fsum(sq_f.get(k, 0.0) for k in m) for g, m in group_members.items()}
        if per_group
        else None
    )
    return from_log_p_and_grad_sq(log_p, total, per)
