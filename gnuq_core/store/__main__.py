"""``gnuq store`` (``python -m gnuq_core.store``): look at the results store, carry it across a code change, simulate a CPU.

::

    gnuq store status [KIND ...]     # files, items, code versions, platforms, carries
    gnuq store carry 03              # build chapter 03 in the paper edition, carrying
                                     # orphaned files after verifying them
    gnuq store simulate avx2 -- make book   # run a command as on a CPU without AVX-512
    gnuq store migrate               # once: re-key files made before contracts (2026-12-01)

(``python -m gnuq_core.store ...`` is the same command.)

Errors print one line and exit with status 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from gnuq_core.options import OneLineParser, run_command
from gnuq_core.repro.shards import read_merged
from gnuq_core.store import kinds as registry
from gnuq_core.store.fingerprint import SIMULATIONS, describe, simulated_env
from gnuq_core.store.migrate import migrate
from gnuq_core.store.store import RESULTS, Store

__all__ = ["main", "status_rows"]


def status_rows(store: Store, names: list[str] | None = None) -> list[dict[str, str]]:
    """One row per stored file: kind, file, items, code version state, platforms, carry report."""
    rows = []
    for name in names or list(registry.KINDS):
        spec = registry.get(name)
        current = spec.code
        for path in sorted((store.root / name).glob("*.jsonl")):
            if ".rank" in path.name or ".carry" in path.name:
                continue
            config, records = read_merged(path)
            made: dict[str, int] = {}
            for r in records:
                fid = (r.get("_made") or {}).get("fp") or "not recorded"
                made[fid] = made.get(fid, 0) + 1
            code = config.get("_code")
            carried = path.with_name(f"{path.stem}.carried.json")
            rows.append({
                "kind": name, "file": path.name, "items": str(len(records)),
                "code": f"{code} ({'current' if code == current else f'orphaned: the code is now {current}'})",
                "made on": ", ".join(f"{k} × {v}" for k, v in sorted(made.items())),
                "carried": json.loads(carried.read_text()).get("date", "yes") if carried.exists() else "",
            })
    return rows


def _status(args: object) -> int:
    store = Store(RESULTS, label="the results store")
    names = getattr(args, "kinds") or None
    for name in names or []:
        registry.get(name)
    rows = status_rows(store, names)
    for row in rows:
        print(" | ".join(f"{k}: {v}" for k, v in row.items() if v))
    here = store.fingerprint_id
    print(f"\nthis machine: {here} = {describe(store.fingerprint)}")
    for fid, fp in sorted(store.fingerprints().items()):
        print(f"{fid}{' (this machine)' if fid == here else ''} = {describe(fp)}")
    return 0


def _carry(args: object) -> int:
    target = getattr(args, "target")
    env = {**os.environ, "GNUQ_STORE_CARRY": "1", "GNUQ_STORE_MISSING": os.environ.get("GNUQ_STORE_MISSING", "warn")}
    if target == "qa":
        cmd = [sys.executable, "-m", "gnuq_core.qa.study", "carry", *getattr(args, "rest")]
        return subprocess.call(cmd, env=env)
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "gnuq_core.repro.chapters", "run", target, "--profile", "full", "--out", out,
               *getattr(args, "rest")]
        return subprocess.call(cmd, env=env)


def _simulate(args: object) -> int:
    command = [c for c in getattr(args, "command") if c != "--"]
    if not command:
        print(f"error: simulate {getattr(args, 'name')}: give a command after --, e.g. "
              f"gnuq store simulate {getattr(args, 'name')} -- make book", file=sys.stderr)
        return 2
    env = simulated_env(getattr(args, "name"))
    shown = " ".join(f"{k}={v}" for k, v in SIMULATIONS[getattr(args, "name")].items())
    print(f"simulate: {shown} {' '.join(command)}", file=sys.stderr)
    try:
        return subprocess.call(command, env=env)
    except FileNotFoundError:
        print(f"error: simulate: no such command: {command[0]}", file=sys.stderr)
        return 2


def _migrate(args: object) -> int:
    migrate(RESULTS, dry_run=getattr(args, "dry_run"))
    return 0


def main(argv: list[str] | None = None, prog: str = "gnuq store") -> int:
    """``gnuq store status|carry|simulate|migrate`` (see the module docstring)."""
    parser = OneLineParser(prog=prog, description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("status", help="files, items, code versions, platforms and carries of the results store")
    st.add_argument("kinds", nargs="*", help=f"kinds to show (default all: {', '.join(registry.KINDS)})")
    ca = sub.add_parser("carry", help="carry orphaned files across a code change after verifying them")
    ca.add_argument("target", help="a chapter (e.g. 03) whose paper-edition build carries its kinds, or 'qa' for "
                                   "the QA records (arguments after it go to `gnuq_core.qa.study carry`)")
    ca.add_argument("rest", nargs="*", help="further arguments for the chapter runner or the QA study")
    si = sub.add_parser("simulate", help="run a command as on another CPU (JAX, torch and BLAS kernels)")
    si.add_argument("name", choices=sorted(SIMULATIONS), help="the CPU to simulate")
    si.add_argument("command", nargs="*", help="the command, after --")
    mi = sub.add_parser("migrate", help="once: re-key files made before the reproducibility contracts")
    mi.add_argument("--dry-run", action="store_true", help="check and report, change nothing")
    args = parser.parse_args(argv)
    return run_command(lambda: {"status": _status, "carry": _carry, "simulate": _simulate,
                                "migrate": _migrate}[args.cmd](args),
                       bad_input=(KeyError,), message=lambda err: str(err).strip(chr(34)),
                       interrupted="interrupted: what was verified and written so far is kept; rerun the same "
                                   "command to go on")


if __name__ == "__main__":
    sys.exit(main())

