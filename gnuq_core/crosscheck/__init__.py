"""Cross-checks: the project's numbers recomputed by independent, well-kept implementations.

One module per comparison; each returns a small ``pandas.DataFrame`` of agreement rows
(:func:`gnuq_core.crosscheck.agreement.compare`): the quantity, our value and theirs at
the entry where they differ most, the largest relative error, the tolerance and whether
it is met.

- :mod:`~gnuq_core.crosscheck.laplace`: laplace-torch's GLM functional variance vs the
  project's Laplace/GGN variance (:mod:`gnuq_core.bayes.laplace`), ‖∇p‖² vs autograd;
- :mod:`~gnuq_core.crosscheck.spectra`: SciPy's ``eigsh``, dense ``eigh`` and curvlinops'
  Lanczos vs the project's Lanczos and SLQ (:mod:`gnuq_core.isotropy.spectra`);
- :mod:`~gnuq_core.crosscheck.gradnorm`: the engine's ‖∇θ log p‖² (:mod:`gnuq_core.lm.gradient`)
  vs plain autograd on a causal LM;
- :mod:`~gnuq_core.crosscheck.baselines`: the QA baselines, AUROC and PRR recomputed from
  stored records by the published formulas vs :mod:`gnuq_core.qa.scores`.
"""
