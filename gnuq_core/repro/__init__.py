"""Reproducibility machinery: chapters, claims ledger, provenance, caches, record files.

- `chapters`: run chapter notebooks with a profile (``gnuq chapter``);
- `claims`: the paper's claims and the rules that give verdicts;
- `provenance`: commit, profile, parameters, versions, wall time of a run;
- `toc`, `glued`, `paths`: the book's chapters, glued values, where things live;
- `cache`, `records`, `shards`: the local cache, resumable JSONL files, sharded runs (the
  results store built on them is `gnuq_core.store`);
- `netguard`: refuse every non-local network connection.
"""
