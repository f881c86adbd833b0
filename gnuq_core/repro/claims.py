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

from gnuq_core.repro.files import read_text, write_atomic
from gnuq_core.repro.paths import chapter_name, generated_dir
from gnuq_core.repro.provenance import is_paper_edition

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
C8_MIN_SPEEDUP = 46.0
"""C8's threshold: the lowest speed-up the paper reports (46–107×)."""
MIN_PER_CLASS = 30
"""Fewest correct and fewest wrong answers a model needs for its AUROC to enter a QA claim."""
CHANCE_BAND = (0.4, 0.6)
"""C7's "near chance": the epistemic AUROC's whole interval lies in this band."""
EVIDENCE_WORDS = {"correct": "fewest correct answers of a model", "wrong": "fewest wrong answers of a model",
                  "models": "models", "transfers": "transfers between models", "seeds": "seeds",
                  "settings": "settings", "query_points": "query points (fewest per setting)", "sizes": "model sizes",
                  "questions": "questions per model", "rounds": "timing rounds per model"}
"""What each evidence count means, as the ledger labels it (the QA counts are the minimum over models)."""
TRANSFER_CHANCE = 0.55
"""C9: a balanced accuracy at or below this is chance level (and a score that does not beat
it within a model has nothing to lose in transfer)."""


@dataclass(frozen=True)
class Gate:
    """What a measurement must hold before its claim's rule may judge it.

    Attributes
    ----------
    min_counts : dict of str to int
        Fewest items of each kind (keys of `Measurement.evidence`, which must report them).
    max_width : float
        Widest 95% interval the rule accepts (upper − lower), in the value's units.
    relative : bool
        ``max_width`` is relative to the value (for ratios such as a speed-up).
    check : callable, optional
        A claim-specific condition: ``Measurement -> reason or None`` (e.g. C9 needs a score
        that works within a model before transfer can fail).
    outside : callable, optional
        ``Measurement -> bool``: the whole interval lies outside what the claim allows (e.g. a
        speed-up whose upper end is below the claimed 46×). Such a measurement is judged
        however wide its interval: no value in it could reproduce the claim, so the width
        cannot change the verdict (only to *not reproduced*; the counts still apply).
    outside_text : str
        ``outside`` in words, for the ledger.
    """

    min_counts: dict[str, int]
    max_width: float
    relative: bool = False
    check: Callable[[Measurement], str | None] | None = None
    outside: Callable[[Measurement], bool] | None = None
    outside_text: str = ""

    def text(self) -> str:
        """The gate in words, for the ledger."""
        counts = ", ".join(f"≥ {n} {k.replace('_', ' ')}" for k, n in self.min_counts.items())
        width = (f"an interval no wider than {self.max_width:.0%} of the value" if self.relative
                 else f"an interval no wider than {self.max_width:g}")
        if self.outside is not None:
            width += f" (any width if {self.outside_text})"
        return f"{counts}; {width}" if counts else width

    def reason(self, m: Measurement) -> str | None:
        """Why ``m`` cannot be judged (one sentence), or ``None`` if the data can decide."""
        missing = [k for k in self.min_counts if k not in m.evidence]
        if missing:
            raise ValueError(f"{m.claim}: evidence {', '.join(map(repr, missing))} not reported; the chapter must "
                             f"pass Measurement(..., evidence={{{', '.join(repr(k) + ': n' for k in missing)}}})")
        short = [f"{m.evidence[k]} {k.replace('_', ' ')} (needs ≥ {n})" for k, n in self.min_counts.items()
                 if m.evidence[k] < n]
        if short:
            return "too little data: " + ", ".join(short)
        width = m.ci[1] - m.ci[0]
        allowed = self.max_width * abs(m.value) if self.relative else self.max_width
        if width > allowed and not (self.outside is not None and self.outside(m)):
            return f"interval too wide: {width:.3g} (allowed ≤ {allowed:.3g}); " + seeds_to_decide(m, width, allowed)
        return self.check(m) if self.check else None


def _ci_ok(m: Measurement) -> bool:
    lo, hi = m.ci
    return all(math.isfinite(x) for x in (m.value, lo, hi)) and lo <= m.value <= hi


def _num(x: float) -> str:
    return f"{x:.3g}"


def _ci_text(m: Measurement) -> str:
    return f"[{_num(m.ci[0])}, {_num(m.ci[1])}]"


def seeds_to_decide(m: Measurement, reach: float, gap: float) -> str:
    """How much more evidence would decide ``m``: its interval reaches ``reach`` from its point and
    must shrink to ``gap``; intervals narrow as 1/√n, so about n·(reach/gap)² of the first count
    of ``m.evidence`` (seeds where reported), assuming the point stays where it is."""
    unit = "seeds" if "seeds" in m.evidence else next(iter(m.evidence), "")
    n = m.evidence.get(unit)
    if not n or gap <= 0:
        return "more data would not decide it: the point sits on the threshold"
    need = math.ceil(n * (reach / gap) ** 2)
    return f"about {need} {unit.replace('_', ' ')} (now {n}) would decide it, if the point stays"


