"""THE registry of uncertainty scores: every score of a QA record, declared once.

The expensive passes produce a raw record (`gnuq_core.qa.engine.evaluate_question`): the
greedy generation (`gnuq_core.lm.decoding.generate`), the forward-backward pass
(`gnuq_core.lm.gradient`: the answer's ``log_p``, ``grad_sq`` and its split by parameter
group ``group_sq``), P(True) (`gnuq_core.lm.baselines.p_true`), N temperature samples and
their meaning clusters (`gnuq_core.lm.decoding.sample_answers`, `gnuq_core.lm.clustering`).
A *score* is a cheap function of such a record, computed on read and never stored (the
split LM-Polygraph makes between stat calculators and estimators): adding one here needs
no stored file to change. Each `Score` states its name, a label for tables, its kind,
the record fields it reads, the passes that produced them, the function and its
citation. The formulas of the baselines live in `gnuq_core.lm.baselines`; this module is
the only caller of the entropy formulas (semantic entropy included).

Orientation, stated once: **every registered score is "higher = less certain"**
(`ORIENTATION`), so an AUROC for "the answer is wrong" needs no sign. Where the raw
quantity is a confidence (P(True), the sequence probability), the registered function
negates it and its ``oriented`` note says how. AUROC sees only ranks, so scores that
underflow are registered in log10, computed by the estimator's own formulas
(`gnuq_core.estimators`); a zero gradient (stored as null) is ``-inf``, the estimator's
one convention, which ranks below every other value.

Field paths: ``"generation.token_log_probs"`` is ``record["generation"]["token_log_probs"]``;
``"samples[].cluster"`` is the ``cluster`` of every element of ``record["samples"]``.

Public API: `Score`, `SCORES` (name -> Score, in table order), `KINDS`, `ORIENTATION`,
`get`, `names`, `score_record`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gnuq_core.estimators import from_log_p_and_grad_sq, log10_combined, log10_epistemic, sequence_and_normalized
from gnuq_core.lm import baselines as bl

__all__ = ["ORIENTATION", "KINDS", "Score", "SCORES", "get", "names", "score_record"]

ORIENTATION = "higher = less certain"
KINDS: dict[str, str] = {
    "estimator": "the paper's estimator, p = probability of the whole answer",
    "normalised": "the estimator with the length-normalised p̄ = exp(mean_t log p_t) (ablation)",
    "decomposition": "the gradient term of ‖∇θ p‖² = p² ‖∇θ log p‖², without the p² factor",
    "baseline": "published uncertainty baselines",
    "variant": "the estimator over fewer parameters (from the gradient pass's per-group split, field group_sq)",
}

PAPER = "Grünefeld, Frellsen & Hardmeier 2026 (An Isotropic Approach to Efficient UQ with Gradient Norms)"

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Score:
    """One uncertainty score of a QA record.

    Attributes
    ----------
    name : str
        Column name in score tables, key in claims and the CLI.
    label : str
        What it is, for tables.
    kind : str
        One of `KINDS`.
    fields : tuple of str
        The record fields ``fn`` reads (paths as in the module docstring).
    passes : tuple of str
        The expensive passes that produce those fields (the engine's timing keys:
        ``generate``, ``gradient``, ``p_true``, ``sample``, ``cluster``).
    fn : callable
        record -> float, oriented so that higher = less certain.
    citation : str
        Short reference.
    oriented : str
        How the raw quantity was turned into "higher = less certain" ("" if it already is).
    claim : bool
        Among the methods the claims C6/C7 compare.
    """

    name: str
    label: str
    kind: str
    fields: tuple[str, ...]
    passes: tuple[str, ...]
    fn: Callable[[Record], float]
    citation: str
    oriented: str = ""
    claim: bool = False

    def __call__(self, record: Record) -> float:
        return float(self.fn(record))


# ----------------------------------------------------------------------------- helpers


def _n(r: Record) -> int:
    """Answer length in tokens (at least 1)."""
    return max(len(r["generation"]["answer_ids"]), 1)


def _aleatoric(r: Record) -> float:
    """p (1 − p) of the whole answer, p = the sequence probability from the gradient pass's
    ``log_p``, by the estimator's own formula (`gnuq_core.estimators.from_log_p_and_grad_sq`)."""
    return from_log_p_and_grad_sq(r["log_p"], 0.0).aleatoric


def _log10_grad(r: Record) -> float:
    """log10 ‖∇θ log p‖²; a zero gradient is -inf, the estimator's one convention."""
    return math.log10(r["grad_sq"]) if r["grad_sq"] > 0 else -math.inf


def _log10_epi(r: Record) -> float:
    return log10_epistemic(r["log_p"], r["grad_sq"])


