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

# %%
import pandas as pd
from IPython.display import Markdown, display
from myst_nb import glue

from gnuq_core.repro import claims
from gnuq_core.repro.provenance import Provenance, git_state
from gnuq_core.repro.toc import toc_chapters

prov = Provenance.start()
rows = claims.collect(chapters=toc_chapters())


def fmt(row: dict) -> str:
    if row["value"] is None:
        return "—"
    lo, hi = row["ci"]
    return f"{row['value']:.3g} [{lo:.3g}, {hi:.3g}]"


table = pd.DataFrame({
    "claim": [r["id"] for r in rows],
    "the paper says": [f"{r['statement']} ({r['paper']})" for r in rows],
    "chapter": [r["owner"] for r in rows],
    "measured [95% CI]": [fmt(r) for r in rows],
    "verdict": [r["verdict"] for r in rows],
    "rule": [r["rule"] for r in rows],
    "caveat (measured)": [r["note"] or "—" for r in rows],
})
counts = {v: sum(r["verdict"] == v for r in rows) for v in claims.VERDICTS}
for verdict, n in counts.items():
    glue(f"n_{verdict.replace(' ', '_')}", n, display=False)
glue("n_claims", len(rows), display=False)
state = git_state()
glue("build_commit", state["commit"][:12], display=False)
glue("build_dirty", " (with uncommitted changes)" if state["dirty"] else "", display=False)
glue("build_profile", profile, display=False)
glue("build_time", prov.record()["built_at"], display=False)
display(Markdown(table.to_markdown(index=False)))

# %% [markdown]
# Of {glue:text}`n_claims` claims, {glue:text}`n_reproduced` are reproduced,
# {glue:text}`n_partly_reproduced` partly reproduced, {glue:text}`n_not_reproduced` not
# reproduced, {glue:text}`n_inconclusive` inconclusive (measured, but the data cannot
# decide, e.g. no correct answers to rank) and {glue:text}`n_not_yet_measured` not yet
# measured in this build
# (profile {glue:text}`build_profile`). The numbers in the `quick` profile come from
# smaller runs than the `full` profile; the chapters say how the verdicts depend on the
# settings.

# %%
prov.show()
