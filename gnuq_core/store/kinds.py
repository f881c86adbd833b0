"""THE registry of stored kinds (``results/<kind>/``: one file per configuration, one JSON line per item).

- ``version``: what its stored numbers mean. **Whoever changes what an item holds (a formula,
  a default, the layout) bumps it**; the old files are then stale (`gnuq store status`) and
  the build computes new ones. A change that leaves the numbers equal keeps it: the check
  every build runs and ``gnuq store verify`` judge that;
- ``contract``: how a recomputed item must agree (`gnuq_core.store.contracts`), chosen by
  measurement under the simulated CPUs of `gnuq_core.repro.fingerprint.SIMULATIONS`;
- ``code``: the modules that compute its items (to read, not hashed);
- ``full_sample``: what ``gnuq store verify KIND --all`` reruns when it cannot be every item
  (NUTS: 322 references took 10.7 h): that many at random, stated in its report;
- ``nullable``: fields where a stored null (a legitimate NaN or infinity) is allowed;
  anywhere else a null or non-finite number stops the read;
- ``what``: one item, in words, and ``chapters``: the chapters that read it (``gnuq store
  verify KIND`` builds them).

Every kind stores what is expensive and raw (token ids and log-probabilities, squared
gradient norms, spectra, MCMC summaries, trained parameters); scores, graders, readings and
tables are computed on read, so adding one never touches a stored file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from gnuq_core.store.contracts import Chaotic, Contract, Exact, GivenInputs, MonteCarloError, SeedSpread, Within

__all__ = ["Kind", "KINDS", "get", "nuts_standard_errors", "lanczos_view", "PREFIX_STEPS", "QA_EXACT_FIELDS"]


@dataclass(frozen=True)
class Kind:
    """One stored kind (see the module docstring)."""

    name: str
    version: int
    contract: Contract
    what: str
    chapters: tuple[str, ...]
    code: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ("seconds", "timings")
    digits: int = 7
    nullable: tuple[str, ...] = ()
    full_sample: int | None = None
    view: Callable[[dict[str, Any]], dict[str, Any]] | None = None


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
    :data:`PREFIX_STEPS` coefficients (``alpha``, ``beta``) of the run that made it: Lanczos on
    ``diag(nodes)`` from ``√weights`` rebuilds them (`gnuq_core.isotropy.spectra.lanczos`), so a
    check recomputes only the first steps. Records without a rule are returned as they are."""
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
# greedy answer's log-probs and entropies, the gradient pass (its log p, squared norms),
# P(True), the samples' log-probs and their clusters.
QA_EXACT_FIELDS = (
    ".generation.token_log_probs[*]", ".generation.token_entropies[*]", ".generation.stop_log_prob",
    ".log_p", ".grad_sq", ".group_sq.*", ".p_true", ".samples[*].token_log_probs[*]", ".samples[*].stop_log_prob",
    ".samples[*].cluster",
)

_NUTS_NULLABLE = (".nuts.diagnostics.*", ".q.*.diag.*", ".q.*.split.*", ".q.*.split_f.*")
_QA_NULLABLE = (".generation.stop_log_prob", ".generation.stop_token_id", ".samples[*].stop_log_prob",
                ".samples[*].stop_token_id")

# the chapters that read each kind (``gnuq store verify KIND`` builds them all)
_PROXY, _SPECTRA, _QA = ("02_proxy_bias",), ("03_hessian_spectra",), ("06_qa_benchmarks",)
_MCMC = ("04_mcmc_validation", "05_scaling")