def _at_least(threshold: float, shown: str | None = None) -> Callable[[Measurement], str]:
    """Reproduced if the whole CI is ≥ threshold, not reproduced if the whole CI is below it,
    inconclusive if it straddles the threshold (the one rule every threshold claim shares)."""
    bound = shown or f"{threshold:g}"

    def rule(m: Measurement) -> str:
        if m.ci[0] >= threshold:
            return REPRODUCED
        return NOT_REPRODUCED if m.ci[1] < threshold else INCONCLUSIVE

    def explain(m: Measurement, verdict: str) -> str:
        if verdict == REPRODUCED:
            return f"the whole interval {_ci_text(m)} lies at or above {bound}"
        if verdict == NOT_REPRODUCED:
            return f"{_num(m.value)} {_ci_text(m)}: the whole interval lies below {bound}"
        reach = m.value - m.ci[0] if m.value >= threshold else m.ci[1] - m.value
        return (f"{_num(m.value)} {_ci_text(m)}: the interval straddles {bound}; "
                + seeds_to_decide(m, reach, abs(m.value - threshold)))

    rule.explain = explain  # type: ignore[attr-defined]
    return rule


STRADDLE = "inconclusive if it straddles the threshold (saying how many seeds would decide)"
"""The one rule for "inconclusive" that every threshold claim shares (beside its evidence gate)."""


def _by_parts(m: Measurement) -> str:
    """A compound claim has no rule of its own: `assess` derives it from its parts."""
    raise ValueError(f"{m.claim} is judged by its parts (Claim.parts), not by one rule")


_by_parts.explain = lambda m, verdict: f"derived from its parts: {verdict}"  # type: ignore[attr-defined]


def _rule_c9(m: Measurement) -> str:
    """Transfer loses (the paired difference transferred − within-model has its CI below 0)
    and lands at chance (the transferred CI reaches :data:`TRANSFER_CHANCE`): reproduced; loses
    but stays above chance: partly; no significant loss: not reproduced."""
    _, _, diff_hi = m.details["difference"]
    if diff_hi >= 0:
        return NOT_REPRODUCED
    return REPRODUCED if m.ci[0] <= TRANSFER_CHANCE else PARTLY


def _explain_c9(m: Measurement, verdict: str) -> str:
    d, lo, hi = m.details["difference"]
    diff = f"transferred − within model = {d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
    if verdict == NOT_REPRODUCED:
        return f"the transferred threshold does not lose significantly ({diff})"
    if verdict == PARTLY:
        return f"it loses ({diff}) but its interval {_ci_text(m)} stays above chance ({TRANSFER_CHANCE})"
    return f"it loses ({diff}) and its interval {_ci_text(m)} reaches chance ({TRANSFER_CHANCE})"


_rule_c9.explain = _explain_c9  # type: ignore[attr-defined]


def _c9_needs_signal(m: Measurement) -> str | None:
    within = m.details["within_model_balanced_accuracy"]
    if within <= TRANSFER_CHANCE:
        return (f"the score does not work within a model (balanced accuracy {within:.2f} ≤ {TRANSFER_CHANCE}): "
                "nothing to lose in transfer")
    return None


_QA_GATE = Gate({"models": 1, "correct": MIN_PER_CLASS, "wrong": MIN_PER_CLASS}, max_width=0.15)

C6_PAPER_AUROC = 0.63
"""The TruthfulQA AUROC of the combined estimate the paper reports (claim C6)."""


def _at_chance(m: Measurement) -> bool:
    """Whether the method's own AUROC interval (``details["auroc_ci"]``) reaches 0.5 or lies below:
    a method no better than chance is nobody's best."""
    ci = m.details.get("auroc_ci")
    return ci is not None and ci[0] <= 0.5


def _highest(m: Measurement) -> str:
    """Highest by its point estimate, significantly worse than none and above chance: reproduced;
    some method significantly better (a paired difference's CI below 0), or its own AUROC interval
    reaching chance: not reproduced; else partly."""
    diffs = m.details["differences"]
    if any(hi < 0 for _, _, hi in diffs.values()) or _at_chance(m):
        return NOT_REPRODUCED
    return REPRODUCED if all(d >= 0 for d, _, _ in diffs.values()) else PARTLY


def _worst_difference(m: Measurement) -> str:
    """The paired difference with the lowest upper end, as ``"name −0.05 [−0.08, −0.02]"``."""
    name, (d, lo, hi) = min(m.details["differences"].items(), key=lambda kv: kv[1][2])
    return f"{name.replace('_', ' ')} {d:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _chance_text(m: Measurement) -> str:
    lo, hi = m.details["auroc_ci"]
    return f"its own AUROC interval [{lo:.3f}, {hi:.3f}] reaches chance (0.5): no better than chance is nobody's best"


