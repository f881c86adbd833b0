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
    ev = {"seeds": 5, "settings": 4, "query_points": 200}
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
    assert "median Spearman ρ of GN = ‖∇p_c‖² with the HMC variance" in c1 and "0.764 [0.728, 0.812]" in c1
    assert "the whole interval [0.728, 0.812] lies at or above 0.44" in c1  # the verdict's reason
    assert "5 seeds · 4 settings · 200 query points (fewest per setting)" in c1 and "a computed caveat" in c1
    assert "Our readings" in c1 and "the wide grid of the maps is the primary reading" in c1
    assert 'href="04_mcmc_validation.html#claim-c1"' in c1 and 'href="../glossary.html#term-Spearman"' in c1
    c3 = cards[cards.index('id="ledger-c3"'):cards.index('id="ledger-c4"')]
    assert "inconclusive" in c3 and "the data cannot decide: too little data: 1 seeds (needs ≥ 5)" in c3
    assert result.values["n_reproduced"] == 1 and result.values["n_inconclusive"] == 1
    assert result.values["n_not_yet_measured"] == len(claims.CLAIMS) - 2
    tally = result.values["verdict_tally"]  # the intro's sentence names the claims
    assert tally.startswith("1 reproduced (C1); 1 inconclusive with our data (C3); 7 not yet measured in this build (C2,")
    assert "C1" in result.tables["summary"].plain and "parts" not in result.tables


def test_the_reproduction_tables_put_the_papers_numbers_beside_ours(recorded: Path) -> None:
    import os

    os.environ["GNUQ_CHAPTER"] = "04_mcmc_validation"
    cell = {"column": "Linear (binary)", "row": "Epistemic (GN)", "statistic": "ρ", "paper": 0.99, "ours": 0.64,
            "lo": 0.59, "hi": 0.67, "verdict": "not reproduced", "why": "ours 0.35 below", "tolerance": "±0.10",
            "anchor": "table-1"}
    claims.record_cells("Table 1", [{**cell, "readings": {"queries in-distribution": [0.9, 0.83, 0.94, "reproduced"]}},
                                    {**cell, "row": "Aleatoric", "ours": 0.97, "lo": 0.95, "hi": 0.99,
                                     "paper": 1.0, "verdict": "reproduced"}])
    with pytest.raises(ValueError, match="a cell lacks anchor"):
        claims.record_cells("Table 1", [{k: v for k, v in cell.items() if k != "anchor"}])
    os.environ["GNUQ_CHAPTER"] = "90_claims_ledger"
    result = ledger.run(ledger.Params(), "full", built_at="now")
    claims_table = result.values["reproduction_table"].data
    assert claims_table.count("<tr class=") == len(claims.CLAIMS)
    assert '<a href="04_mcmc_validation.html#claim-c1">C1</a>' in claims_table and "CI ≥ 0.44" in claims_table
    cells = result.values["cells_tables"].data
    assert "Table 1, cell by cell: 1 reproduced, 1 not reproduced" in cells
    assert '<tr class="verdict-not-reproduced">' in cells and "0.64 [0.59, 0.67]" in cells
    assert 'href="04_mcmc_validation.html#table-1">Linear (binary) · Epistemic (GN) · ρ</a>' in cells
    assert 'data-label="paper">0.99<' in cells  # a phone shows each cell with its column's name
    # another reading gets its own column, with its mark; a cell without it shows a dash
    assert '<th>queries in-distribution</th>' in cells and "the last column: another reading" in cells
    assert '<span>0.90 [0.83, 0.94] <span class="gnuq-mark">✓</span></span>' in cells
    assert 'data-label="queries in-distribution"><span>—</span></td>' in cells


def test_every_link_target_exists() -> None:
    """Each claim's owner notebook carries its section label, and each term is in the glossary."""
    glossary = (REPO_ROOT / "book" / "glossary.md").read_text()
    terms = set(re.findall(r"^([^\s`#][^\n]*)$", glossary.split("```{glossary}")[1], flags=re.MULTILINE))
    for claim in claims.CLAIMS.values():
        source = (REPO_ROOT / "gnuq_core" / "notebooks" / f"{claim.owner}.py").read_text()
        assert f"# ({claim.anchor})=\n" in source, (claim.id, claim.owner)
        missing = [t for t in claim.terms if t not in terms]
        assert not missing, (claim.id, missing)
        assert ledger.chapter_title(claim.owner)[0].isdigit()
