"""gnuq_core.chapters.ledger: the ledger's cards and tables from recorded claims, without papermill."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gnuq_core.chapters import ledger
from gnuq_core.repro import claims
from gnuq_core.repro.paths import REPO_ROOT


@pytest.fixture()
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """C1 and C3 recorded by chapter 04, whose provenance exists; every other owner did not run."""
    monkeypatch.setenv("GNUQ_OUTPUT_DIR", str(tmp_path))
    monkeypatch.setenv("GNUQ_CHAPTER", "04_mcmc_validation")
    ev = {"seeds": 3, "settings": 4, "query_points": 200}
    claims.record(claims.Measurement("C1", 0.764, (0.728, 0.812), evidence=ev, note="a computed caveat"))
    claims.record(claims.Measurement("C3", 0.046, (0.007, 0.088), evidence={"seeds": 1, "query_points": 200}))
    (tmp_path / "04_mcmc_validation.provenance.json").write_text(json.dumps({"chapter": "04_mcmc_validation"}))
    monkeypatch.setenv("GNUQ_CHAPTER", "90_claims_ledger")
    return tmp_path


def test_each_claim_gets_a_card_that_stands_alone(recorded: Path) -> None:
    result = ledger.run(ledger.Params(), "full", built_at="now")
    cards = result.values["claim_cards"].data
    assert cards.count('<section class="gnuq-claim') == len(claims.CLAIMS)
    c1 = cards[cards.index('id="ledger-c1"'):cards.index('id="ledger-c2"')]
    assert "median Spearman ρ of ‖g‖² with the MCMC variance" in c1 and "0.764 [0.728, 0.812]" in c1
    assert "the whole interval [0.728, 0.812] lies at or above 0.44" in c1  # the verdict's reason
    assert "3 seeds · 4 settings · 200 query points (fewest per setting)" in c1 and "a computed caveat" in c1
    assert 'href="04_mcmc_validation.html#claim-c1"' in c1 and 'href="../glossary.html#term-Spearman"' in c1
    c3 = cards[cards.index('id="ledger-c3"'):cards.index('id="ledger-c4"')]
    assert "inconclusive" in c3 and "the data cannot decide: too little data: 1 seeds (needs ≥ 3)" in c3
    assert result.values["n_reproduced"] == 1 and result.values["n_inconclusive"] == 1
    assert result.values["n_not_yet_measured"] == len(claims.CLAIMS) - 2
    assert "C1" in result.tables["summary"].plain and "parts" not in result.tables


def test_every_link_target_exists() -> None:
    """Each claim's owner notebook carries its section label, and each term is in the glossary."""
    glossary = (REPO_ROOT / "book" / "glossary.md").read_text()
    terms = set(re.findall(r"^([^\s`#][^\n]*)$", glossary.split("```{glossary}")[1], flags=re.MULTILINE))
    for claim in claims.CLAIMS.values():
        source = (REPO_ROOT / "notebooks" / f"{claim.owner}.py").read_text()
        assert f"# ({claim.anchor})=\n" in source, (claim.id, claim.owner)
        missing = [t for t in claim.terms if t not in terms]
        assert not missing, (claim.id, missing)
        assert ledger.chapter_title(claim.owner)[0].isdigit()
