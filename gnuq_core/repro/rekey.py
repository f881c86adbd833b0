"""Re-key results-store files after a pure move of the code that computed them.

A stored file is keyed by a hash of its code's sources (`results_store.code_version`), so
moving a module, or editing only its imports and docstrings, orphans hours of stored
results. This command carries a file across such a change, and only such a change:

1. the file's stored code hash must equal the hash of the *old* sources at a given git
   commit (so we know exactly which code made it);
2. each old source must define the same code as its new counterpart: equal syntax trees
   once import statements and docstrings are removed (the check is per module pair);
3. then the header's ``_code`` and ``config_key`` are rewritten and the file renamed to
   its new key. Records are never touched.

Afterwards, run the store's from-scratch check (a build with ``store_verify`` > 0) to
show that the stored numbers still reproduce with the moved code.

::

    python -m gnuq_core.repro.rekey results/nuts_reference --commit d3f6c5b \\
        --old gnuq_core/mcmc.py gnuq_core/bnn.py gnuq_core/synthetic.py \\
        --new gnuq_core.bayes.mcmc gnuq_core.bayes.bnn gnuq_core.bayes.synthetic
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from gnuq_core.repro.cache import config_key
from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.results_store import code_version, module_file

__all__ = ["RekeyRefused", "defined_code", "rekey", "main"]


class RekeyRefused(ValueError):
    """The file cannot be carried across: its code changed, or it was not made by the old code."""


def defined_code(source: str) -> str:
    """A module's syntax tree with imports and docstrings removed: what it *computes*."""
    tree = ast.parse(source)

    def strip(body: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for i, node in enumerate(body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                continue  # docstring
            for field in ("body", "orelse", "finalbody"):
                if isinstance(getattr(node, field, None), list):
                    setattr(node, field, strip(getattr(node, field)) or [ast.Pass()])
            out.append(node)
        return out

    tree.body = strip(tree.body)
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def _git_show(commit: str, path: str, repo: Path) -> bytes:
    try:
        return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo, check=True,
                              capture_output=True).stdout
    except subprocess.CalledProcessError as e:
        raise RekeyRefused(f"cannot read {path} at commit {commit}: {e.stderr.decode().strip()}") from None


def _old_hash(sources: dict[str, bytes]) -> str:
    """The hash the store used before module names: files in sorted path order."""
    h = hashlib.sha256()
    for path in sorted(sources):
        h.update(sources[path])
    return h.hexdigest()[:12]


def rekey(folder: Path, commit: str, old: Sequence[str], new: Sequence[str], *, dry_run: bool = False,
          repo: Path = REPO_ROOT) -> list[Path]:
    """Carry every file in ``folder`` made by ``old`` (at ``commit``) over to ``new``.

    Returns the new paths. Raises :class:`RekeyRefused` when a module pair defines different
    code; files made by other code are left alone (reported on stderr).
    """
    if len(old) != len(new):
        raise RekeyRefused(f"--old lists {len(old)} files and --new {len(new)} modules: give them in pairs")
    sources = {path: _git_show(commit, path, repo) for path in old}
    for path, module in zip(old, new):
        if defined_code(sources[path].decode()) != defined_code(module_file(module).read_text()):
            raise RekeyRefused(f"{path} (at {commit}) and {module} define different code: this is not a pure "
                               "move, so the stored results must be recomputed")
    old_code, new_code = _old_hash(sources), code_version(new)
    moved = []
    for path in sorted(folder.glob("*.jsonl")):
        lines = path.read_text().split("\n")
        header = json.loads(lines[0])
        if header["config"].get("_code") != old_code:
            print(f"rekey: {path.name}: made by other code ({header['config'].get('_code')}), left alone",
                  file=sys.stderr)
            continue
        config = {**header["config"], "_code": new_code}
        header = {**header, "config": config, "config_key": config_key(config)}
        target = path.with_name(f"{header['config_key']}.jsonl")
        moved.append(target)
        print(f"rekey: {path.name} -> {target.name} (code {old_code} -> {new_code})")
        if not dry_run:
            target.write_text("\n".join([json.dumps(header)] + lines[1:]))
            if target != path:
                path.unlink()
    return moved


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gnuq_core.repro.rekey", description=__doc__.split("\n")[0])
    p.add_argument("folder", type=Path, help="a results-store folder, e.g. results/nuts_reference")
    p.add_argument("--commit", required=True, help="git commit whose sources made the stored files")
    p.add_argument("--old", nargs="+", required=True, help="source paths at that commit (the old code list)")
    p.add_argument("--new", nargs="+", required=True, help="dotted module names now computing the same numbers")
    p.add_argument("--dry-run", action="store_true", help="check and report, change nothing")
    args = p.parse_args(argv)
    if not args.folder.is_dir():
        print(f"rekey: {args.folder}: no such folder", file=sys.stderr)
        return 2
    try:
        rekey(args.folder, args.commit, args.old, args.new, dry_run=args.dry_run)
    except RekeyRefused as e:
        print(f"rekey: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
