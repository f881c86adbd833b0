"""The claims ledger: the paper's claims, who measures them, and the rules for verdicts.

A chapter that owns a claim measures it and calls :func:`record`, which applies that
claim's rule (code, below) and writes ``<chapter>.claims.json`` beside the executed
notebook. The ledger page collects those files with :func:`collect`; a claim whose owner
ran but did not report it makes :func:`collect` raise, so gaps cannot be silent.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from gnuq_core.repro.paths import chapter_name, generated_dir

REPRODUCED = "reproduced"
PARTLY = "partly reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_MEASURED = "not yet measured"
INCONCLUSIVE = "inconclusive"  # measured, but the data cannot decide (no signal, too few items)
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED, INCONCLUSIVE, NOT_MEASURED)


@dataclass(frozen=True)
class Measurement:
    """What a chapter measured for one claim.

    Attributes
    ----------
    claim : str
        Claim id, e.g. ``"C1"``.
    value : float
        The headline number the rule judges (see each claim's ``measure``).
    ci : tuple of float
        95% interval of ``value`` (lower, upper).
    settings : dict
        The settings under which it was measured (model, profile, sizes, seeds).
    details : dict
        Further numbers the rule needs (documented per claim) or the reader wants.
    note : str
        One sentence the ledger shows beside the verdict: the main caveat, built from
        measured numbers (e.g. how the verdict changes under another setting).
    evidence : dict of str to int
        How much data the number rests on, as counts the claim's :class:`Gate` checks
        before its rule may judge (e.g. ``{"seeds": 3, "settings": 12}`` or
        ``{"correct": 41, "wrong": 776}``); the ledger shows them.
    """

    claim: str
    value: float
    ci: tuple[float, float]
    settings: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    evidence: dict[str, int] = field(default_factory=dict)


C1_MIN_RHO = 0.44
"""C1's threshold: the lowest Spearman ρ the paper reports (0.44–0.99)."""
C3_MIN_DIFFERENCE = -0.1
"""C3's threshold on ρ(‖g‖²) − ρ(Laplace): "about as good" means at most 0.1 worse."""
SETTING_WORKS_WITHIN = 0.05
"""Chapter 04's per-setting reading (not a ledger rule): ρ(‖g‖²) within this of the best
alternative counts as "works"; it brackets C3's threshold with :data:`SETTING_FAILS_BEYOND`."""
SETTING_FAILS_BEYOND = 0.15
"""Chapter 04's per-setting reading: ρ(‖g‖²) more than this below the best alternative "fails"."""


def _ci_ok(m: Measurement) -> bool:
    lo, hi = m.ci
    return all(math.isfinite(x) for x in (m.value, lo, hi)) and lo <= m.value <= hi


def _at_least(threshold: float) -> Callable[[Measurement], str]:
    """Reproduced if the whole CI is ≥ threshold, partly if only the point is, else not."""

    def rule(m: Measurement) -> str:
        if m.ci[0] >= threshold:
            return REPRODUCED
        return PARTLY if m.value >= threshold else NOT_REPRODUCED

    return rule


def _rule_c6(m: Measurement) -> str:
    """Combined is best unless its CI lies entirely below another method's AUROC; and above chance."""
    others = {k: v for k, v in m.details["auroc"].items() if k != "combined"}
    best = m.ci[1] >= max(others.values())
    above_chance = m.ci[0] > 0.5
    if best and above_chance:
        return REPRODUCED
    return PARTLY if (best or above_chance) else NOT_REPRODUCED


def _rule_c7(m: Measurement) -> str:
    """Epistemic near chance and P(True) best (as in C6's rule).

    Near chance: the point estimate lies in [0.4, 0.6] and its CI overlaps [0.45, 0.55]
    (a wide CI alone must not make a far-from-chance AUROC count as chance).
    """
    near_chance = 0.4 <= m.value <= 0.6 and m.ci[0] <= 0.55 and m.ci[1] >= 0.45
    auroc, ci = m.details["auroc"], m.details["ci"]
    others = [v for k, v in auroc.items() if k != "p_true"]
    p_true_best = ci["p_true"][1] >= max(others)
    if near_chance and p_true_best:
        return REPRODUCED
    return PARTLY if (near_chance or p_true_best) else NOT_REPRODUCED


def _rule_c9(m: Measurement) -> str:
    """Transferred threshold: balanced accuracy CI reaches chance (≤ 0.55) → reproduced.

    Only meaningful if the score works within a model: a within-model balanced accuracy
    of 0.55 or less makes the transfer test inconclusive (nothing to lose in transfer).
    """
    within = m.details["within_model_balanced_accuracy"]
    if within <= 0.55:
        return INCONCLUSIVE
    if m.ci[0] <= 0.55:
        return REPRODUCED
    return PARTLY if m.value < within - 0.05 else NOT_REPRODUCED


@dataclass(frozen=True)
class Claim:
    """One claim of the paper.

    Attributes
    ----------
    id, statement, paper_number : str
        The paper's claim and its number, as the paper states them.
    owner : str
        Notebook stem of the chapter that measures it.
    measure : str
        What ``Measurement.value`` must be for this claim (and the keys of ``details``).
    rule : callable
        ``Measurement -> verdict``; its docstring or source is the rule.
    rule_text : str
        The rule in one sentence, shown in the ledger beside the verdict.
    """

    id: str
    statement: str
    paper_number: str
    owner: str
    measure: str
    rule: Callable[[Measurement], str]
    rule_text: str


CLAIMS: dict[str, Claim] = {c.id: c for c in [
    Claim("C1", "On synthetic problems ‖g‖² correlates with the MCMC reference predictive variance",
          "Spearman ρ 0.44–0.99", "04_mcmc_validation",
          "median Spearman ρ(‖g‖², MCMC variance) over settings, bootstrap CI",
          _at_least(C1_MIN_RHO), f"reproduced if the CI's lower end ≥ {C1_MIN_RHO}; partly if only the point is"),
    Claim("C2", "The correlation improves as the model grows", "ρ increases with size",
          "05_scaling", "slope of ρ against log10(#parameters), CI over seeds",
          _at_least(1e-12), "reproduced if the slope's CI excludes zero from above; partly if only the point slope is > 0"),
    Claim("C3", "In classification, ‖g‖² alone is about as good as a Laplace approximation",
          "comparable ρ", "04_mcmc_validation",
          "ρ(‖g‖²) − ρ(Laplace) against the MCMC reference, bootstrap CI",
          _at_least(C3_MIN_DIFFERENCE),
          f"reproduced if the CI of the difference lies above −{abs(C3_MIN_DIFFERENCE)}; partly if only the point does"),
    Claim("C4", "A covariance from proxy (non-training) data distorts the estimate; isotropy avoids it",
          "structured distortion", "02_proxy_bias",
          "ρ(isotropic) − ρ(proxy Laplace) against the reference at the largest shift, CI over seeds",
          _at_least(1e-12), "reproduced if the CI lies above 0; partly if only the point does"),
    Claim("C5", "Hessian spectra: few large eigenvalues and a bulk near zero; damped inverse ≈ multiple of I",
          "bulk near zero", "03_hessian_spectra",
          "Spearman ρ(gᵀ(H+λI)⁻¹g, ‖g‖²) at the chosen damping, bootstrap CI",
          _at_least(0.9), "reproduced if the CI lies above 0.9; partly if only the point does"),
    Claim("C6", "TruthfulQA: the combined estimate has the best AUROC for answer correctness",
          "AUROC 0.63", "06_qa_benchmarks",
          "AUROC of combined; details: auroc {method: value}",
          _rule_c6, "reproduced if combined's CI is not entirely below any other method's AUROC and lies above 0.5"),
    Claim("C7", "TriviaQA: epistemic is near chance; P(True) is best", "epistemic ≈ 0.5",
          "06_qa_benchmarks", "AUROC of epistemic; details: auroc, ci {method: [lo, hi]}",
          _rule_c7, "reproduced if epistemic's AUROC is in [0.4, 0.6] with a CI meeting [0.45, 0.55] and P(True)'s CI is not entirely below any other method"),
    Claim("C8", "The estimator is 46–107× faster than the baselines", "46–107×",
          "07_efficiency", "speed-up over the fastest sampling baseline (median ratio), CI",
          _at_least(46.0), "reproduced if the CI of the speed-up lies above 46×; partly if only the point does"),
    Claim("C9", "Raw gradient norms do not transfer across models", "chance-level transfer",
          "06_qa_benchmarks",
          "balanced accuracy of a threshold fitted on one model, applied to another; details: within_model_balanced_accuracy",
          _rule_c9, "inconclusive unless the score works within a model (balanced accuracy > 0.55); then reproduced if the transferred balanced accuracy's CI reaches 0.55 or below, partly if it is > 0.05 below within-model"),
]}


def judge(m: Measurement) -> str:
    """Apply the claim's rule to a measurement; an invalid number or CI is an error.

    A measurement flagged ``details["degenerate"]`` (e.g. every answer wrong, so no AUROC
    exists) is judged inconclusive whatever its placeholder value.
    """
    if m.claim not in CLAIMS:
        raise KeyError(f"unknown claim {m.claim!r}; known: {', '.join(CLAIMS)}")
    if not _ci_ok(m):
        raise ValueError(f"{m.claim}: value {m.value} with CI {m.ci} is not a finite number inside its interval")
    if m.details.get("degenerate"):
        return INCONCLUSIVE
    return CLAIMS[m.claim].rule(m)


def record(m: Measurement) -> dict[str, Any]:
    """Judge ``m`` and append it to this chapter's ``<chapter>.claims.json``.

    The calling chapter must own the claim. Returns the stored entry (with ``verdict``).
    """
    chapter = chapter_name()
    owner = CLAIMS[m.claim].owner if m.claim in CLAIMS else None
    if chapter != "interactive" and owner != chapter:
        raise ValueError(f"chapter {chapter!r} records {m.claim}, which {owner!r} owns")
    entry = {**asdict(m), "ci": list(m.ci), "verdict": judge(m), "chapter": chapter}
    path = generated_dir() / f"{chapter}.claims.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = json.loads(path.read_text()) if path.exists() else {}
    entries[m.claim] = entry
    path.write_text(json.dumps(entries, indent=2, default=float))
    return entry


def reset(chapter: str | None = None) -> None:
    """Remove a chapter's claims file (the runner calls this before executing it)."""
    path = generated_dir() / f"{chapter or chapter_name()}.claims.json"
    path.unlink(missing_ok=True)


def collect(generated: Path | None = None, chapters: list[str] | None = None) -> list[dict[str, Any]]:
    """One ledger row per claim, in id order.

    A claim whose owner chapter was executed (its provenance file exists) but did not
    report the claim raises ``RuntimeError``; an owner that is not in ``chapters`` (the
    book's table of contents) gives ``"not yet measured"``.
    """
    generated = generated or generated_dir()
    rows = []
    for claim in CLAIMS.values():
        row = {"id": claim.id, "statement": claim.statement, "paper": claim.paper_number,
               "owner": claim.owner, "rule": claim.rule_text, "verdict": NOT_MEASURED,
               "value": None, "ci": None, "note": ""}
        ran = (generated / f"{claim.owner}.provenance.json").exists()
        if chapters is not None and claim.owner not in chapters:
            ran = False
        claims_file = generated / f"{claim.owner}.claims.json"
        entries = json.loads(claims_file.read_text()) if claims_file.exists() else {}
        if claim.id in entries:
            e = entries[claim.id]
            row.update(value=e["value"], ci=e["ci"], verdict=e["verdict"], settings=e["settings"],
                       note=e.get("note", ""))
        elif ran:
            raise RuntimeError(f"chapter {claim.owner} ran but did not report claim {claim.id}: "
                               f"call gnuq_core.repro.claims.record(Measurement({claim.id!r}, ...)) in it")
        rows.append(row)
    return rows


def verdict_label(verdict: str, profile: str) -> str:
    """A verdict as the ledger shows it: ``"reproduced (preview)"`` outside the paper edition
    (:data:`gnuq_core.repro.provenance.PAPER_PROFILE`). *Not yet measured* carries no label:
    nothing was judged.
    """
    from gnuq_core.repro.provenance import is_paper_edition

    if verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r}; known: {', '.join(VERDICTS)}")
    if is_paper_edition(profile) or verdict == NOT_MEASURED:
        return verdict
    return f"{verdict} (preview)"
