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
    from gnuq_core.repro.chapters import NOTEBOOKS

    for claim in CLAIMS.values():
        assert claim.owner[:2].isdigit(), claim
        # The owner is a chapter stem; it need not exist yet (then: not yet measured).
        assert "/" not in claim.owner
    owners = {c.id: c.owner for c in CLAIMS.values()}
    assert len(owners) == len(CLAIMS) == 9
    assert NOTEBOOKS.exists()


@pytest.mark.parametrize("value, ci, verdict", [
    (0.8, (0.6, 0.9), claims.REPRODUCED),
    (0.5, (0.3, 0.7), claims.PARTLY),
    (0.2, (0.1, 0.3), claims.NOT_REPRODUCED),
])
def test_threshold_rule(value: float, ci: tuple[float, float], verdict: str) -> None:
    assert claims.judge(Measurement("C1", value, ci)) == verdict


def test_reproduced_needs_a_finite_number_and_ci() -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        claims.judge(Measurement("C1", float("nan"), (0.5, 0.9)))
    with pytest.raises(ValueError, match="inside its interval"):
        claims.judge(Measurement("C1", 0.95, (0.5, 0.9)))


def test_c6_rule_uses_other_methods() -> None:
    details = {"auroc": {"combined": 0.63, "p_true": 0.60, "entropy": 0.55}}
    assert claims.judge(Measurement("C6", 0.63, (0.58, 0.68), details=details)) == claims.REPRODUCED
    details["auroc"]["p_true"] = 0.75
    assert claims.judge(Measurement("C6", 0.63, (0.58, 0.68), details=details)) == claims.PARTLY


def test_unknown_claim() -> None:
    with pytest.raises(KeyError, match="unknown claim 'C99'"):
        claims.judge(Measurement("C99", 0.5, (0.4, 0.6)))


def test_record_refuses_a_claim_owned_by_another_chapter(generated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNUQ_CHAPTER", "01_derivation")
    with pytest.raises(ValueError, match="04_mcmc_validation"):
        claims.record(Measurement("C1", 0.8, (0.7, 0.9)))


def test_record_and_collect(generated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNUQ_CHAPTER", "04_mcmc_validation")
    entry = claims.record(Measurement("C1", 0.8, (0.7, 0.9), settings={"width": 8}))
    assert entry["verdict"] == claims.REPRODUCED
    (generated / "04_mcmc_validation.provenance.json").write_text("{}")
    with pytest.raises(RuntimeError, match="did not report claim C3"):
        claims.collect(generated, chapters=["04_mcmc_validation"])
    claims.record(Measurement("C3", 0.0, (-0.05, 0.05)))
    rows = {r["id"]: r for r in claims.collect(generated, chapters=["04_mcmc_validation"])}
    assert rows["C1"]["value"] == 0.8 and rows["C1"]["ci"] == [0.7, 0.9]
    assert rows["C3"]["verdict"] == claims.REPRODUCED
    assert rows["C6"]["verdict"] == claims.NOT_MEASURED
    assert json.loads((generated / "04_mcmc_validation.claims.json").read_text())["C1"]["settings"] == {"width": 8}


def test_chapter_outside_the_toc_counts_as_not_measured(generated: Path) -> None:
    (generated / "04_mcmc_validation.provenance.json").write_text("{}")
    rows = claims.collect(generated, chapters=[])
    assert all(r["verdict"] == claims.NOT_MEASURED for r in rows)


def test_degenerate_measurement_is_inconclusive() -> None:
    m = Measurement("C7", 0.5, (0.0, 1.0), details={"degenerate": True, "auroc": {}, "ci": {}})
    assert claims.judge(m) == claims.INCONCLUSIVE


@pytest.mark.parametrize("within, value, ci, verdict", [
    (0.52, 0.50, (0.45, 0.55), claims.INCONCLUSIVE),   # no signal within a model: nothing to transfer
    (0.70, 0.50, (0.45, 0.55), claims.REPRODUCED),
    (0.70, 0.60, (0.57, 0.63), claims.PARTLY),
    (0.70, 0.68, (0.66, 0.70), claims.NOT_REPRODUCED),
])
def test_c9_rule(within: float, value: float, ci: tuple[float, float], verdict: str) -> None:
    m = Measurement("C9", value, ci, details={"within_model_balanced_accuracy": within})
    assert claims.judge(m) == verdict


@pytest.mark.parametrize("value, ci, verdict", [
    (0.50, (0.42, 0.58), claims.REPRODUCED),
    (0.26, (0.03, 0.54), claims.PARTLY),    # a wide CI does not make 0.26 "near chance"
])
def test_c7_rule(value: float, ci: tuple[float, float], verdict: str) -> None:
    details = {"auroc": {"epistemic": value, "p_true": 0.7, "entropy": 0.6},
               "ci": {"epistemic": list(ci), "p_true": [0.6, 0.8], "entropy": [0.5, 0.7]}}
    assert claims.judge(Measurement("C7", value, ci, details=details)) == verdict


def test_verdict_label_marks_previews() -> None:
    assert claims.verdict_label(claims.REPRODUCED, "quick") == "reproduced (preview)"
    assert claims.verdict_label(claims.REPRODUCED, "full") == "reproduced"
    assert claims.verdict_label(claims.NOT_MEASURED, "quick") == "not yet measured"
    with pytest.raises(ValueError, match="unknown verdict"):
        claims.verdict_label("great", "full")
