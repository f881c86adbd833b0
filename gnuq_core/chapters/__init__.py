"""The chapters layer: what each chapter of the book computes, one module per chapter.

A chapter module exposes a frozen ``Params`` dataclass (`params.ChapterParams`: defaults
are the paper edition, a profile overrides some of them, every value is checked on
creation) and ``run(params, ...) -> Result`` that computes everything the page reports,
plus the figure functions the page shows. The notebook narrates: it resolves its
``Params`` from the profile the runner injected, calls ``run``, glues ``result.values``
and shows the figures. The science packages (`gnuq_core.estimators`, `gnuq_core.lm`,
`gnuq_core.isotropy`, …) do not know about chapters.

`MODULES` maps each notebook stem to its module (chapters not yet moved here still
compute in their notebook; the runner checks those through their parameters cell). A notebook
imports its module and the page's calls from here in one line:
``from gnuq_core.chapters import glue_figure, glue_values, mcmc, start`` (`base`'s ``start``,
``glue``, ``glue_figure``, ``glue_values``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gnuq_core.chapters.base import glue, glue_figure, glue_values, start

__all__ = ["MODULES", "module_for", "start", "glue", "glue_figure", "glue_values"]

MODULES: dict[str, str] = {
    "01_derivation": "gnuq_core.chapters.derivation",
    "02_proxy_bias": "gnuq_core.chapters.proxy_bias",
    "03_hessian_spectra": "gnuq_core.chapters.spectra",
    "04_mcmc_validation": "gnuq_core.chapters.mcmc",
    "05_scaling": "gnuq_core.chapters.scaling",
    "06_qa_benchmarks": "gnuq_core.chapters.qa",
    "07_efficiency": "gnuq_core.chapters.efficiency",
    "80_cross_checks": "gnuq_core.chapters.cross_checks",
    "90_claims_ledger": "gnuq_core.chapters.ledger",
}
"""Notebook stem -> the module that computes that chapter."""


def module_for(stem: str) -> ModuleType | None:
    """The chapter module of notebook ``stem``, or None if the chapter still computes in its notebook."""
    name = MODULES.get(stem)
    return importlib.import_module(name) if name else None
