"""Chapter 90, the claims ledger: every claim with its measured number, verdict and why.

The ledger computes nothing of its own: it collects the claims the other chapters of this
build recorded (`gnuq_core.repro.claims.collect`) and shows each one so that it can be read
alone, by a reviewer who starts here: the measured quantity by name, its value with the
95% interval, the verdict with its one-line reason, the evidence with labelled counts and
the gate it had to pass, the computed caveat, the glossary terms it rests on and a link to
the section that measures it (`claim_cards`, one card per claim, readable at phone width).
A summary table, the parts of the compound claims and their robustness across the
readings the paper leaves open follow.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gnuq_core.chapters.base import ChapterParams, Result, param
from gnuq_core.options import OPTIONS
from gnuq_core.repro import claims
from gnuq_core.repro.diagram import method_diagram_svg
from gnuq_core.repro.display import table
from gnuq_core.repro.provenance import PAPER_PROFILE, git_state, is_paper_edition
from gnuq_core.repro.toc import toc_chapters

__all__ = ["Params", "run", "claim_cards", "reproduction_table", "cells_table", "chapter_title", "glossary_anchor",
           "measured_text", "evidence_text", "CHECK_TITLES", "MARKS"]

MARKS = {claims.REPRODUCED: "✓", claims.NOT_REPRODUCED: "✗", claims.PARTLY: "◐", claims.INCONCLUSIVE: "?",
         claims.NOT_MEASURED: "·", "beyond the paper": "+"}
"""A verdict's mark: the reproduction tables stay readable in grey scale and on a phone."""

CHECK_TITLES = {"xcheck-laplace": "Laplace / GGN variance and ‖∇p‖² against laplace-torch and plain autograd",
                "xcheck-spectra": "Hessian spectra against scipy's eigsh and exact eigenvalues",
                "xcheck-gradnorm": "gradient norms of the real language models against plain autograd",
                "xcheck-baselines": "QA baselines against their published formulas"}
"""The cross-checks chapter's sections (labels) and what each checks."""


@dataclass(frozen=True)
class Params(ChapterParams):
    """The ledger has nothing to set: it collects what this build's chapters recorded."""

    CHAPTER = "90_claims_ledger"
    seed: int = param(0, OPTIONS["seed"], "unused: the ledger draws nothing at random (every chapter declares one)")


def chapter_title(stem: str) -> str:
    """``"04_mcmc_validation"`` -> ``"4 · MCMC validation: …"`` from the notebook's first heading."""
    number, _, name = stem.partition("_")
    source = Path(__file__).resolve().parents[1] / "notebooks" / f"{stem}.py"
    heading = name.replace("_", " ")
    if source.exists():
        found = re.search(r"^# # (.+)$", source.read_text(encoding="utf-8"), flags=re.MULTILINE)
        heading = found.group(1).strip() if found else heading
    return f"{int(number)} · {heading}" if number.isdigit() else heading


def glossary_anchor(term: str) -> str:
    """The id Sphinx gives a glossary term (``term-Spearman`` for "Spearman ρ")."""
    from sphinx.util.nodes import _make_id

    return _make_id(f"term-{term}")


def _undefined(row: dict[str, Any]) -> bool:
    """No model qualified for a QA claim: its recorded 0.5 [0, 1] is a placeholder, not a measurement."""
    return 0 in (row["evidence"].get("models"), row["evidence"].get("transfers"))


def measured_text(row: dict[str, Any]) -> str:
    """The measured value and its 95% interval (``"0.524 [0.49, 0.558]"``), or why there is none."""
    if row["value"] is None:
        return "—"
    if _undefined(row):
        return "— (no model has enough answers)"
    lo, hi = row["ci"]
    return f"{row['value']:.3g} [{lo:.3g}, {hi:.3g}]"


def evidence_text(evidence: dict[str, int]) -> str:
    """The counts a verdict rests on, labelled (``"817 questions per model · 207 fewest correct …"``)."""
    return " · ".join(f"{n:,} {claims.EVIDENCE_WORDS.get(k, k.replace('_', ' '))}" for k, n in evidence.items()) or "—"