def _normalized(r: Record) -> Any:
    """The estimator's `Uncertainty` of the length-normalised p̄ = exp(mean_t log p_t), from
    the greedy answer's token log-probs and ‖∇θ log p‖² (`sequence_and_normalized`)."""
    return sequence_and_normalized(r["generation"]["token_log_probs"], r["grad_sq"])[1]


def _sample_log_probs(r: Record) -> list[float]:
    """log p of each sampled answer, as `gnuq_core.lm.decoding.Sample.log_prob`: the sum over
    its tokens, or the stop token's log-prob for an empty sample (Farquhar et al. 2024's code)."""
    out = []
    for s in r["samples"]:
        stop = s["stop_log_prob"]
        out.append(math.fsum(s["token_log_probs"]) if s["token_log_probs"] or stop is None else stop)
    return out


def _sample_lengths(r: Record) -> list[int]:
    """Tokens of each sampled answer; an empty sample counts as its stop token, length 1."""
    return [max(len(s["answer_ids"]), 1) for s in r["samples"]]


def _clusters(r: Record) -> list[int]:
    return [s["cluster"] for s in r["samples"]]


def _last_block(group_sq: Mapping[str, float]) -> float:
    blocks = sorted(g for g in group_sq if g.startswith("block"))
    return group_sq[blocks[-1]] if blocks else 0.0


# ----------------------------------------------------------------------------- the registry

_GEN, _GRAD, _SAMPLE = ("generate",), ("generate", "gradient"), ("generate", "sample")
_EPI_FIELDS = ("log_p", "grad_sq")
_NORM_FIELDS = ("generation.token_log_probs", "grad_sq")
_LEN_NORM = "Malinin & Gales 2021 (length normalisation)"

_ALL: tuple[Score, ...] = (
    # the paper's estimator, p = whole-sequence probability
    Score("epistemic", "‖∇θ p‖² (log10), p = sequence probability", "estimator", _EPI_FIELDS, _GRAD,
          _log10_epi, PAPER, "log10 (ranks unchanged)", claim=True),
    Score("aleatoric", "p (1 − p), p = sequence probability", "estimator", ("log_p",), _GRAD,
          _aleatoric, PAPER, claim=True),
    Score("combined", "epistemic + aleatoric (log10), p = sequence probability", "estimator", _EPI_FIELDS, _GRAD,
          lambda r: log10_combined(_log10_epi(r), _aleatoric(r)),
          PAPER, "log10 (ranks unchanged)", claim=True),
    # the same with the length-normalised p = exp(mean log p_t)
    Score("epistemic_norm", "‖∇θ p̄‖², p̄ = exp(mean_t log p_t)", "normalised", _NORM_FIELDS, _GRAD,
          lambda r: _normalized(r).log10_epistemic, f"{PAPER}; {_LEN_NORM}", "log10 (ranks unchanged)"),
    Score("aleatoric_norm", "p̄ (1 − p̄)", "normalised", ("generation.token_log_probs",), _GRAD,
          lambda r: sequence_and_normalized(r["generation"]["token_log_probs"], 0.0)[1].aleatoric,
          f"{PAPER}; {_LEN_NORM}"),
    Score("combined_norm", "‖∇θ p̄‖² + p̄ (1 − p̄) (log10)", "normalised", _NORM_FIELDS, _GRAD,
          lambda r: log10_combined(_normalized(r).log10_epistemic, _normalized(r).aleatoric), f"{PAPER}; {_LEN_NORM}",
          "log10 (ranks unchanged)"),
    # decomposition: ‖∇p‖² = p² ‖∇ log p‖²
    Score("grad_log_p", "‖∇θ log p‖² (log10): the gradient without the p² factor", "decomposition",
          ("grad_sq",), _GRAD, _log10_grad, PAPER, "log10 (ranks unchanged)"),
    Score("grad_log_p_per_token", "‖∇θ log p‖² / T (log10)", "decomposition",
          ("grad_sq", "generation.answer_ids"), _GRAD,
          lambda r: _log10_grad(r) - math.log10(_n(r)), PAPER, "log10 (ranks unchanged)"),
    Score("grad_log_p_norm", "‖∇θ log p̄‖² = ‖∇θ log p‖² / T² (log10)", "decomposition",
          ("grad_sq", "generation.answer_ids"), _GRAD,
          lambda r: _log10_grad(r) - 2 * math.log10(_n(r)), PAPER, "log10 (ranks unchanged)"),
    # baselines
    Score("p_true", "1 − P(True) (Kadavath et al. 2022)", "baseline", ("p_true",), ("generate", "p_true"),
          lambda r: 1 - r["p_true"], "Kadavath et al. 2022",
          "negated: P(True) is a confidence, the score is 1 − P(True)", claim=True),
    Score("max_seq_prob", "−log p of the greedy answer (maximum sequence probability)", "baseline",
          ("log_p",), _GRAD, lambda r: -r["log_p"], "Fadeeva et al. 2023 (LM-Polygraph)",
          "negated: the sequence probability p is a confidence, the score is −log p", claim=True),
    Score("perplexity", "−mean_t log p_t of the greedy answer", "baseline", ("log_p", "generation.answer_ids"),
          _GRAD, lambda r: -r["log_p"] / _n(r), "Ren et al. 2023", "log of the perplexity (ranks unchanged)"),
    Score("mean_token_entropy", "mean next-token entropy over the answer", "baseline",
          ("generation.token_entropies",), _GEN, lambda r: bl.mean_token_entropy(r["generation"]["token_entropies"]),
          "Malinin & Gales 2021", claim=True),
    Score("predictive_entropy", "−mean log p of N samples", "baseline", ("samples[].token_log_probs", "samples[].stop_log_prob"), _SAMPLE,
          lambda r: bl.predictive_entropy(_sample_log_probs(r)), "Malinin & Gales 2021; Kuhn et al. 2023",
          claim=True),
    Score("ln_predictive_entropy", "−mean (log p / length) of N samples", "baseline",
          ("samples[].token_log_probs", "samples[].stop_log_prob", "samples[].answer_ids"), _SAMPLE,
          lambda r: bl.length_normalized_predictive_entropy(_sample_log_probs(r), _sample_lengths(r)),
          "Malinin & Gales 2021", claim=True),
    Score("semantic_entropy", "entropy over meaning clusters of N samples (length-normalised p)", "baseline",
          ("samples[].token_log_probs", "samples[].stop_log_prob", "samples[].answer_ids", "samples[].cluster"),
          _SAMPLE + ("cluster",),
          lambda r: bl.semantic_entropy(_sample_log_probs(r), _clusters(r), _sample_lengths(r)),
          "Kuhn et al. 2023; Farquhar et al. 2024", claim=True),
    Score("discrete_semantic_entropy", "entropy of cluster frequencies of N samples", "baseline",
          ("samples[].cluster",), _SAMPLE + ("cluster",), lambda r: bl.discrete_semantic_entropy(_clusters(r)),
          "Farquhar et al. 2024"),
    # cheaper variants of the estimator (from the per-group pass)
    Score("epistemic_no_embeddings", "‖∇θ p‖² over all parameters but the embeddings (log10)", "variant",
          ("log_p", "group_sq"), _GRAD,
          lambda r: log10_epistemic(r["log_p"], sum(r["group_sq"].values()) - r["group_sq"].get("embeddings", 0.0)),
          PAPER, "log10 (ranks unchanged)"),
    Score("epistemic_last_block", "‖∇θ p‖² over the last decoder block only (log10)", "variant",
          ("log_p", "group_sq"), _GRAD,
          lambda r: log10_epistemic(r["log_p"], _last_block(r["group_sq"])), PAPER,
          "log10 (ranks unchanged)"),
)