_KINDS = [
    Kind("proxy_synthetic", 1, Chaotic(SeedSpread(k=3.0)),
         "one seed of the synthetic proxy-shift sweep (a training run and a GGN per shift)", _PROXY,
         code=("gnuq_core.isotropy.proxy_stored", "gnuq_core.isotropy.proxy")),
    # ~2,000 numbers an item: k = 4.5 (a replicate has one beyond ~1 %; AVX2: ≤ 3.5 sd); accuracies of 408/204
    Kind("proxy_text", 1, Chaotic(SeedSpread(k=4.5, floors=((".train_acc", 0.01), (".test_acc", 0.01)))),
         "one head seed of the sentence-encoder experiment (MiniLM embeddings, a trained head, its GGN)",
         _PROXY, code=("gnuq_core.isotropy.proxy_stored", "gnuq_core.isotropy.text_proxy")),
    Kind("hessian_exact", 1,
         Chaotic(GivenInputs(("*",), rtol=1e-3, atol=1e-5,
                             what="the spectra and quadratic forms of the stored trained network"), atol=1e-12),
         "the exact Hessian and GGN eigenvalues of one small MLP (``width<w>``) or its trained parameters "
         "(``theta/width<w>``)", _SPECTRA, code=("gnuq_core.isotropy.stored", "gnuq_core.isotropy.damping")),
    Kind("hessian_slq_mlp", 1,
         Chaotic(GivenInputs(("*",), rtol=1e-2, atol=1e-5,
                             what="the first Lanczos coefficients of each probe and the quadratic forms of each "
                                  "query, of the stored trained network"), digits=5, atol=1e-6),
         "one SLQ probe or one query point of the large MLP, or its trained parameters (``theta``)",
         _SPECTRA, code=("gnuq_core.isotropy.stored", "gnuq_core.isotropy.spectra"), view=lanczos_view),
    Kind("hessian_slq_lm", 1,
         Chaotic(Within(("*",), rtol=1e-2, atol=1e-6, what=f"the first {PREFIX_STEPS} Lanczos coefficients, the "
                                                           "dimension and the loss"), digits=5, atol=1e-6),
         "one SLQ probe of the LM block's Hessian", _SPECTRA,
         code=("gnuq_core.isotropy.stored", "gnuq_core.isotropy.lm_hessian"), view=lanczos_view),
    Kind("nuts_reference", 1,
         Chaotic(MonteCarloError(nuts_standard_errors, k=6.0,
                                 what="the posterior predictive mean and variance at every query point")),
         "the NUTS reference of one setting: posterior predictive mean and variance per query point, diagnostics",
         _MCMC, code=("gnuq_core.bayes.reference", "gnuq_core.bayes.mcmc"), nullable=_NUTS_NULLABLE,
         full_sample=16),
    Kind("local_estimates", 2,  # 2: θ* stored, so another CPU checks at it (why: gnuq_core.bayes.local)
         Chaotic(GivenInputs((".q.*", ".map.neg_log_joint", ".map.theta_max_abs"), rtol=1e-5, atol=1e-9,
                             what="every local estimate at every query point, the MAP's objective and largest |θ*|, "
                                  "at the stored θ*")),
         "the MAP fit of one setting (θ* bit for bit) and its local estimates at every query point", _MCMC,
         code=("gnuq_core.bayes.local", "gnuq_core.bayes.laplace")),
    Kind("qa", 1,
         Chaotic(GivenInputs(QA_EXACT_FIELDS, rtol=1e-3, atol=5e-5,
                             what="the log-probabilities, entropies, gradient norms, P(True) and clusters of the "
                                  "stored answers")),
         "one question's raw record: greedy answer and samples (token ids, log-probs, entropies), the gradient "
         "pass (log p, squared norms per block), P(True), sample clusters; every score is computed on read "
         "(`gnuq_core.qa.scores`)", _QA,
         code=("gnuq_core.qa.engine", "gnuq_core.lm.gradient", "gnuq_core.lm.decoding", "gnuq_core.lm.baselines"),
         ignore=("seconds", "timings", "torch_threads"), nullable=_QA_NULLABLE),
    Kind("qa_mc", 1, Exact(rtol=1e-4, atol=1e-6),
         "one TruthfulQA multiple-choice question: MC1 and MC2 from the log-probability of every choice", _QA,
         code=("gnuq_core.qa.multiple_choice",)),
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
