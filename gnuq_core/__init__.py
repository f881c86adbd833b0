"""gnuq_core: epistemic uncertainty from gradient norms, aleatoric from p(1-p).

The companion library of *An Isotropic Approach to Efficient Uncertainty Quantification
with Gradient Norms* (Grünefeld, Frellsen, Hardmeier, 2026). Heavy frameworks (torch,
jax) are imported by the submodules that need them, never here.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("gnuq")  # one source: pyproject.toml
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
