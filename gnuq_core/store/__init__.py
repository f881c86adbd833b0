"""The results store: per-item results that rebuild on any machine, under a contract per kind.

The paper edition reads its expensive results from ``results/`` and recomputes a random sample
in every build; what "agrees" means is declared with each kind:

- `kinds`: THE registry of stored kinds: version, contract, what an item is;
- `contracts`: exact (a tolerance on any machine) and chaotic (bit-identical on the
  platform that made an item, a statistical rule elsewhere);
- `gnuq_core.repro.fingerprint`, `gnuq_core.repro.threads`: the platform and BLAS threads an item was made under;
- `verify`: the checks: one stored item recomputed under its contract, a build's sample, every
  item of a file (a full verification);
- `store`: the one interface, :meth:`Store.items` (`open_store` picks the store per profile).
  Command line: ``gnuq store {status,verify,simulate}``.
"""

from gnuq_core.store.store import Store, StoreDamaged, StoreIncomplete, open_store
from gnuq_core.store.verify import Check, Recipe, ResultsDisagree, Sample

__all__ = ["Store", "open_store", "Recipe", "Sample", "ResultsDisagree", "StoreIncomplete", "StoreDamaged", "Check"]