def _verdict_class(verdict: str) -> str:
    return "verdict-" + verdict.split(" (")[0].replace(" ", "-")


def claim_cards(rows: list[dict[str, Any]], profile: str, chapters: list[str]) -> str:
    """One HTML card per claim: the paper's statement, what was measured, the verdict and why,
    the evidence and its gate, the caveat, the terms it rests on, where it is measured."""
    esc = html.escape
    cards = []
    for r in rows:
        verdict = claims.verdict_label(r["verdict"], profile)
        where = (f'<a href="{r["owner"]}.html#{r["anchor"]}">{esc(chapter_title(r["owner"]))}</a>'
                 if r["owner"] in chapters else f"{esc(chapter_title(r['owner']))} (not in this build)")
        terms = ", ".join(f'<a href="../glossary.html#{glossary_anchor(t)}">{esc(t)}</a>' for t in r["terms"]) or "—"
        gate = ("—" if r["gate"]["passed"] is None else "passed" if r["gate"]["passed"]
                else f"failed: {r['gate']['reason']}")
        lines = [
            ("Measured", f"{esc(r['quantity'])}: <strong>{esc(measured_text(r))}</strong>"),
            ("Why", esc(r["reason"] or "—")),
            ("Evidence", esc(evidence_text(r["evidence"]))),
            ("Evidence gate", f"{esc(gate)} <span class=\"gnuq-muted\">(the data must hold: "
                              f"{esc(r['gate']['rule'])})</span>"),
            ("Caveat", esc(r["note"] or "—")),
            ("Our readings", "<ul>" + "".join(f"<li>{esc(d)}</li>" for d in r.get("deviations", [])) + "</ul>"
             if r.get("deviations") else "—"),
            ("Rule", esc(r["rule"])),
            ("Rests on", terms),
            ("Measured in", where),
        ]
        body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in lines)
        cards.append(
            f'<section class="gnuq-claim {_verdict_class(r["verdict"])}" id="ledger-{r["id"].lower()}">'
            f'<header><span class="gnuq-claim-id">{esc(r["id"])}</span> '
            f'<span class="gnuq-verdict">{esc(verdict)}</span></header>'
            f'<p class="gnuq-claim-statement">{esc(r["statement"])} <span class="gnuq-muted">(paper: '
            f'{esc(r["paper"])})</span></p><dl>{body}</dl></section>')
    return f'<div class="gnuq-ledger">{"".join(cards)}</div>'


def _link(owner: str, anchor: str, text: str, chapters: list[str]) -> str:
    """``text`` linked to the section ``anchor`` of chapter ``owner`` (plain when it is not built)."""
    return (f'<a href="{owner}.html#{anchor}">{html.escape(text)}</a>' if owner in chapters
            else html.escape(text))


def _repro_table(headers: list[str], rows: list[tuple[str, list[str]]], caption: str) -> str:
    """A reproduction table: one ``<tr class="verdict-…">`` per row (cells already HTML); on a
    phone each row becomes a block whose cells carry their header (``data-label``)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(f'<tr class="{cls}">' + "".join(f'<td data-label="{html.escape(h)}">{c}</td>'
                                                  for h, c in zip(headers, cells)) + "</tr>"
                   for cls, cells in rows)
    return (f'<table class="gnuq-repro"><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _verdict_cell(verdict: str, profile: str) -> str:
    return (f'<span class="gnuq-verdict"><span class="gnuq-mark">{MARKS.get(verdict, "")}</span> '
            f'{html.escape(claims.verdict_label(verdict, profile))}</span>')


TALLY_WORDS = {claims.REPRODUCED: "reproduced", claims.PARTLY: "partly reproduced",
               claims.NOT_REPRODUCED: "not reproduced", claims.INCONCLUSIVE: "inconclusive with our data",
               claims.NOT_MEASURED: "not yet measured in this build"}


def verdict_tally(rows: list[dict[str, Any]]) -> str:
    """The verdicts in one sentence that names the claims: "2 reproduced (C3, C5), 4 not
    reproduced (C1, C2, C6, C7), …" (verdicts no claim reached are left out)."""
    parts = []
    for verdict in claims.VERDICTS:
        ids = [r["id"] for r in rows if r["verdict"] == verdict]
        if ids:
            parts.append(f"{len(ids)} {TALLY_WORDS.get(verdict, verdict)} ({', '.join(ids)})")
    return "; ".join(parts)


