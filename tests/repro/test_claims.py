"""The claims ledger: rules, recording, collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnuq_core.repro import claims
from gnuq_core.repro.claims import CLAIMS, Measurement


@pytest.fixture()
def generated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GNUQ_OUTPUT_DIR", str(tmp_path))
    return tmp_path


def test_every_claim_has_one_existing_owner_chapter() -> None:
    from gnuq_core.repro.profiles import NOTEBOOKS

    for claim in CLAIMS.values():
        assert claim.owner[:2].isdigit(), claim
        # The owner is a chapter stem; it need not exist yet (then: not yet measured).
        assert "/" not in claim.owner
    owners = {c.id: c.owner for c in CLAIMS.values()}
    assert len(owners) == len(CLAIMS) == 9
    assert NOTEBOOKS.exists()


# Evidence that passes each claim's count gate (the rules' tests vary value and interval).
ENOUGH = {"C1": {"seeds": 5, "settings": 12, "query_points": 900}, "C2": {"seeds": 3, "sizes": 7},
          "C3": {"seeds": 5, "query_points": 900}, "C4": {"seeds": 30}, "C5": {"query_points": 200},
          "C6": {"models": 2, "correct": 200, "wrong": 600}, "C7": {"models": 2, "correct": 200, "wrong": 600},
          "C8": {"questions": 20, "rounds": 60}, "C9": {"transfers": 4, "correct": 200, "wrong": 600}}


def m(claim: str, value: float, ci: tuple[float, float], **kw) -> Measurement:
    return Measurement(claim, value, ci, evidence=kw.pop("evidence", ENOUGH[claim]), **kw)


def test_every_claim_has_test_evidence_and_a_gate_text() -> None:
    assert set(ENOUGH) == set(CLAIMS)
    for c in CLAIMS.values():
        assert set(c.gate.min_counts) <= set(ENOUGH[c.id]), c.id
        assert "interval no wider than" in c.gate.text()


@pytest.mark.parametrize("claim, value, ci, verdict", [
    # one rule for every threshold claim: wholly above, wholly below, or straddling (inconclusive)
    ("C1", 0.8, (0.7, 0.9), claims.REPRODUCED),
    ("C1", 0.5, (0.4, 0.6), claims.INCONCLUSIVE),
    ("C1", 0.2, (0.1, 0.3), claims.NOT_REPRODUCED),
    ("C2", 0.10, (0.02, 0.2), claims.REPRODUCED),
    ("C2", 0.05, (-0.05, 0.15), claims.INCONCLUSIVE),
    ("C2", -0.15, (-0.18, -0.11), claims.NOT_REPRODUCED),
    ("C3", -0.03, (-0.06, 0.0), claims.REPRODUCED),
    ("C3", -0.09, (-0.12, -0.06), claims.INCONCLUSIVE),
    ("C3", -0.111, (-0.142, -0.075), claims.INCONCLUSIVE),  # the old card said "not reproduced" here
    ("C3", -0.15, (-0.18, -0.12), claims.NOT_REPRODUCED),
    ("C4", 0.2, (0.1, 0.3), claims.REPRODUCED),
    ("C4", 0.05, (-0.05, 0.15), claims.INCONCLUSIVE),
    ("C4", -0.1, (-0.2, -0.05), claims.NOT_REPRODUCED),
    ("C5", 0.95, (0.92, 0.97), claims.REPRODUCED),
    ("C5", 0.91, (0.85, 0.95), claims.INCONCLUSIVE),
    ("C5", 0.6, (0.5, 0.7), claims.NOT_REPRODUCED),
    ("C8", 60.0, (50.0, 70.0), claims.REPRODUCED),
    ("C8", 50.0, (40.0, 60.0), claims.INCONCLUSIVE),
    ("C8", 6.0, (5.0, 7.0), claims.NOT_REPRODUCED),
])
def test_threshold_rules(claim: str, value: float, ci: tuple[float, float], verdict: str) -> None:
    assert claims.judge(m(claim, value, ci)) == verdict


def test_a_straddling_interval_says_how_many_seeds_would_decide() -> None:
    # C3 at -0.111 [-0.142, -0.075] with 5 seeds: the upper end is 0.036 above the point, the
    # threshold 0.011 above it: about 5 * (0.036 / 0.011)^2 = 54 seeds
    e = claims.CLAIMS["C3"]
    x = m("C3", -0.111, (-0.142, -0.075))
    reason = claims.explain(e.rule, x, claims.judge(x))
    assert reason.startswith("-0.111 [-0.142, -0.075]: the interval straddles -0.1; about 54 seeds (now 5)")
    on = m("C1", 0.44, (0.3, 0.6))
    assert "the point sits on the threshold" in claims.explain(claims.CLAIMS["C1"].rule, on, claims.judge(on))
    wide = claims.assess(m("C1", 0.8, (0.45, 0.99)))
    assert "interval too wide: 0.54 (allowed ≤ 0.3); about 17 seeds (now 5)" in wide.reason


@pytest.mark.parametrize("claim, value, ci, evidence, reason", [
    ("C1", 0.8, (0.7, 0.9), {"seeds": 2, "settings": 8, "query_points": 900}, "2 seeds (needs ≥ 5)"),
    ("C1", 0.8, (0.45, 0.99), ENOUGH["C1"], "interval too wide: 0.54"),   # would be "reproduced"
    ("C1", 0.5, (0.2, 0.9), ENOUGH["C1"], "interval too wide"),           # would be "partly"
    ("C2", 0.1, (0.05, 0.15), {"seeds": 3, "sizes": 2}, "2 sizes (needs ≥ 3)"),
    ("C3", 0.0, (-0.2, 0.2), ENOUGH["C3"], "interval too wide"),
    ("C4", 0.2, (0.1, 0.3), {"seeds": 5}, "5 seeds (needs ≥ 10)"),
    ("C5", 0.95, (0.92, 0.97), {"query_points": 20}, "20 query points (needs ≥ 50)"),
    ("C8", 60.0, (47.0, 90.0), ENOUGH["C8"], "interval too wide"),        # relative: 43 > 0.5 × 60
    ("C8", 60.0, (50.0, 70.0), {"questions": 2, "rounds": 2}, "2 questions (needs ≥ 5), 2 rounds"),
])
def test_gates_make_thin_or_wide_evidence_inconclusive(claim, value, ci, evidence, reason) -> None:
    a = claims.assess(m(claim, value, ci, evidence=evidence))
    assert (a.verdict, a.gate_passed) == (claims.INCONCLUSIVE, False)
    assert reason in a.reason


def test_an_interval_wholly_outside_the_claim_is_judged_however_wide() -> None:
    # C8: a speed-up of 3.6 [2.0, 6.0] is wider than 50% of the value, but no value in it
    # reaches 46x: the width cannot change the verdict, so the data decide
    a = claims.assess(m("C8", 3.6, (2.0, 6.0)))
    assert (a.verdict, a.gate_passed, a.reason) == (claims.NOT_REPRODUCED, True, "")
    # an interval that reaches the claimed range stays inconclusive when wide
    a = claims.assess(m("C8", 30.0, (10.0, 50.0)))
    assert a.verdict == claims.INCONCLUSIVE and "interval too wide" in a.reason
    # the counts still come first
    a = claims.assess(m("C8", 3.6, (2.0, 6.0), evidence={"questions": 2, "rounds": 20}))
    assert a.verdict == claims.INCONCLUSIVE and "2 questions" in a.reason
    assert "any width if the whole interval lies below 46×" in claims.CLAIMS["C8"].gate.text()


def test_a_gate_needs_its_evidence_reported() -> None:
    with pytest.raises(ValueError, match=r"evidence 'seeds', 'settings', 'query_points' not reported"):
        claims.judge(Measurement("C1", 0.8, (0.7, 0.9)))


def test_reproduced_needs_a_finite_number_and_ci() -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        claims.judge(m("C1", float("nan"), (0.5, 0.9)))
    with pytest.raises(ValueError, match="inside its interval"):
        claims.judge(m("C1", 0.95, (0.5, 0.9)))


def _diffs(*intervals: tuple[float, float]) -> dict:
    return {"differences": {f"method{i}": [(lo + hi) / 2, lo, hi] for i, (lo, hi) in enumerate(intervals)}}


def test_c6_gate_needs_answers_of_both_kinds_and_a_narrow_interval() -> None:
    few = {"models": 1, "correct": 3, "wrong": 97}
    a = claims.assess(m("C6", 0.63, (0.58, 0.68), evidence=few, details=_diffs((0.01, 0.05))))
    assert a.verdict == claims.INCONCLUSIVE and "3 correct (needs ≥ 30)" in a.reason
    none = {"models": 0, "correct": 40, "wrong": 40}
    assert "0 models (needs ≥ 1)" in claims.assess(m("C6", 0.5, (0.0, 1.0), evidence=none)).reason
    # the old rule called combined "partly" on [0.105, 1.0]; the gate refuses such an interval
    a = claims.assess(m("C6", 0.6, (0.105, 1.0), details=_diffs((-0.5, 0.5))))
    assert a.verdict == claims.INCONCLUSIVE and "interval too wide" in a.reason


@pytest.mark.parametrize("within, value, ci, diff, verdict", [
    (0.70, 0.50, (0.45, 0.55), (-0.3, -0.1), claims.REPRODUCED),
    (0.70, 0.62, (0.58, 0.66), (-0.12, -0.04), claims.PARTLY),      # loses, but not to chance
    (0.70, 0.68, (0.64, 0.72), (-0.05, 0.01), claims.NOT_REPRODUCED),  # no significant loss
])
def test_c9_rule(within, value, ci, diff, verdict) -> None:
    details = {"within_model_balanced_accuracy": within, "difference": [sum(diff) / 2, *diff]}
    assert claims.judge(m("C9", value, ci, details=details)) == verdict


def test_c9_gate_needs_a_score_that_works_within_a_model() -> None:
    details = {"within_model_balanced_accuracy": 0.52, "difference": [-0.02, -0.05, 0.01]}
    a = claims.assess(m("C9", 0.50, (0.45, 0.55), details=details))
    assert a.verdict == claims.INCONCLUSIVE and "does not work within a model" in a.reason


def test_unknown_claim() -> None:
    with pytest.raises(KeyError, match="unknown claim 'C99'"):
        claims.judge(Measurement("C99", 0.5, (0.4, 0.6)))


def test_record_refuses_a_claim_owned_by_another_chapter(generated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNUQ_CHAPTER", "01_derivation")
    with pytest.raises(ValueError, match="04_mcmc_validation"):
        claims.record(m("C1", 0.8, (0.7, 0.9)))


def test_record_and_collect(generated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNUQ_CHAPTER", "04_mcmc_validation")
    entry = claims.record(m("C1", 0.8, (0.7, 0.9), settings={"width": 8}))
    assert entry["verdict"] == claims.REPRODUCED
    assert entry["gate"]["passed"] and entry["width"] == pytest.approx(0.2) and entry["evidence"]["seeds"] == 5
    (generated / "04_mcmc_validation.provenance.json").write_text("{}")
    with pytest.raises(RuntimeError, match="did not report claim C3"):
        claims.collect(generated, chapters=["04_mcmc_validation"])
    claims.record(m("C3", 0.0, (-0.05, 0.05), evidence={"seeds": 2, "query_points": 900}))
    rows = {r["id"]: r for r in claims.collect(generated, chapters=["04_mcmc_validation"])}
    assert rows["C3"]["verdict"] == claims.INCONCLUSIVE and "2 seeds" in rows["C3"]["gate"]["reason"]
    claims.record(m("C3", 0.0, (-0.05, 0.05)))
    rows = {r["id"]: r for r in claims.collect(generated, chapters=["04_mcmc_validation"])}
    assert rows["C1"]["value"] == 0.8 and rows["C1"]["ci"] == [0.7, 0.9]
    assert rows["C3"]["verdict"] == claims.REPRODUCED
    assert rows["C6"]["verdict"] == claims.NOT_MEASURED
    assert json.loads((generated / "04_mcmc_validation.claims.json").read_text())["C1"]["settings"] == {"width": 8}


def test_chapter_outside_the_toc_counts_as_not_measured(generated: Path) -> None:
    (generated / "04_mcmc_validation.provenance.json").write_text("{}")
    rows = claims.collect(generated, chapters=[])
    assert all(r["verdict"] == claims.NOT_MEASURED for r in rows)


def test_verdict_label_marks_previews() -> None:
    assert claims.verdict_label(claims.REPRODUCED, "quick") == "reproduced (preview)"
    assert claims.verdict_label(claims.REPRODUCED, "full") == "reproduced"
    assert claims.verdict_label(claims.NOT_MEASURED, "quick") == "not yet measured"
    with pytest.raises(ValueError, match="unknown verdict"):
        claims.verdict_label("great", "full")


def test_part_rules_reach_every_verdict_and_a_claim_is_derived_from_its_parts() -> None:
    from gnuq_core.repro.claims import PARTS, Measurement, assess_part, derive

    ev = {"models": 2, "correct": 100, "wrong": 100}

    def diffs(*ds):
        return {"differences": {f"m{k}": list(d) for k, d in enumerate(ds)}}

    def m(pid, value, ci, details=None):
        return Measurement(pid, value, ci, details=details or {}, evidence=ev)

    a = PARTS["C6a"]
    assert assess_part(a, m("C6a", 0.02, (0.01, 0.03), diffs((0.02, 0.01, 0.03)))).verdict == "reproduced"
    assert assess_part(a, m("C6a", -0.01, (-0.03, 0.01), diffs((-0.01, -0.03, 0.01)))).verdict == "partly reproduced"
    assert assess_part(a, m("C6a", -0.05, (-0.08, -0.02), diffs((-0.05, -0.08, -0.02)))).verdict == "not reproduced"
    b = PARTS["C6b"]
    assert assess_part(b, m("C6b", 0.62, (0.58, 0.66))).verdict == "reproduced"
    assert assess_part(b, m("C6b", 0.52, (0.49, 0.56))).verdict == "not reproduced"
    c = PARTS["C7a"]
    assert assess_part(c, m("C7a", 0.5, (0.45, 0.55))).verdict == "reproduced"
    assert assess_part(c, m("C7a", 0.6, (0.55, 0.65))).verdict == "partly reproduced"
    assert assess_part(c, m("C7a", 0.3, (0.28, 0.33))).verdict == "not reproduced"
    cc = PARTS["C6c"]
    assert assess_part(cc, m("C6c", 0.05, (0.02, 0.08), diffs((0.05, 0.02, 0.08), (0.1, 0.05, 0.15)))).verdict \
        == "reproduced"
    assert assess_part(cc, m("C6c", 0.0, (-0.02, 0.02), diffs((0.0, -0.02, 0.02)))).verdict == "partly reproduced"
    # one baseline significantly better than combined: not reproduced, however the others fare
    assert assess_part(cc, m("C6c", -0.04, (-0.07, -0.01), diffs((0.05, 0.02, 0.08), (-0.04, -0.07, -0.01)))).verdict \
        == "not reproduced"
    assert assess_part(PARTS["C7c"], m("C7c", -0.1, (-0.13, -0.07), diffs((-0.1, -0.13, -0.07)))).verdict \
        == "not reproduced"
    assert assess_part(PARTS["C7b"], m("C7b", 0.3, (0.27, 0.33))).verdict == "not reproduced"
    wide = Measurement("C6b", 0.6, (0.3, 0.9), evidence=ev)
    assert assess_part(b, wide).verdict == "inconclusive"  # the gate: the interval is too wide
    assert derive(["reproduced"] * 3) == "reproduced"
    assert derive(["not reproduced", "inconclusive"]) == "not reproduced"
    assert derive(["reproduced", "not reproduced"]) == "partly reproduced"
    assert derive(["inconclusive", "inconclusive"]) == "inconclusive"


def test_a_compound_claim_needs_its_parts() -> None:
    from gnuq_core.repro.claims import Measurement, assess

    with pytest.raises(ValueError, match="C6 is judged by its parts"):
        assess(Measurement("C6", 0.55, (0.5, 0.6), evidence={"models": 2, "correct": 100, "wrong": 100}))


def test_every_verdict_comes_with_a_one_line_reason() -> None:
    from gnuq_core.repro.claims import CLAIMS, PARTS, Measurement, assess_part, explain

    for rule in [c.rule for c in CLAIMS.values()] + [p.rule for p in PARTS.values()]:
        assert callable(getattr(rule, "explain", None)), rule
    ev = {"models": 2, "correct": 100, "wrong": 100}
    c7a = Measurement("C7a", 0.317, (0.294, 0.34), evidence=ev)
    a = assess_part(PARTS["C7a"], c7a)
    assert a.verdict == "not reproduced"
    assert explain(PARTS["C7a"].rule, c7a, a.verdict) == (
        "the interval [0.294, 0.34] lies below the chance band [0.4, 0.6]: worse than chance, not near it")
    c1 = Measurement("C1", 0.6, (0.4, 0.7), evidence={"seeds": 5})
    assert explain(CLAIMS["C1"].rule, c1, "inconclusive") == (
        "0.6 [0.4, 0.7]: the interval straddles 0.44; about 8 seeds (now 5) would decide it, if the point stays")
    c2 = Measurement("C2", -0.02, (-0.05, -0.01))
    assert explain(CLAIMS["C2"].rule, c2, "not reproduced") == (
        "-0.02 [-0.05, -0.01]: the whole interval lies below 0")
    diffs = {"differences": {"p_true": [-0.05, -0.08, -0.02], "semantic_entropy": [0.01, -0.01, 0.03]}}
    c6c = Measurement("C6c", -0.05, (-0.08, -0.02), details=diffs, evidence=ev)
    assert explain(PARTS["C6c"].rule, c6c, "not reproduced") == (
        "a method is significantly better (difference to it: p true -0.050 [-0.080, -0.020])")
    assert explain(CLAIMS["C1"].rule, c1, "inconclusive", "too little data: 1 seeds (needs ≥ 5)") == (
        "the data cannot decide: too little data: 1 seeds (needs ≥ 5)")


def test_record_keeps_the_reasons(generated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gnuq_core.repro.claims import Measurement, record

    monkeypatch.setenv("GNUQ_CHAPTER", "04_mcmc_validation")
    e = record(Measurement("C1", 0.9, (0.8, 0.95), evidence={"seeds": 5, "settings": 4, "query_points": 50}))
    assert e["verdict"] == "reproduced" and e["reason"] == "the whole interval [0.8, 0.95] lies at or above 0.44"


def test_a_method_at_chance_is_nobodys_best() -> None:
    from gnuq_core.repro.claims import PARTS, Measurement

    diffs = {"p_true": [0.01, -0.02, 0.04], "semantic_entropy": [0.02, -0.01, 0.05]}
    above = Measurement("C6a", 0.01, (-0.02, 0.04), details={"differences": diffs, "auroc_ci": [0.55, 0.62]})
    at_chance = Measurement("C6a", 0.01, (-0.02, 0.04), details={"differences": diffs, "auroc_ci": [0.47, 0.53]})
    assert PARTS["C6a"].rule(above) == "reproduced"
    assert PARTS["C6a"].rule(at_chance) == "not reproduced"
    assert "reaches chance" in PARTS["C6a"].rule.explain(at_chance, "not reproduced")
    beats = {"p_true": [0.05, 0.02, 0.08]}
    assert PARTS["C6c"].rule(Measurement("C6c", 0.05, (0.02, 0.08), details={"differences": beats,
                                                                             "auroc_ci": [0.49, 0.56]})) == "not reproduced"