SCORES: dict[str, Score] = {s.name: s for s in _ALL}
assert len(SCORES) == len(_ALL) and all(s.kind in KINDS for s in _ALL), "score names must be unique, kinds known"


def get(name: str) -> Score:
    """The registered score ``name``; a one-line error naming the registered ones otherwise."""
    try:
        return SCORES[name]
    except KeyError:
        raise KeyError(f"no score {name!r} in gnuq_core.qa.scores; registered: {', '.join(SCORES)}") from None


def names(kind: str | Iterable[str] | None = None, *, claim: bool | None = None,
          needs: str | None = None) -> list[str]:
    """Registered score names in table order, filtered.

    Parameters
    ----------
    kind : str or iterable of str, optional
        Keep these kinds (see `KINDS`).
    claim : bool, optional
        Keep the methods the claims compare (True) or the others (False).
    needs : str, optional
        Keep the scores that need this pass (e.g. ``"sample"``).
    """
    kinds = None if kind is None else ({kind} if isinstance(kind, str) else set(kind))
    unknown = (kinds or set()) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown score kind {sorted(unknown)}; use one of {', '.join(KINDS)}")
    return [s.name for s in _ALL if (kinds is None or s.kind in kinds) and (claim is None or s.claim == claim)
            and (needs is None or needs in s.passes)]


def score_record(record: Record, which: Iterable[str] | None = None, *, missing: str = "nan") -> dict[str, float]:
    """Scores of one record, ``{name: value}`` (all registered ones by default).

    ``missing`` says what a score gets whose pass did not run (a field is absent or null):
    ``"nan"`` (default), ``"skip"`` (left out) or ``"raise"``.
    """
    if missing not in ("nan", "skip", "raise"):
        raise ValueError(f"missing={missing!r}: use 'nan', 'skip' or 'raise'")
    chosen = list(SCORES.values()) if which is None else [get(n) for n in which]
    out: dict[str, float] = {}
    for score in chosen:
        try:
            out[score.name] = score(record)
        except (KeyError, TypeError):
            if missing == "raise":
                raise
            if missing == "nan":
                out[score.name] = float("nan")
    return out
