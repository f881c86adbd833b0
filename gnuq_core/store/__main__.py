"""``gnuq store`` (``python -m gnuq_core.store``): look at the results store, verify it, simulate a CPU.

::

    gnuq store status [KIND ...]          # files, items, versions (current or stale), platforms, verifications
    gnuq store verify 03 [--all]          # build chapter 03 (paper edition): check a sample (--all: every item)
    gnuq store verify qa --all -- --dataset truthfulqa   # the QA records (gnuq study verify; torchrun shards it)
    gnuq store simulate avx2 -- make book # run a command as on a CPU without AVX-512

A target is a chapter (``03``) or a stored kind (the chapters that read it are built).
``GNUQ_RESULTS_DIR`` names another copy of the results store. Errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from gnuq_core.options import OneLineParser, run_command
from gnuq_core.repro.paths import env_path
from gnuq_core.repro.shards import read_merged
from gnuq_core.store import kinds as registry
from gnuq_core.repro.fingerprint import SIMULATIONS, describe, simulated_env
from gnuq_core.store.store import RESULTS, Store, damage, stored_files
from gnuq_core.store.verify import describe_report

__all__ = ["main", "status_rows"]


def status_rows(store: Store, names: list[str] | None = None) -> list[dict[str, str]]:
    """One row per stored file: kind, file, items, version (current or stale), platforms, last full verification."""
    rows = []
    for name in names or list(registry.KINDS):
        spec = registry.get(name)
        for path in stored_files(store.root / name):
            try:
                header, records = read_merged(path)
            except ValueError as err:
                rows.append({"kind": name, "file": path.name, "state": f"damaged: {err}"})
                continue
            made = Counter((r.get("_made") or {}).get("fp") or "not recorded" for r in records)
            version = header.get("_version")
            state = ("current" if version == spec.version and header.get("_kind") == name else
                     f"stale: made under version {version} of {header.get('_kind', 'an older layout')}, the kind is "
                     f"at version {spec.version}")
            why = damage(spec, path, header, records) if state == "current" else None
            state = f"damaged: {why}" if why else state
            rows.append({"kind": name, "file": path.name, "items": str(len(records)), "state": state,
                         "made on": ", ".join(f"{k} × {v}" for k, v in sorted(made.items())),
                         "verified": describe_report(path)})
    return rows


def _status(args: argparse.Namespace) -> int:
    store = Store(env_path("GNUQ_RESULTS_DIR") or RESULTS, label="the results store")
    if not store.root.is_dir():
        raise ValueError(f"{store.root} is not a folder: point GNUQ_RESULTS_DIR to a copy of the results store")
    rows = status_rows(store, args.kinds or None)
    for row in rows:
        print(" | ".join(f"{k}: {v}" for k, v in row.items() if v))
    stale = [r for r in rows if r["state"] != "current"]
    print(f"\n{len(rows)} files in {store.root}: " + (
        "every file is at its kind's version; nothing to recompute" if not stale else
        f"{len(stale)} not current (stale or damaged): recompute their configurations, then delete them"))
    here = store.fingerprint_id
    print(f"this machine: {here} = {describe(store.fingerprint)}")
    for fid, fp in sorted(store.fingerprints().items()):
        print(f"{fid}{' (this machine)' if fid == here else ''} = {describe(fp)}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    rest = [a for a in args.rest if a != "--"]
    named = args.target if args.target in registry.KINDS else "all"  # a kind: only its items all
    env = {**os.environ, "GNUQ_STORE_VERIFY": named if args.all else "",
           "GNUQ_STORE_MISSING": os.environ.get("GNUQ_STORE_MISSING", "warn")}
    if args.target == "qa":
        return subprocess.call([sys.executable, "-m", "gnuq_core.chapters.campaign", "verify", *rest], env=env)
    with tempfile.TemporaryDirectory() as out:
        chapters = registry.KINDS[args.target].chapters if args.target in registry.KINDS else (args.target,)
        cmd = [sys.executable, "-m", "gnuq_core.book.runner", "run", *chapters, "--profile", "full", "--out", out,
               *rest]
        return subprocess.call(cmd, env=env)


def _simulate(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else list(args.command)
    if not command:
        raise ValueError(f"simulate {args.name}: give a command after --, e.g. gnuq store simulate {args.name} -- "
                         "make book")
    program = command[0]
    found = shutil.which(program) if os.sep not in program else (program if Path(program).is_file() else None)
    if found is None:
        raise ValueError(f"simulate: no such command: {program}")
    if not os.access(found, os.X_OK):
        raise ValueError(f"simulate: {program} is not executable: chmod +x it, or name its interpreter (python3 "
                         f"{program})")
    env = simulated_env(args.name)
    shown = " ".join(f"{k}={v}" for k, v in SIMULATIONS[args.name].items())
    print(f"simulate: {shown} {' '.join(command)}", file=sys.stderr)
    try:
        return subprocess.call(command, env=env)
    except OSError as err:  # a script without a shebang line, a binary for another machine
        raise ValueError(f"simulate: cannot run {program} ({err.strerror}): give it a #! line or name its "
                         f"interpreter (python3 {program})") from None


def main(argv: list[str] | None = None, prog: str = "gnuq store") -> int:
    """``gnuq store status|verify|simulate`` (see the module docstring)."""
    parser = OneLineParser(prog=prog, description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("status", help="files, items, versions, platforms and verifications of the results store")
    st.add_argument("kinds", nargs="*", help=f"kinds to show (default all: {', '.join(registry.KINDS)})")
    ve = sub.add_parser("verify", help="check the stored items of a chapter or kind under their contracts")
    ve.add_argument("target", help="a chapter (e.g. 03), a stored kind, or 'qa' for the QA records (arguments after "
                                   "it go to `gnuq study verify`, e.g. -- --dataset truthfulqa)")
    ve.add_argument("--all", action="store_true", help="every stored item, not the build's sample (resumable; "
                                                       "writes <file>.verified.json)")
    ve.add_argument("rest", nargs="*", help="further arguments for the chapter runner or the QA study (after --)")
    si = sub.add_parser("simulate", help="run a command as on another CPU (JAX, torch and BLAS kernels)")
    si.add_argument("name", choices=sorted(SIMULATIONS), help="the CPU to simulate")
    si.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args, extra = parser.parse_known_args(argv)
    if extra and args.cmd != "verify":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.rest = [*getattr(args, "rest", []), *extra]
    return run_command(lambda: {"status": _status, "verify": _verify, "simulate": _simulate}[args.cmd](args),
                       bad_input=(KeyError,), message=lambda err: str(err).strip(chr(34)),
                       interrupted="interrupted: every item verified so far is logged; rerun the same command to go on")


if __name__ == "__main__":
    sys.exit(main())
