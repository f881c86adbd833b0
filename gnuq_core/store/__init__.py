"""The results store: per-item results that rebuild on any machine, under a contract per kind.

The paper edition reads its expensive results (NUTS references, spectra, the QA records)
from ``results/`` and recomputes a random sample from scratch in every build. What
"agrees" means depends on the kind, and is declared with it:

- `kinds`: THE registry of stored kinds: roots of their code, contract, what an item is;
- `contracts`: exact (a tolerance on any machine) and chaotic (bit-identical on the
  platform that made an item, a statistical rule elsewhere);
- `fingerprint`: the platform a record was made on (CPU, kernel choices, versions), and
  the environment settings that simulate another CPU here;
- `codeversion`: the code version of a kind, hashed from what its code means (syntax
  trees of its import closure, without docstrings, comments, imports or messages);
- `keys`: configuration keys that do not change with the last bit of a float;
- `store`: the one interface, :class:`Store` (`open_store` picks it per profile);
- `carry`: move stored results across a code change after verifying them.

Command line: ``gnuq store {status,carry,simulate,migrate}``.
"""

from gnuq_core.store.store import Check, ResultsDisagree, Store, StoreIncomplete, open_store

__all__ = ["Store", "open_store", "ResultsDisagree", "StoreIncomplete", "Check"]
