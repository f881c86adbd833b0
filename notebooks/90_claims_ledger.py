# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Claims ledger
#
# Each claim of the paper, the chapter that tests it, our measured number with its 95%
# interval, and a verdict. Verdicts are not written by hand: each claim has a rule in
# code (`gnuq_core/repro/claims.py`), applied to the number its chapter measured in this
# build. Before a rule may judge, the claim's **evidence gate** checks that the data can
# decide (enough seeds, settings, questions, correct and wrong answers; an interval no
# wider than the rule allows, unless the whole interval lies where no value could reproduce
# the claim); otherwise the verdict is *inconclusive* and the ledger says why. A claim whose chapter is not in the book yet is marked *not yet measured*; a
# chapter that ran but did not report a claim it owns fails this page's build.

# %% tags=["parameters"]
profile = "quick"  # injected by the chapter runner
seed = 0  # unused: this page only collects

# %% tags=["remove-cell"]
import pandas as pd
from IPython.display import HTML, Markdown, display
from myst_nb import glue

from gnuq_core.repro import claims
from gnuq_core.repro.diagram import method_diagram_svg
from gnuq_core.repro.display import table
from gnuq_core.repro.provenance import PAPER_PROFILE, Provenance, git_state, is_paper_edition
from gnuq_core.repro.toc import toc_chapters

prov = Provenance.start()
rows = claims.collect(chapters=toc_chapters())
counts = {v: sum(r["verdict"] == v for r in rows) for v in claims.VERDICTS}
for verdict, n in counts.items():
    glue(f"n_{verdict.replace(' ', '_')}", n, display=False)
glue("n_claims", len(rows), display=False)
state = git_state()
glue("build_commit", state["commit"][:12], display=False)
glue("build_dirty", " (with uncommitted changes)" if state["dirty"] else "", display=False)
glue("build_profile", profile, display=False)
glue("build_edition", "the paper edition" if is_paper_edition(profile)
     else f"a preview; the paper edition is profile {PAPER_PROFILE}", display=False)
glue("build_time", prov.record()["built_at"], display=False)
# The method on one page, drawn fresh in every build; the introduction shows it (inline SVG:
# a PNG glued across pages would not be copied into the build).
glue("method_diagram", HTML(method_diagram_svg()), display=False)

# %% [markdown]
# Of {glue:text}`n_claims` claims, {glue:text}`n_reproduced` are reproduced,
# {glue:text}`n_partly_reproduced` partly reproduced, {glue:text}`n_not_reproduced` not
# reproduced, {glue:text}`n_inconclusive` inconclusive (measured, but the data cannot
# decide, e.g. no correct answers to rank) and {glue:text}`n_not_yet_measured` not yet
# measured in this build. This build (profile {glue:text}`build_profile`) is
# {glue:text}`build_edition`. Outside the paper edition every verdict is labelled
# *preview*, because smaller runs can reach a different verdict; the chapters say how
# the verdicts depend on the settings.

# %%
def undefined(row: dict) -> bool:
    """No model qualified for a QA claim: its recorded 0.5 [0, 1] is a placeholder, not a measurement."""
    return 0 in (row["evidence"].get("models"), row["evidence"].get("transfers"))


def measured(row: dict) -> str:
    """A measurement and its 95% interval as the ledger shows it."""
    if row["value"] is None:
        return "—"
    if undefined(row):
        return "— (no model has enough answers)"
    lo, hi = row["ci"]
    return f"{row['value']:.3g} [{lo:.3g}, {hi:.3g}]"


def chapter(stem: str) -> str:
    """``"04_mcmc_validation"`` -> ``"4 mcmc validation"``."""
    number, _, name = stem.partition("_")
    return f"{int(number)} {name.replace('_', ' ')}" if number.isdigit() else stem


def evidence(row: dict) -> str:
    """The counts a verdict rests on, e.g. ``"3 seeds · 12 settings"``."""
    def noun(k: str, n: int) -> str:  # "1 seed", "2 seeds"
        k = k.replace("_", " ")
        return k[:-1] if n == 1 and k.endswith("s") else k

    return " · ".join(f"{n} {noun(k, n)}" for k, n in row["evidence"].items()) or "—"


def gate(row: dict) -> str:
    """The gate's result: passed, or why the data cannot decide."""
    if row["gate"]["passed"] is None:
        return "—"
    return "passed" if row["gate"]["passed"] else row["gate"]["reason"]


