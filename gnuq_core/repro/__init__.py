"""Reproducibility machinery: chapters, claims ledger, provenance, caches and the results store.

- `chapters`: run chapter notebooks with a profile (``python -m gnuq_core.repro.chapters``);
- `claims`: the paper's claims and the rules that give verdicts;
- `provenance`: commit, profile, parameters, versions, wall time of a run;
- `toc`, `glued`, `paths`: the book's chapters, glued values, where things live;
- `cache`, `records`, `results_store`: the local cache, resumable JSONL files, the store;
- `netguard`: refuse every non-local network connection.
"""
