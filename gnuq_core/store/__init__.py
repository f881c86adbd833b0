"""The results store: per-item results that rebuild on any machine, under a contract per kind.

`kinds` is THE registry of stored kinds; `contracts` says how a recomputed item must agree
(exact, or chaotic: bit-identical where made, statistical elsewhere); `verify` holds the checks;
`store` the one interface, :meth:`Store.items`. Command line: ``gnuq store {status,verify,simulate}``.
"""

from gnuq_core.store.store import Store, StoreDamaged, StoreIncomplete, open_store
from gnuq_core.store.verify import Check, Recipe, ResultsDisagree, Sample

__all__ = ["Store", "open_store", "Recipe", "Sample", "ResultsDisagree", "StoreIncomplete", "StoreDamaged", "Check"]