ledger = pd.DataFrame({
    "claim": [r["id"] for r in rows],
    "statement": [f"{r['statement']} ({r['paper']})" for r in rows],
    "chapter": [chapter(r["owner"]) for r in rows],
    "measured": [measured(r) for r in rows],
    "verdict": [claims.verdict_label(r["verdict"], profile) for r in rows],
    "evidence": [evidence(r) for r in rows],
    "width": [float("nan") if undefined(r) else r["width"] for r in rows],
    "gate": [gate(r) for r in rows],
    "gate_rule": [r["gate"]["rule"] for r in rows],
    "rule": [r["rule"] for r in rows],
    "note": [r["note"] or "—" for r in rows],
})
# Three narrow tables rather than one wide one: the verdict comes second, so that a phone
# shows it without scrolling; the evidence and the rules follow, one row per claim again.
edition = "paper edition" if is_paper_edition(profile) else "preview"
table(ledger, {"claim": "claim", "verdict": "verdict", "measured": ("measured [95% CI]", "", True),
               "statement": "the paper says", "chapter": "chapter"},
      caption=f"Claims ledger ({edition}, profile {profile})")

# %% [markdown]
# A verdict is only given where the evidence can decide. The **gate** of each claim states
# what the data must hold (counts per class, seeds, settings, and the widest interval the
# rule accepts); the table shows what this build had.

# %%
table(ledger, {"claim": "claim", "evidence": "evidence (n)", "width": ("interval width", ".3g"),
               "gate": "evidence gate", "gate_rule": "the data must hold"},
      caption=f"The evidence behind each verdict ({edition})")

# %% [markdown]
# Each verdict comes from a rule applied to the measured number; the caveats are computed
# by the chapter that measured it.

# %%
table(ledger, {"claim": "claim", "rule": "how the verdict is decided", "note": "caveat (measured)"},
      caption="The rules and caveats")

# %% [markdown]
# ## Compound claims and readings
#
# Some claims make several statements at once; each statement is a **part** with its own
# measure, rule and evidence gate, and the claim's verdict is derived from its parts (every
# part reproduced: reproduced; every part the data can judge not reproduced: not
# reproduced; otherwise partly). Where the paper leaves a definition open (how answers are
# graded, whether p is the whole answer's probability or its length-normalised version, how
# "combined" is formed), the claim is judged under every **reading**; a verdict is
# **robust** if it is the same under all of them, and *depends on the reading* otherwise
# (the chapter's readings table shows which readings flip it).

# %%
part_rows = [{"claim": r["id"], "part": p["id"], "statement": p["statement"],
              "measured": f"{p['value']:.3g} [{p['ci'][0]:.3g}, {p['ci'][1]:.3g}]",
              "verdict": claims.verdict_label(p["verdict"], profile), "rule": p["rule"]}
             for r in rows for p in r.get("parts", [])]
if part_rows:
    display(table(pd.DataFrame(part_rows), {"part": "part", "verdict": "verdict", "measured": ("measured [95% CI]", "", True),
                                    "statement": "the paper says", "rule": "rule"},
          caption=f"The parts of the compound claims ({edition})"))
robust_rows = [{"claim": r["id"], "verdict": claims.verdict_label(r["verdict"], profile),
                "readings": len(r["readings"]), "robustness": r["robustness"]["text"]}
               for r in rows if r.get("robustness")]
if robust_rows:
    display(table(pd.DataFrame(robust_rows), {"claim": "claim", "verdict": "verdict (primary reading)",
                                      "readings": ("readings judged", "d"), "robustness": "robust?"},
          caption="How each claim's verdict depends on the readings the paper leaves open"))
else:
    display(Markdown("*No claim was judged under several readings in this build.*"))

# %% [markdown]
# ```{glue} cross_check_links
# ```

# %% tags=["remove-cell"]
# Each claim's numbers are checked against an independent implementation in the cross-checks
# chapter (when it is in this book).
by_check: dict[str, list[str]] = {}
for r in rows:
    by_check.setdefault(r["cross_check"], []).append(r["id"])
CHECK_TITLES = {"xcheck-laplace": "Laplace / GGN variance and ‖∇p‖² against laplace-torch and plain autograd",
                "xcheck-spectra": "Hessian spectra against scipy's eigsh and exact eigenvalues",
                "xcheck-gradnorm": "gradient norms of the real language models against plain autograd",
                "xcheck-baselines": "QA baselines against their published formulas"}
if "80_cross_checks" in toc_chapters():  # plain HTML links: a glued Markdown text does not resolve {ref} roles
    links = "; ".join(f'{", ".join(ids)}: <a href="80_cross_checks.html#{label}">{CHECK_TITLES[label]}</a>'
                      for label, ids in by_check.items())
    glue("cross_check_links", HTML(f"<p><strong>Cross-checks.</strong> {links}.</p>"), display=False)
else:
    glue("cross_check_links", HTML("<p>The cross-checks chapter is not part of this build.</p>"), display=False)

# %% tags=["remove-input"]
prov.show()