def _explain_highest(m: Measurement, verdict: str) -> str:
    if verdict == REPRODUCED:
        return "its point is the highest, no method is significantly better and it is above chance"
    if verdict == PARTLY:
        return f"another method's point is higher, none significantly (closest: {_worst_difference(m)})"
    if _at_chance(m) and not any(hi < 0 for _, _, hi in m.details["differences"].values()):
        return _chance_text(m)
    return f"a method is significantly better (difference to it: {_worst_difference(m)})"


def _beats_all(m: Measurement) -> str:
    """Every paired difference's CI above 0 and the method above chance: reproduced; one below 0,
    or the method's own AUROC interval reaching chance: not reproduced; else partly."""
    diffs = m.details["differences"]
    if any(hi < 0 for _, _, hi in diffs.values()) or _at_chance(m):
        return NOT_REPRODUCED
    return REPRODUCED if all(lo > 0 for _, lo, _ in diffs.values()) else PARTLY


def _explain_beats_all(m: Measurement, verdict: str) -> str:
    if verdict == REPRODUCED:
        return "every paired difference lies above 0 and it is above chance"
    if verdict == PARTLY:
        return f"not every paired difference lies above 0, none below (weakest: {_worst_difference(m)})"
    if _at_chance(m) and not any(hi < 0 for _, _, hi in m.details["differences"].values()):
        return _chance_text(m)
    return f"a method is significantly better (difference to it: {_worst_difference(m)})"


def _level(target: float) -> Callable[[Measurement], str]:
    def rule(m: Measurement) -> str:
        return REPRODUCED if m.ci[0] <= target <= m.ci[1] else NOT_REPRODUCED

    def explain(m: Measurement, verdict: str) -> str:
        if verdict == REPRODUCED:
            return f"the interval {_ci_text(m)} contains {target:g}"
        return f"the interval {_ci_text(m)} lies {'below' if m.ci[1] < target else 'above'} {target:g}"

    rule.explain = explain  # type: ignore[attr-defined]
    return rule


def _near_chance(m: Measurement) -> str:
    """The whole CI inside :data:`CHANCE_BAND`: reproduced; the whole CI outside it: not; else partly."""
    lo, hi = CHANCE_BAND
    if lo <= m.ci[0] and m.ci[1] <= hi:
        return REPRODUCED
    return NOT_REPRODUCED if (m.ci[1] < lo or m.ci[0] > hi) else PARTLY


def _explain_near_chance(m: Measurement, verdict: str) -> str:
    band = f"the chance band [{CHANCE_BAND[0]}, {CHANCE_BAND[1]}]"
    if verdict == REPRODUCED:
        return f"the whole interval {_ci_text(m)} lies in {band}"
    if verdict == PARTLY:
        return f"the interval {_ci_text(m)} overlaps {band}"
    if m.ci[1] < CHANCE_BAND[0]:
        return f"the interval {_ci_text(m)} lies below {band}: worse than chance, not near it"
    return f"the interval {_ci_text(m)} lies above {band}: better than chance"


_highest.explain = _explain_highest  # type: ignore[attr-defined]
_beats_all.explain = _explain_beats_all  # type: ignore[attr-defined]
_near_chance.explain = _explain_near_chance  # type: ignore[attr-defined]


def explain(rule: Callable[[Measurement], str], m: Measurement, verdict: str, gate_reason: str = "") -> str:
    """The one-line reason of ``verdict``: the gate's reason if it failed, else the rule's own
    explanation (every rule of `CLAIMS` and `PARTS` has one)."""
    if verdict == INCONCLUSIVE and (gate_reason or not hasattr(rule, "explain")):
        return f"the data cannot decide: {gate_reason}" if gate_reason else "the data cannot decide"
    return rule.explain(m, verdict)  # a rule's own "inconclusive": the interval straddles its threshold  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Part:
    """One atomic statement of a compound claim, with its own measure, rule and gate.

    Attributes mean what `Claim`'s do; ``id`` is the claim's id and a letter (``"C6a"``).
    """

    id: str
    statement: str
    measure: str
    rule: Callable[[Measurement], str]
    rule_text: str
    gate: Gate = _QA_GATE


def derive(verdicts: list[str]) -> str:
    """A compound claim's verdict from its parts': every part reproduced → reproduced; every
    part that could be judged not reproduced → not reproduced; no part judged → inconclusive;
    anything else → partly reproduced."""
    judged = [v for v in verdicts if v != INCONCLUSIVE]
    if not judged:
        return INCONCLUSIVE
    if all(v == REPRODUCED for v in verdicts):
        return REPRODUCED
    if all(v == NOT_REPRODUCED for v in judged):
        return NOT_REPRODUCED
    return PARTLY


