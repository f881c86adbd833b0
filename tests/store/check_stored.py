"""Chapter 02's from-scratch check of its stored synthetic sweep, on a copy of the results store.

    python -m tests.store.check_stored RESULTS_DIR

Recomputes one stored seed (drawn as the chapter draws it) of ``RESULTS_DIR/proxy_synthetic``
with the paper edition's parameters and prints the check as one JSON line: item, platforms,
contract, largest deviation. Exits 1 with the one-line `ResultsDisagree` message if the check fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from gnuq_core.isotropy import proxy_stored
    from gnuq_core.book.runner import chapter_parameters
    from gnuq_core.store import ResultsDisagree, open_store

    p = chapter_parameters("02", "full")
    store = open_store("full", root=Path(argv[0]))
    try:
        proxy_stored.synthetic_runs(range(p["seed"], p["seed"] + p["n_seeds"]), p["deltas"], n_train=p["n_train"],
                                    hidden=[p["hidden_width"]] * 2, steps=p["train_steps"],
                                    weight_decay=p["weight_decay"], k_top=p["k_top"], n_grid=p["n_grid"],
                                    store=store, verify=p["store_verify"])
    except ResultsDisagree as err:
        print(f"ResultsDisagree: {err}", file=sys.stderr)
        return 1
    (check,) = store.checks()
    print(json.dumps({"item": check.item, "same_platform": check.same_platform, "made_on": check.made_on,
                      "checked_on": check.checked_on, "contract": check.contract, "rule": check.rule,
                      "largest": check.largest, "computed": sum(r.computed for r in store.reads)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
