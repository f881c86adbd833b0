"""The public estimator: epistemic ‖∇θ p‖², aleatoric p(1 − p), from one forward–backward pass.

- `core`: the :class:`Uncertainty` record, built from log p and ‖∇θ log p‖² (framework-free);
- `torch_backend`: :func:`torch_uncertainty`, one backward pass with hook-accumulated norms;
- `jax_backend`: :func:`jax_uncertainty`, ``value_and_grad`` vmapped over inputs;
- `hooks`: squared gradient norms per parameter, gathered during the backward pass.

The front door is this package: ``from gnuq_core.estimators import torch_uncertainty``.
"""

from __future__ import annotations

from typing import Any

from gnuq_core.estimators.core import (
    LOG_P_TOL,
    GroupSpec,
    Uncertainty,
    from_log_p_and_grad_sq,
    log10_combined,
    log10_epistemic,
    sequence_and_normalized,
)

__all__ = ["LOG_P_TOL", "GroupSpec", "Uncertainty", "from_log_p_and_grad_sq", "log10_epistemic", "log10_combined",
           "sequence_and_normalized", "torch_uncertainty",
           "JaxUncertainty", "jax_uncertainty", "jax_grad_sq_norm"]

# torch and JAX are heavy imports: each framework's half lives in its own module and is
# imported on first use, so a PyTorch user never loads JAX and vice versa.
_LAZY = {
    "torch_uncertainty": "gnuq_core.estimators.torch_backend",
    "JaxUncertainty": "gnuq_core.estimators.jax_backend",
    "jax_uncertainty": "gnuq_core.estimators.jax_backend",
    "jax_grad_sq_norm": "gnuq_core.estimators.jax_backend",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
