"""THE registry of stored kinds: what each holds, which code defines it, and its contract.

A *kind* is a folder of the results store (``results/<kind>/``): one file per
configuration and code version, one JSON line per item. Its entry here says

- ``roots``: the modules whose import closure computes its items (the code version is
  `gnuq_core.store.codeversion.code_version` of them: no hand-kept module lists);
- ``contract``: how a recomputed item must agree with the stored one, on the platform
  that made it and elsewhere (`gnuq_core.store.contracts`);
- ``carry_sample``: how many items a verified carry across a code change recomputes
  whole (``None``: every item, as an exact kind must), and ``carry_all_exact``: whether it
  also recomputes every other item's exact part from its stored outputs (the QA records);
  ``carry_parts``: parts of that exact part a carry may be confined to, for a change
  confined to them (the QA records' ``"gradient"``: the gradient pass's fields), and
  ``carry_part_sample``: how many items such a carry still recomputes whole-exact-part;
- ``what``: one item, in words, and the chapter that reads it.

The contracts were chosen by measurement: every kind was recomputed on this machine
under the simulated other CPUs of `gnuq_core.store.fingerprint.SIMULATIONS`, and a kind
is *exact* only if the recomputation agreed within the tolerance there too. Training in
float64 instead of float32 does not make the small MLPs exact: full-batch Adam at
learning rate 1e-2 has not converged after 2,000 steps and amplifies a last-bit
difference to a relative parameter change of 1e-2 in float64 as in float32 (README,
"The results store").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from gnuq_core.store.codeversion import code_version
from gnuq_core.store.contracts import Chaotic, Contract, Exact, GivenInputs, MonteCarloError, SeedSpread, Within

__all__ = ["Kind", "KINDS", "get", "nuts_standard_errors", "lanczos_view", "PREFIX_STEPS", "QA_EXACT_FIELDS"]


@dataclass(frozen=True)
class Kind:
    """One stored kind (see the module docstring)."""

    name: str
    roots: tuple[str, ...]
    contract: Contract
    what: str
    chapter: str
    ignore: tuple[str, ...] = ("seconds", "timings")
    digits: int = 7
    carry_sample: int | None = None
    carry_all_exact: bool = False
    carry_parts: tuple[str, ...] = ()
    carry_part_sample: int = 0
    view: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    source_root: Path | None = None

    @property
    def code(self) -> str:
        """The current code version (`gnuq_core.store.codeversion.code_version` of the roots)."""
        return code_version(self.roots, self.source_root)


def nuts_standard_errors(record: Mapping[str, Any]) -> dict[str, float]:
    """Monte Carlo standard errors of a NUTS summary's predictive means and variances.

    Per query set, with ``n`` the smallest effective sample size of the predictions
    (``diag.ess_pred_min``, so every error is an upper bound): ``se(mean) = √(var / n)``
    and, for a near-Gaussian predictive, ``se(var) = var·√(2 / n)``. Keys are the paths of
    the estimates in the record (``".q.in.ref.var_f[3]"``).
    """
    out: dict[str, float] = {}
    for name, entry in record.get("q", {}).items():
        ess = entry.get("diag", {}).get("ess_pred_min")
        if not isinstance(ess, (int, float)) or not ess > 0:
            continue
        ref = entry.get("ref", {})
        for scale in ("f", "p"):
            means, variances = ref.get(f"mean_{scale}"), ref.get(f"var_{scale}")
            if means is None or variances is None:
                continue
            for j, (m, v) in enumerate(zip(means, variances)):
                if v is None or not math.isfinite(v) or v < 0:
                    continue
                out[f".q.{name}.ref.mean_{scale}[{j}]"] = math.sqrt(v / ess)
                out[f".q.{name}.ref.var_{scale}[{j}]"] = v * math.sqrt(2.0 / ess)
    return out


PREFIX_STEPS = 10
"""Lanczos steps by which a stored quadrature rule is compared (:func:`lanczos_view`)."""


def lanczos_view(record: dict[str, Any]) -> dict[str, Any]:
    """A record with its Lanczos quadrature rule (``nodes``, ``weights``) replaced by the first
    :data:`PREFIX_STEPS` coefficients (``alpha``, ``beta``) of the run that made it.

    The rule is the eigendecomposition of the run's tridiagonal matrix, so Lanczos on
    ``diag(nodes)`` from ``√weights`` rebuilds it (`gnuq_core.isotropy.spectra.lanczos`);
    a check can then recompute only the first steps. Records with ``alpha`` already, or
    without a rule, are returned as they are.
    """
    if "nodes" not in record or "weights" not in record:
        return record
    import numpy as np

    from gnuq_core.isotropy.spectra import lanczos  # here: store/ imports no science package at module level

    nodes = np.asarray(record["nodes"], dtype=float)
    weights = np.asarray(record["weights"], dtype=float)
    alpha, beta = lanczos(lambda v: nodes * v, np.sqrt(np.clip(weights, 0, None)), min(PREFIX_STEPS, len(nodes)))
    rest = {k: v for k, v in record.items() if k not in ("nodes", "weights")}
    return {**rest, "alpha": alpha.tolist(), "beta": beta.tolist()}


# The QA record's fields that are exact given its stored answers (teacher-forced): the
# greedy answer's log-probs, entropies and gradient norms, P(True), the samples' log-probs,
# their clusters, and every score computed from them.
QA_EXACT_FIELDS = (
    ".generation.token_log_probs[*]", ".generation.token_entropies[*]", ".generation.stop_log_prob",
    ".grad_sq", ".group_sq.*", ".samples[*].token_log_probs[*]", ".samples[*].stop_log_prob",
    ".samples[*].cluster", ".scores.*",
)

_KINDS = [
    Kind("proxy_synthetic", ("gnuq_core.isotropy.proxy_stored",), Chaotic(SeedSpread(k=3.0)),
         "one seed of the synthetic proxy-shift sweep (a training run and a GGN per shift)", "02_proxy_bias",
         carry_sample=3),
    Kind("proxy_text", ("gnuq_core.isotropy.proxy_stored",), Chaotic(SeedSpread(k=3.0)),
         "one head seed of the sentence-encoder experiment (MiniLM embeddings, a trained head, its GGN)",
         "02_proxy_bias", carry_sample=2),
    Kind("hessian_exact", ("gnuq_core.isotropy.stored",),
         Chaotic(GivenInputs(("*",), rtol=1e-3, atol=1e-5,
                             what="the spectra, summaries and quadratic forms of the stored trained network"),
                 atol=1e-12),
         "the exact Hessian and GGN spectra of one small MLP (``width<w>``) or its trained parameters "
         "(``theta/width<w>``)", "03_hessian_spectra", carry_sample=2, digits=7),
    Kind("hessian_slq_mlp", ("gnuq_core.isotropy.stored",),
         Chaotic(GivenInputs(("*",), rtol=1e-2, atol=1e-5,
                             what="the first Lanczos coefficients of each probe and the quadratic forms of each "
                                  "query, of the stored trained network"), digits=5, atol=1e-6),
         "one SLQ probe or one query point of the large MLP, or its trained parameters (``theta``)",
         "03_hessian_spectra", carry_sample=2, view=lanczos_view),
    Kind("hessian_slq_lm", ("gnuq_core.isotropy.stored",),
         Chaotic(Within(("*",), rtol=1e-2, atol=1e-6, what=f"the first {PREFIX_STEPS} Lanczos coefficients, the "
                                                           "dimension and the loss"), digits=5, atol=1e-6),
         "one SLQ probe of the LM block's Hessian", "03_hessian_spectra", carry_sample=2, view=lanczos_view),
    Kind("nuts_reference", ("gnuq_core.bayes.reference",),
         Chaotic(MonteCarloError(nuts_standard_errors, k=6.0,
                                 what="the posterior predictive mean and variance at every query point")),
         "the NUTS reference of one setting: posterior predictive mean and variance per query point, diagnostics",
         "04_mcmc_validation", carry_sample=2),
    Kind("local_estimates", ("gnuq_core.bayes.local",),
         Chaotic(Within((".q.*", ".map.neg_log_joint", ".map.theta_max_abs"), rtol=1e-2, atol=1e-4,
                        what="the MAP's objective and largest |θ| and every local estimate at every query point (the "
                             "optimiser's path, its iterations and gradient norms, is not compared)")),
         "the MAP fit of one setting and its local estimates at every query point", "04_mcmc_validation",
         carry_sample=2),
    Kind("qa", ("gnuq_core.qa.engine", "gnuq_core.lm.models"),
         Chaotic(GivenInputs(QA_EXACT_FIELDS, rtol=1e-3, atol=5e-5,
                             what="the log-probabilities, entropies, gradient norms, P(True), clusters and scores "
                                  "of the stored answers")),
         "one question's record: greedy answer, samples, gradient norms, baselines", "06_qa_benchmarks",
         ignore=("seconds", "timings", "torch_threads"), carry_sample=2, carry_all_exact=True,
         carry_parts=("gradient",), carry_part_sample=20),
    Kind("qa_mc", ("gnuq_core.qa.multiple_choice", "gnuq_core.lm.models"), Exact(rtol=1e-4, atol=1e-6),
         "one TruthfulQA multiple-choice question: the log-probability of every choice", "06_qa_benchmarks",
         carry_sample=None),
]

KINDS: dict[str, Kind] = {k.name: k for k in _KINDS}


def get(name: str | Kind) -> Kind:
    """The registered kind ``name`` (a `KeyError` naming the known ones otherwise); a `Kind`
    is returned as it is (tests and new experiments may use kinds not registered yet)."""
    if isinstance(name, Kind):
        return name
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"unknown stored kind {name!r}; known kinds: {', '.join(KINDS)} "
                       "(register a new one in gnuq_core/store/kinds.py)") from None