def reproduction_table(rows: list[dict[str, Any]], profile: str, chapters: list[str]) -> str:
    """Each claim as a reproduction report gives it: the paper's number, ours with its 95 %
    interval, the tolerance (the rule), the verdict; each claim linked to its section."""
    body = [(_verdict_class(r["verdict"]),
             [_link(r["owner"], r["anchor"], r["id"], chapters), html.escape(r["paper"]),
              html.escape(measured_text(r)), html.escape(claims.CLAIMS[r["id"]].tolerance),
              _verdict_cell(r["verdict"], profile)]) for r in rows]
    return _repro_table(["claim", "paper", "ours [95% CI]", "tolerance", "verdict"], body,
                        "The paper's claims beside our measurements")


def cells_table(table: str, cells: list[dict[str, Any]], profile: str, chapters: list[str]) -> str:
    """One of the paper's tables cell by cell: paper | ours [interval] | verdict, divergent cells
    marked (✗), each cell linked to the section that computes it; where the cells carry other
    readings (``{"queries in-distribution": [value, lo, hi, verdict]}``), one column per reading."""
    def interval(v: Any, lo: Any, hi: Any) -> str:
        return "—" if v is None or v != v else f"{v:.2f} [{lo:.2f}, {hi:.2f}]"

    readings = list(dict.fromkeys(name for c in cells for name in c.get("readings", {})))
    body = []
    for c in cells:
        label = f"{c['column']} · {c['row']} · {c['statistic']}"
        paper = "—" if c["paper"] is None else f"{c['paper']:.2f}"
        other = []
        for name in readings:
            v, lo, hi, verdict = c.get("readings", {}).get(name, (None, None, None, ""))
            other.append("<span>" + html.escape(interval(v, lo, hi))
                         + (f' <span class="gnuq-mark">{MARKS.get(verdict, "")}</span>' if verdict else "") + "</span>")
        body.append((_verdict_class(c["verdict"]) if c["verdict"] in claims.VERDICTS else "verdict-beyond",
                     [_link(c["chapter"], c["anchor"], label, chapters), paper,
                      html.escape(interval(c["ours"], c["lo"], c["hi"])),
                      _verdict_cell(c["verdict"], profile) if c["verdict"] in claims.VERDICTS
                      else html.escape(c["verdict"]), *other]))
    judged = [c["verdict"] for c in cells if c["verdict"] in claims.VERDICTS]
    counts = ", ".join(f"{judged.count(v)} {v}" for v in claims.VERDICTS if judged.count(v))
    tolerance = cells[0]["tolerance"] if cells else ""
    also = f"; the last column{'s' if len(readings) > 1 else ''}: another reading" if readings else ""
    return _repro_table(["cell", "paper", "ours", "verdict", *readings], body,
                        f"The paper's {table}, cell by cell: {counts} (reproduced if {tolerance}{also})")


def _parts_table(rows: list[dict[str, Any]], profile: str, edition: str) -> Any:
    part_rows = [{"part": p["id"], "statement": p["statement"],
                  "measured": f"{p['value']:.3g} [{p['ci'][0]:.3g}, {p['ci'][1]:.3g}]",
                  "verdict": claims.verdict_label(p["verdict"], profile), "why": p.get("reason", "")}
                 for r in rows for p in r.get("parts", [])]
    if not part_rows:
        return None
    return table(pd.DataFrame(part_rows), {"part": "part", "verdict": "verdict",
                                           "measured": ("measured [95% CI]", "", True),
                                           "statement": "the paper says", "why": "why"},
                 caption=f"The parts of the compound claims ({edition})")


