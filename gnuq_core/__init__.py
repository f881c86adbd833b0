"""gnuq_core: epistemic uncertainty from gradient norms, aleatoric from p(1-p).

The companion library of *An Isotropic Approach to Efficient Uncertainty Quantification
with Gradient Norms* (Grünefeld, Frellsen, Hardmeier, 2026). Heavy frameworks (torch,
jax) are imported by the submodules that need them, never here.
"""

__version__ = "0.1.0"