DERIVE_TEXT = ("reproduced if every part is; not reproduced if every part that the data can judge is not; "
               "partly otherwise")

_PARTS: dict[str, tuple[Part, ...]] = {
    "C6": (
        Part("C6a", "combined has the highest mean AUROC on TruthfulQA", "combined − the best other method "
             "(mean AUROC over models; paired bootstrap CI); details: differences {method: [combined − method, lo, hi]}",
             _highest, "reproduced if combined's point is the highest, no method is significantly better and its "
                       "AUROC interval lies above chance (0.5); not reproduced if one is better or it is at chance"),
        Part("C6b", f"its AUROC is about {C6_PAPER_AUROC}", "mean AUROC of combined over models",
             _level(C6_PAPER_AUROC), f"reproduced if the CI contains {C6_PAPER_AUROC}"),
        Part("C6c", "combined beats P(True) and the entropy baselines", "the smallest paired difference combined − "
             "baseline (P(True), mean token, predictive, length-normalised predictive, semantic entropy)",
             _beats_all, "reproduced if every paired difference lies above 0 and combined is above chance; not "
                         "reproduced if one lies below or combined is at chance"),
    ),
    "C7": (
        Part("C7a", "epistemic is near chance on TriviaQA", "mean AUROC of epistemic over models", _near_chance,
             f"reproduced if the CI lies inside [{CHANCE_BAND[0]}, {CHANCE_BAND[1]}]; not if it lies outside"),
        Part("C7b", "combined is near chance on TriviaQA (the abstract's wording)", "mean AUROC of combined",
             _near_chance, f"reproduced if the CI lies inside [{CHANCE_BAND[0]}, {CHANCE_BAND[1]}]; not if outside"),
        Part("C7c", "P(True) is the best method on TriviaQA", "the smallest paired difference P(True) − other method",
             _beats_all, "reproduced if every paired difference lies above 0 and P(True) is above chance; not "
                         "reproduced if one lies below or P(True) is at chance"),
    ),
}
PARTS: dict[str, Part] = {p.id: p for ps in _PARTS.values() for p in ps}
"""Every part of every compound claim, by id."""



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
    gate : Gate
        What the data must hold before ``rule`` may judge (else *inconclusive*).
    cross_check : str
        Label of the cross-checks chapter's section that checks this claim's numbers
        against an independent implementation.
    parts : tuple of Part
        A compound claim's atomic statements: its verdict is then derived from theirs (`derive`).
    quantity : str
        What the measured number is, in a few words with its unit (the ledger's "measured" label).
    terms : tuple of str
        Glossary terms the claim's measurement rests on (the ledger links them).
    deviations : tuple of str
        What we had to choose because the paper does not say (the ledger lists them per claim).
    tolerance : str
        The rule in a few words, for the reproduction table (``"CI ≥ 0.44"``).

    The section of the owner chapter that measures the claim carries the label `anchor`.
    """

    id: str
    statement: str
    paper_number: str
    owner: str
    measure: str
    rule: Callable[[Measurement], str]
    rule_text: str
    gate: Gate
    cross_check: str
    parts: tuple[Part, ...] = ()
    quantity: str = ""
    terms: tuple[str, ...] = ()
    deviations: tuple[str, ...] = ()
    tolerance: str = ""

    @property
    def anchor(self) -> str:
        """The MyST label of the section that measures the claim (``claim-c1``)."""
        return f"claim-{self.id.lower()}"


CLAIMS: dict[str, Claim] = {c.id: c for c in [
    Claim("C1", "On synthetic problems ‖g‖² correlates with the MCMC reference predictive variance",
          "Spearman ρ 0.44–0.99", "04_mcmc_validation",
          "median Spearman ρ(GN, HMC variance) over the six classification problems of the paper's Table 1 "
          "(every problem × seed), hierarchical bootstrap CI (problems kept, seeds, then query points)",
          _at_least(C1_MIN_RHO),
          f"reproduced if the CI's lower end ≥ {C1_MIN_RHO}; not reproduced if its upper end is below; {STRADDLE}",
          Gate({"seeds": 5, "settings": 4, "query_points": 30}, max_width=0.3), "xcheck-laplace",
          tolerance=f"CI ≥ {C1_MIN_RHO}",
          quantity="median Spearman ρ of GN = ‖∇p_c‖² with the HMC variance (Table 1's classification cells)",
          terms=("Spearman ρ", "NUTS", "bootstrap"),
          deviations=("The paper's data, network and prior are not given: the eight problems are standard "
                      "constructions and the network is width 32, depth 2, tanh, prior N(0, I) (chapter 04 declares "
                      "each).",
                      "Which points the correlations are taken over is not given: the wide grid of the maps is the "
                      "primary reading, in-distribution points the other (both shown per cell).",
                      "The reference is NUTS (4 chains × 1000 draws after 1000 warm-up), the paper's HMC with "
                      "dual averaging.")),
    Claim("C2", "The correlation improves as the model grows", "ρ increases with size",
          "05_scaling", "slope of ρ against log10(#parameters), CI over settings and seeds",
          _at_least(1e-12, "0"),
          f"reproduced if the slope's CI lies above 0; not reproduced if it lies below; {STRADDLE}",
          Gate({"seeds": 3, "sizes": 3}, max_width=0.4), "xcheck-laplace",
          tolerance="CI > 0",
          deviations=("The paper gives no sizes: chapter 05 runs Table 1's setup (depth 2, tanh, prior N(0,"
                      ' I), NUTS as in chapter 04) at four widths on all eight problems.',
                      "The trend is the slope of ρ per decade of parameters, its interval over problems' "
                      'seeds and query points; the query set is a reading, as for C1.'),
          quantity="slope of ρ per decade of parameters", terms=("Spearman ρ", "bootstrap")),
    Claim("C3", "In classification, ‖g‖² alone is about as good as a Laplace approximation",
          "comparable ρ", "04_mcmc_validation",
          "ρ(GN) − ρ(LA) against the HMC variance on the binary problems of the paper's Table 1 (its LA rows in "
          "classification; LA = exact-Hessian Laplace, delta method), mean over problem × seed, hierarchical "
          "bootstrap CI (paired)",
          _at_least(C3_MIN_DIFFERENCE),
          f"reproduced if the CI of the difference lies above −{abs(C3_MIN_DIFFERENCE)}; not reproduced if below; "
          f"{STRADDLE}",
          Gate({"seeds": 5, "query_points": 30}, max_width=0.2), "xcheck-laplace",
          tolerance=f"CI > {C3_MIN_DIFFERENCE:g}",
          quantity="ρ(GN) − ρ(LA), Table 1's binary problems, mean over problems and seeds",
          terms=("Spearman ρ", "Laplace approximation", "GGN"),
          deviations=("'About as good' is read as at most 0.1 lower in ρ (the paper gives no margin).",
                      "LA is the paper's row: the exact-Hessian Laplace through the delta method; multiclass LA "
                      "(ours, beyond the paper's table) enters a second reading.",
                      "The query set is a reading, as for C1.")),
    Claim("C4", "A covariance from proxy (non-training) data distorts the estimate; isotropy avoids it",
          "structured distortion", "02_proxy_bias",
          "ρ(isotropic) − ρ(proxy Laplace) against the reference at the largest shift, CI over seeds",
          _at_least(1e-12, "0"), f"reproduced if the CI lies above 0; not reproduced if it lies below; {STRADDLE}",
          Gate({"seeds": 10}, max_width=0.3), "xcheck-laplace",
          tolerance="CI > 0",
          deviations=("The paper's proxy data are not given: shifted copies of the training distribution, "
                      'the shift on a declared grid.',),
          quantity="ρ(isotropic) − ρ(proxy-data Laplace) at the largest shift",
          terms=("isotropy", "Laplace approximation", "Spearman ρ")),
    Claim("C5", "Hessian spectra: few large eigenvalues and a bulk near zero; damped inverse ≈ multiple of I",
          "bulk near zero", "03_hessian_spectra",
          "Spearman ρ(gᵀ(H+λI)⁻¹g, ‖g‖²) at the chosen damping, bootstrap CI",
          _at_least(0.9), f"reproduced if the CI lies above 0.9; not reproduced if it lies below; {STRADDLE}",
          Gate({"query_points": 50}, max_width=0.2), "xcheck-spectra",
          tolerance="CI ≥ 0.9",
          deviations=('Spectra of small MLPs exactly and of small language models by stochastic Lanczos '
                      'quadrature; the damping is chosen by a declared rule (chapter 03).',),
          quantity="Spearman ρ of gᵀ(H+λI)⁻¹g with ‖g‖² at the chosen damping",
          terms=("isotropy", "Spearman ρ", "SLQ")),
    Claim("C6", "TruthfulQA: the combined estimate has the best AUROC for answer correctness",
          "AUROC 0.63", "06_qa_benchmarks",
          "AUROC of combined (mean over models with enough answers); details: auroc, ci, differences "
          "{method: [combined − method, lo, hi]} (paired bootstrap)",
          _by_parts, DERIVE_TEXT, _QA_GATE, "xcheck-baselines", parts=_PARTS["C6"],
          tolerance="every part (a–c)",
          deviations=('The paper does not state its grader, its p (whole answer or length-normalised) or '
                      'how "combined" is formed: each is a reading; careful labels are the primary '
                      'TruthfulQA grader.',
                      "Two open models of 135 M and 270 M parameters stand in for the paper's four 7 B+ "
                      'models.'),
          quantity="mean AUROC of combined over the models (TruthfulQA)",
          terms=("combined uncertainty", "AUROC", "grader", "reading")),
    Claim("C7", "TriviaQA: epistemic (the abstract: the combined estimate) is near chance; P(True) is best",
          "epistemic ≈ 0.5",
          "06_qa_benchmarks", "AUROC of epistemic; details: auroc, ci, differences {method: [P(True) − method, lo, hi]}",
          _by_parts, DERIVE_TEXT, _QA_GATE, "xcheck-baselines", parts=_PARTS["C7"],
          tolerance="every part (a–c)",
          deviations=('Readings as for C6; TriviaQA is graded by careful reading where exact match, containment '
                      'and the echo-aware rule disagree, by their shared label elsewhere.',),
          quantity="mean AUROC of epistemic over the models (TriviaQA)",
          terms=("epistemic uncertainty", "AUROC", "P(True)", "grader", "reading")),
    Claim("C8", "The estimator is 46–107× faster than the baselines", "46–107×",
          "07_efficiency", "speed-up over the fastest sampling baseline (median ratio) on the least favourable model, "
          "bootstrap CI over questions; judged with each baseline as its reference implementation runs it (the "
          "paper's wording), with the fastest optimised baseline as a second reading",
          _at_least(C8_MIN_SPEEDUP), f"reproduced if the CI of the speed-up lies above 46×; not reproduced if below; {STRADDLE}",
          Gate({"questions": 5, "rounds": 10}, max_width=0.5, relative=True,
               outside=lambda m: m.ci[1] < C8_MIN_SPEEDUP, outside_text="the whole interval lies below 46×"),
          "xcheck-gradnorm", tolerance=f"CI ≥ {C8_MIN_SPEEDUP:g}×",
          deviations=("Each baseline is timed as its reference implementation runs it (the paper's "
                      'wording), the fastest optimised baseline as a second reading; 2 CPU cores, not the '
                      "paper's hardware.",),
          quantity="speed-up (×) over the fastest baseline on the less favourable model",
          terms=("semantic entropy", "P(True)", "bootstrap")),
    Claim("C9", "Raw gradient norms do not transfer across models", "chance-level transfer",
          "06_qa_benchmarks",
          "balanced accuracy of a threshold fitted on one model, applied to another; details: "
          "within_model_balanced_accuracy, difference [transferred − within, lo, hi] (paired bootstrap)",
          _rule_c9, f"reproduced if transferred − within-model lies below 0 and the transferred CI reaches "
          f"{TRANSFER_CHANCE}; partly if it loses but stays above chance",
          Gate({"transfers": 1, "correct": MIN_PER_CLASS, "wrong": MIN_PER_CLASS}, max_width=0.2,
               check=_c9_needs_signal), "xcheck-gradnorm",
          tolerance=f"loses, reaches {TRANSFER_CHANCE}",
          deviations=("The paper's protocol (a correctness classifier trained on the other models, raw and "
                      'normalised by ‖θ*‖²) and a raw threshold; two models, so each transfer is trained on'
                      ' one.',),
          quantity="balanced accuracy of a threshold fitted on one model, applied to the other",
          terms=("epistemic uncertainty", "grader")),
]}


@dataclass(frozen=True)
class Assessment:
    """A claim's verdict on one measurement and why.

    Attributes
    ----------
    verdict : str
        One of :data:`VERDICTS`.
    gate_passed : bool
        Whether the data could decide (the claim's :class:`Gate`).
    reason : str
        Why the gate failed ("" when it passed).
    """

    verdict: str
    gate_passed: bool
    reason: str


def assess_part(part: Part, m: Measurement) -> Assessment:
    """Check the part's gate, then apply its rule (as :func:`assess` does for a claim)."""
    if not _ci_ok(m):
        raise ValueError(f"{part.id}: value {m.value} with CI {m.ci} is not a finite number inside its interval")
    reason = part.gate.reason(m)
    if reason:
        return Assessment(INCONCLUSIVE, False, reason)
    return Assessment(part.rule(m), True, "")


def assess(m: Measurement, parts: dict[str, Measurement] | None = None) -> Assessment:
    """Check the claim's gate, then apply its rule; an invalid number or CI is an error.

    A compound claim (`Claim.parts`) is judged by its parts: ``parts`` maps each part's id to
    its measurement, and the verdict is derived from the parts' verdicts (:func:`derive`)."""
    if m.claim not in CLAIMS:
        raise KeyError(f"unknown claim {m.claim!r}; known: {', '.join(CLAIMS)}")
    if not _ci_ok(m):
        raise ValueError(f"{m.claim}: value {m.value} with CI {m.ci} is not a finite number inside its interval")
    claim = CLAIMS[m.claim]
    reason = claim.gate.reason(m)
    if reason:
        return Assessment(INCONCLUSIVE, False, reason)
    if claim.parts:
        missing = [p.id for p in claim.parts if p.id not in (parts or {})]
        if missing:
            raise ValueError(f"{m.claim} is judged by its parts: pass parts={{...}} with {', '.join(missing)}")
        return Assessment(derive([assess_part(p, parts[p.id]).verdict for p in claim.parts]), True, "")
    return Assessment(claim.rule(m), True, "")


def _part_entry(part: Part, m: Measurement) -> dict[str, Any]:
    a = assess_part(part, m)
    return {"id": part.id, "statement": part.statement, "measure": part.measure, "value": m.value,
            "ci": list(m.ci), "verdict": a.verdict, "reason": explain(part.rule, m, a.verdict, a.reason),
            "rule": part.rule_text, "evidence": dict(m.evidence),
            "gate": {"passed": a.gate_passed, "reason": a.reason, "rule": part.gate.text()},
            "details": m.details}


def _axes(key: str) -> dict[str, str]:
    """``"grader=rouge, p=sequence"`` -> ``{"grader": "rouge", "p": "sequence"}`` (a key that is not
    of that form is one axis ``reading``)."""
    pairs = [kv.split("=", 1) for kv in key.split(", ")]
    return dict(pairs) if all(len(p) == 2 for p in pairs) else {"reading": key}


def _common(keys: list[str], every: list[str]) -> str:
    """What ``keys`` (readings) share, as ``"grader ∈ {a, b}"`` terms: an axis on which they take
    every value the readings take is not mentioned."""
    terms = []
    all_axes = [_axes(k) for k in every]
    mine = [_axes(k) for k in keys]
    for axis in dict.fromkeys(a for d in all_axes for a in d):
        values = list(dict.fromkeys(d.get(axis, "") for d in mine))
        if set(values) != {d.get(axis, "") for d in all_axes}:
            terms.append(f"{axis} = {values[0]}" if len(values) == 1 else f"{axis} ∈ {{{', '.join(values)}}}")
    return "; ".join(terms) or "no single setting"


def robustness(verdicts: dict[str, str], primary: str) -> dict[str, Any]:
    """Whether a claim's verdict is the same under every reading (``verdicts``: reading -> verdict).

    Returns ``{"robust", "primary", "flips", "text"}``: ``flips`` lists the readings whose
    verdict differs from the primary reading's, ``text`` says it in one sentence, naming what
    the readings of each other verdict have in common (``grader ∈ {…}``)."""
    base = verdicts[primary]
    flips = {k: v for k, v in verdicts.items() if v != base}
    n = len(verdicts)
    if not flips:
        text = f"robust: {base} under all {n} readings"
    else:
        same = n - len(flips)
        groups: dict[str, list[str]] = {}
        for k, v in flips.items():
            groups.setdefault(v, []).append(k)
        shown = "; ".join(f"{v} under {len(ks)} ({_common(ks, list(verdicts))})" for v, ks in groups.items())
        others = f" and {same - 1} other{'s' if same - 1 != 1 else ''}" if same > 1 else ""
        text = f"depends on the reading: {base} under the primary reading{others}, {shown}"
    return {"robust": not flips, "primary": primary, "flips": flips, "text": text}


def judge(m: Measurement) -> str:
    """The verdict of :func:`assess`."""
    return assess(m).verdict


def record(m: Measurement, parts: dict[str, Measurement] | None = None,
           readings: dict[str, dict[str, Measurement]] | None = None, primary: str | None = None) -> dict[str, Any]:
    """Judge ``m`` and append it to this chapter's ``<chapter>.claims.json``.

    The calling chapter must own the claim. Returns the stored entry (with ``verdict``,
    ``gate`` {passed, reason, rule} and the interval ``width``).

    Parameters
    ----------
    m : Measurement
        The claim's headline number.
    parts : dict, optional
        A compound claim's part measurements under the primary reading (required for it).
    readings : dict, optional
        ``{reading: {part id: Measurement}}`` (for a claim without parts, ``{reading:
        {claim id: Measurement}}``): the claim judged under every reading; the entry then
        holds each reading's verdicts, its measured values (``values``: ``{part or claim id:
        [value, lower, upper]}``) and the claim's `robustness`.
    primary : str, optional
        The key of the primary reading in ``readings``.
    """
    chapter = chapter_name()
    owner = CLAIMS[m.claim].owner if m.claim in CLAIMS else None
    if chapter != "interactive" and owner != chapter:
        raise ValueError(f"chapter {chapter!r} records {m.claim}, which {owner!r} owns")
    claim = CLAIMS[m.claim]
    a = assess(m, parts)
    entry = {**asdict(m), "ci": list(m.ci), "verdict": a.verdict, "chapter": chapter,
             "width": m.ci[1] - m.ci[0],
             "gate": {"passed": a.gate_passed, "reason": a.reason, "rule": claim.gate.text()}}
    if claim.parts:
        entry["parts"] = [_part_entry(p, parts[p.id]) for p in claim.parts]
        entry["reason"] = (explain(claim.rule, m, a.verdict, a.reason) if not a.gate_passed else
                           "from its parts: " + ", ".join(f"{e['id']} {e['verdict']}" for e in entry["parts"]))
    else:
        entry["reason"] = explain(claim.rule, m, a.verdict, a.reason)
    if readings:
        if primary not in readings:
            raise ValueError(f"{m.claim}: the primary reading {primary!r} is not among the readings")
        rows, verdicts = [], {}
        for key, ms in readings.items():
            if claim.parts:
                pv = {p.id: assess_part(p, ms[p.id]).verdict for p in claim.parts}
                v = derive(list(pv.values()))
            else:
                pv, v = {}, assess(ms[m.claim]).verdict
            verdicts[key] = v
            values = {name: [x.value, *x.ci] for name, x in ms.items()}
            rows.append({"reading": key, "primary": key == primary, "parts": pv, "values": values, "verdict": v})
        entry["readings"] = rows
        entry["robustness"] = robustness(verdicts, primary)
    path = generated_dir() / f"{chapter}.claims.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = json.loads(read_text(path)) if path.exists() else {}
    entries[m.claim] = entry
    write_atomic(path, json.dumps(entries, indent=2, default=float))
    return entry


CELL_KEYS = ("column", "row", "statistic", "paper", "ours", "lo", "hi", "verdict", "why", "tolerance", "anchor")
"""What every recorded table cell holds (``readings``, ``seeds`` optional)."""


def record_cells(table: str, cells: list[dict[str, Any]]) -> None:
    """Write the cells of one of the paper's tables, as this chapter judged them, to
    ``<chapter>.cells.json`` (the ledger's reproduction table reads them; `CELL_KEYS` each)."""
    for c in cells:
        missing = [k for k in CELL_KEYS if k not in c]
        if missing:
            raise ValueError(f"{table}: a cell lacks {', '.join(missing)}; every cell needs {', '.join(CELL_KEYS)}")
    chapter = chapter_name()
    path = generated_dir() / f"{chapter}.cells.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tables = json.loads(read_text(path)) if path.exists() else {}
    tables[table] = [{**c, "chapter": chapter} for c in cells]
    write_atomic(path, json.dumps(tables, indent=2, default=float))


def collect_cells(generated: Path | None = None, chapters: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every recorded table cell of this build's ``chapters``, by table (``{"Table 1": [...]}``)."""
    generated = generated or generated_dir()
    out: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(generated.glob("*.cells.json")):
        if chapters is not None and path.name.removesuffix(".cells.json") not in chapters:
            continue
        for table, cells in json.loads(read_text(path)).items():
            out.setdefault(table, []).extend(cells)
    return dict(sorted(out.items()))


def reset(chapter: str | None = None) -> None:
    """Remove a chapter's claims and cells files (the runner calls this before executing it)."""
    for suffix in ("claims", "cells"):
        (generated_dir() / f"{chapter or chapter_name()}.{suffix}.json").unlink(missing_ok=True)


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
               "owner": claim.owner, "anchor": claim.anchor, "quantity": claim.quantity, "terms": list(claim.terms),
               "rule": claim.rule_text, "verdict": NOT_MEASURED, "reason": "its chapter is not part of this build",
               "value": None, "ci": None, "note": "", "evidence": {}, "width": None,
               "gate": {"passed": None, "reason": "", "rule": claim.gate.text()}, "cross_check": claim.cross_check,
               "parts": [], "readings": [], "robustness": None, "deviations": list(claim.deviations)}
        ran = (generated / f"{claim.owner}.provenance.json").exists()
        if chapters is not None and claim.owner not in chapters:
            ran = False
        claims_file = generated / f"{claim.owner}.claims.json"
        entries = json.loads(claims_file.read_text()) if claims_file.exists() else {}
        if claim.id in entries:
            e = entries[claim.id]
            row.update(value=e["value"], ci=e["ci"], verdict=e["verdict"], settings=e["settings"],
                       reason=e.get("reason", ""),
                       note=e.get("note", ""), evidence=e.get("evidence", {}), width=e.get("width"),
                       gate=e.get("gate", row["gate"]), parts=e.get("parts", []), readings=e.get("readings", []),
                       robustness=e.get("robustness"))
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
    if verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r}; known: {', '.join(VERDICTS)}")
    if is_paper_edition(profile) or verdict == NOT_MEASURED:
        return verdict
    return f"{verdict} (preview)"
