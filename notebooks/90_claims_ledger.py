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
# build. A claim whose chapter is not in the book yet is marked *not yet measured*; a
# chapter that ran but did not report a claim it owns fails this page's build.

# %% tags=["parameters"]
profile = "quick"  # injected by the chapter runner
seed = 0  # unused: this page only collects

# %% tags=["remove-cell"]
import pandas as pd
from IPython.display import HTML
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
def measured(row: dict) -> str:
    """A measurement and its 95% interval as the ledger shows it."""
    if row["value"] is None:
        return "—"
    lo, hi = row["ci"]
    return f"{row['value']:.3g} [{lo:.3g}, {hi:.3g}]"


def chapter(stem: str) -> str:
    """``"04_mcmc_validation"`` -> ``"4 mcmc validation"``."""
    number, _, name = stem.partition("_")
    return f"{int(number)} {name.replace('_', ' ')}" if number.isdigit() else stem


ledger = pd.DataFrame({
    "claim": [r["id"] for r in rows],
    "statement": [f"{r['statement']} ({r['paper']})" for r in rows],
    "chapter": [chapter(r["owner"]) for r in rows],
    "measured": [measured(r) for r in rows],
    "verdict": [claims.verdict_label(r["verdict"], profile) for r in rows],
    "rule": [r["rule"] for r in rows],
    "note": [r["note"] or "—" for r in rows],
})
# the verdict comes second, so that a phone shows it without scrolling the table
table(ledger, {"claim": "claim", "verdict": "verdict", "measured": ("measured [95% CI]", "", True),
               "statement": "the paper says", "chapter": "chapter"},
      caption=f"Claims ledger (profile {profile})")

# %% [markdown]
# Each verdict comes from a rule applied to the measured number; the caveats are computed
# by the chapter that measured it.

# %%
table(ledger, {"claim": "claim", "rule": "how the verdict is decided", "note": "caveat (measured)"},
      caption="The rules and caveats")

# %% tags=["remove-input"]
prov.show()