def _robustness_table(rows: list[dict[str, Any]], profile: str) -> Any:
    robust = [{"claim": r["id"], "verdict": claims.verdict_label(r["verdict"], profile),
               "readings": len(r["readings"]), "robustness": r["robustness"]["text"]}
              for r in rows if r.get("robustness")]
    if not robust:
        return None
    return table(pd.DataFrame(robust), {"claim": "claim", "verdict": "verdict (primary reading)",
                                        "readings": ("readings judged", "d"), "robustness": "robust?"},
                 caption="How each claim's verdict depends on the readings the paper leaves open")


def _cross_check_links(rows: list[dict[str, Any]], chapters: list[str]) -> str:
    if "80_cross_checks" not in chapters:
        return "<p>The cross-checks chapter is not part of this build.</p>"
    by_check: dict[str, list[str]] = {}
    for r in rows:
        by_check.setdefault(r["cross_check"], []).append(r["id"])
    links = "; ".join(f'{", ".join(ids)}: <a href="80_cross_checks.html#{label}">{html.escape(CHECK_TITLES[label])}</a>'
                      for label, ids in by_check.items())
    return f"<p><strong>Cross-checks.</strong> {links}.</p>"


def run(p: Params, profile: str, built_at: str = "") -> Result:
    """Collect this build's claims (`gnuq_core.repro.claims.collect` over the chapters of the
    table of contents) and build the ledger's cards, tables and counts."""
    from IPython.display import HTML

    chapters = toc_chapters()
    rows = claims.collect(chapters=chapters)
    cells = claims.collect_cells(chapters=chapters)
    out = Result()
    for verdict in claims.VERDICTS:
        out.values[f"n_{verdict.replace(' ', '_')}"] = sum(r["verdict"] == verdict for r in rows)
    out.values["verdict_tally"] = verdict_tally(rows)
    state = git_state()
    edition = "paper edition" if is_paper_edition(profile) else "preview"
    out.values.update(
        n_claims=len(rows), build_commit=state["commit"][:12],
        build_dirty=" (with uncommitted changes)" if state["dirty"] else "", build_profile=profile,
        build_edition=("the paper edition" if is_paper_edition(profile)
                       else f"a preview; the paper edition is profile {PAPER_PROFILE}"),
        build_time=built_at,
        # the method on one page, drawn fresh in every build; the introduction shows it (inline SVG:
        # a PNG glued across pages would not be copied into the build)
        method_diagram=HTML(method_diagram_svg()),
        claim_cards=HTML(claim_cards(rows, profile, chapters)),
        cross_check_links=HTML(_cross_check_links(rows, chapters)),
        reproduction_table=HTML(reproduction_table(rows, profile, chapters)),
        cells_tables=HTML("".join(cells_table(t, c, profile, chapters) for t, c in cells.items())
                          or "<p>No chapter that computes one of the paper's tables is part of this build.</p>"))
    summary = pd.DataFrame({
        "claim": [f"{r['id']}" for r in rows],
        "verdict": [claims.verdict_label(r["verdict"], profile) for r in rows],
        "measured": [measured_text(r) for r in rows],
        "quantity": [r["quantity"] for r in rows],
    })
    out.tables["summary"] = table(summary, {"claim": "claim", "verdict": "verdict",
                                            "measured": ("measured [95% CI]", "", True), "quantity": "of"},
                                  caption=f"Claims ledger at a glance ({edition}, profile {profile})")
    for name, tab in (("parts", _parts_table(rows, profile, edition)), ("robustness", _robustness_table(rows, profile))):
        if tab is not None:
            out.tables[name] = tab
    if "robustness" not in out.tables:
        from IPython.display import Markdown

        out.tables["robustness"] = Markdown("No claim was judged under several readings in this build.")
    out.data["rows"] = rows
    return out
