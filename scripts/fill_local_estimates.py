"""Compute every missing MAP fit and local estimate of the paper edition (kind ``local_estimates``).

After a version bump of the kind (`gnuq_core.store.kinds`) every stored file is stale and the
chapters would compute their items one at a time; this script computes all of them at once,
sharded and resumable:

    torchrun --standalone --nproc-per-node 2 scripts/fill_local_estimates.py

Chapter 04's own settings and its Table 1 at every width of chapter 05's size trend share one
file (Laplace estimates); chapter 05's own grid is the other (tangent-kernel view, no Laplace).
"""

from __future__ import annotations

import argparse
import sys

from gnuq_core.bayes.validation import stored_local_estimates
from gnuq_core.chapters import mcmc, scaling
from gnuq_core.options import run_command
from gnuq_core.repro.shards import distributed
from gnuq_core.store import open_store


def main(args: argparse.Namespace) -> int:
    """Fill both files of ``args.profile``'s store (see the module docstring)."""
    p04, p05 = mcmc.Params.for_profile(args.profile), scaling.Params.for_profile(args.profile)
    with_laplace = list(mcmc.settings(p04).values())
    for q in scaling.trend_setups(p05, args.profile).values():
        with_laplace += [s for s in mcmc.table1_settings(q).values() if s not in with_laplace]
    ntk = list(scaling.settings(p05).values())
    with distributed("cpu", args.threads) as world:
        store = open_store(args.profile)
        store.missing = "compute"
        a = stored_local_estimates(with_laplace, store=store, verify=0, world=world)
        b = stored_local_estimates(ntk, laplace_estimates=False, ntk=True, store=store, verify=0, world=world)
        if world.rank == 0:
            print(f"local estimates stored: {len(a)} of {len(with_laplace)} (chapters 04 and 05's size trend), "
                  f"{len(b)} of {len(ntk)} (chapter 05's grid)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="full", help="chapter profile (default: full, the results store)")
    parser.add_argument("--threads", type=int, default=None, help="threads per process")
    sys.exit(run_command(lambda: main(parser.parse_args()),
                         interrupted="interrupted: every fit finished so far is stored; rerun to resume"))
