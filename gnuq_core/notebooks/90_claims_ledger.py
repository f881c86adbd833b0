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
profile = "quick"  # injected by the chapter runner (its --profile)
overrides = {}  # and its --set: parameters changed from the profile

# %% tags=["remove-cell"]

from gnuq_core.chapters import glue_values, ledger, start

params, store, prov = start(ledger, profile, overrides, store=False)  # one call: chapters.base.start
result = ledger.run(params, profile, built_at=prov.record()["built_at"])
glue_values(result)

# %% [markdown]
# Of {glue:text}`n_claims` claims, {glue:text}`n_reproduced` are reproduced,
# {glue:text}`n_partly_reproduced` partly reproduced, {glue:text}`n_not_reproduced` not
# reproduced, {glue:text}`n_inconclusive` inconclusive (measured, but the data cannot
# decide, e.g. no correct answers to rank) and {glue:text}`n_not_yet_measured` not yet
# measured in this build. This build (profile {glue:text}`build_profile`) is
# {glue:text}`build_edition`. Outside the paper edition every verdict is labelled
# *preview*, because smaller runs can reach a different verdict; the chapters say how
# the verdicts depend on the settings.

# %% [markdown]
# (ledger-reproduction)=
# ## The reproduction table
#
# Each claim as a reproduction report gives it: the paper's number, ours with its 95% interval,
# the tolerance the claim's rule allows, and the verdict (✓ reproduced, ✗ not reproduced,
# ? inconclusive, ◐ partly); each claim links to the section that measures it, and its card below
# lists the readings we had to choose where the paper is silent.
#
# ```{glue} reproduction_table
# ```
#
# (ledger-cells)=
# ## The paper's tables, cell by cell
#
# Every cell of the paper's tables that a chapter of this build computes, with the paper's value,
# ours (Table 1: median over seeds with its 95% interval, on the primary query set; Table 2: mean
# ± two standard deviations over bootstrap runs and models) and the cell's verdict by the rule its
# chapter fixed before computing it. Divergent cells are marked ✗; each cell links to its section.
#
# ```{glue} cells_tables
# ```

# %% [markdown]
# ## Each claim, on its own
#
# One card per claim: what the paper says, the quantity measured (by name, with its 95%
# interval), the verdict and the reason the rule gives for it, the evidence with labelled
# counts and the **gate** it had to pass (enough seeds, settings, questions, correct and
# wrong answers; an interval no wider than the rule allows), the caveat the measuring
# chapter computed, the rule itself, the definitions it rests on (linked to the
# {doc}`glossary <../glossary>`) and the section that measures it.
#
# ```{glue} claim_cards
# ```

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
result.show(optional=["parts"])
result.show("robustness")  # a sentence where no claim was judged under several readings

# %% [markdown]
# ```{glue} cross_check_links
# ```

# %% tags=["remove-input"]
prov.show()
