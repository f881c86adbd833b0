"""gnuq_core: epistemic uncertainty from gradient norms, aleatoric from p(1-p).

The companion library of *An Isotropic Approach to Efficient Uncertainty Quantification
with Gradient Norms* (Grünefeld, Frellsen, Hardmeier, 2026). Heavy frameworks (torch,
jax) are imported by the submodules that need them, never here: the front door's names
below load their module on first use.

>>> from gnuq_core import load_model, score_many   # doctest: +SKIP
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("gnuq")  # one source: pyproject.toml
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

# The front door: public name -> the module that defines it (imported on first use, PEP 562).
_FRONT_DOOR = {
    "score": "gnuq_core.lm.scoring",
    "score_many": "gnuq_core.lm.scoring",
    "ScoreResult": "gnuq_core.lm.scoring",
    "to_frame": "gnuq_core.lm.scoring",
    "load_model": "gnuq_core.lm.models",
    "torch_uncertainty": "gnuq_core.estimators.torch_backend",
}

__all__ = ["__version__", *_FRONT_DOOR]


def __getattr__(name: str) -> object:
    if name in _FRONT_DOOR:
        import importlib

        return getattr(importlib.import_module(_FRONT_DOOR[name]), name)
    raise AttributeError(f"module 'gnuq_core' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_FRONT_DOOR])
