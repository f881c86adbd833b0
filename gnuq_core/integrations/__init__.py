"""Optional integrations with other uncertainty-estimation frameworks.

Each module needs its own extra and is imported only on request, so this package imports
with what ``pip install .`` gives:

- :mod:`~gnuq_core.integrations.polygraph`: LM-Polygraph (extra ``polygraph``): a stat
  calculator running the forward–backward pass on its greedy answers, and estimators for
  epistemic, aleatoric, combined uncertainty and ‖∇θ log p‖².
"""
