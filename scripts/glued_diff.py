"""Compare every glued value of two executed books, chapter by chapter.

A refactor must not change what the book says. This script reads the values each chapter
glued (``myst_nb.glue``) in two folders of executed notebooks (``book/_generated`` of two
builds) and lists every key that was added, removed or changed. Numbers are compared
after parsing, within ``--rtol`` (default 0: exactly); figures are compared by their
repr only (their pixels are not compared). Keys matching ``--ignore`` (regular
expressions, e.g. wall times) are reported separately and do not count as changes.

::

    python scripts/glued_diff.py /tmp/before/book/_generated book/_generated \\
        --ignore 'seconds|wall|_time|elapsed'

Exit code 0 when nothing changed, 1 when something did, 2 on bad input.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from gnuq_core.repro.glued import glued_text

__all__ = ["diff_values", "diff_books", "main"]


def _number(text: str) -> float | None:
    try:
        return float(text.strip().removeprefix("np.float64(").removesuffix(")"))
    except ValueError:
        return None


def diff_values(before: dict[str, str], after: dict[str, str], rtol: float = 0.0) -> dict[str, list[str]]:
    """``{"added": [...], "removed": [...], "changed": ["key: before -> after", ...]}``."""
    changed = []
    for key in sorted(set(before) & set(after)):
        a, b = before[key], after[key]
        if a == b:
            continue
        x, y = _number(a), _number(b)
        if x is not None and y is not None and (math.isclose(x, y, rel_tol=rtol) or (math.isnan(x) and math.isnan(y))):
            continue
        changed.append(f"{key}: {a[:80]} -> {b[:80]}")
    return {"added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
            "changed": changed}


def diff_books(before: Path, after: Path, rtol: float = 0.0, ignore: str | None = None
               ) -> dict[str, dict[str, list[str]]]:
    """Per chapter (notebook stem) present in either folder: `diff_values` of its glued values."""
    pattern = re.compile(ignore) if ignore else None
    stems = sorted({p.stem for p in before.glob("*.ipynb")} | {p.stem for p in after.glob("*.ipynb")})
    out = {}
    for stem in stems:
        a = glued_text(before / f"{stem}.ipynb") if (before / f"{stem}.ipynb").exists() else {}
        b = glued_text(after / f"{stem}.ipynb") if (after / f"{stem}.ipynb").exists() else {}
        d = diff_values(a, b, rtol)
        if pattern:
            d["ignored"] = [c for c in d["changed"] if pattern.search(c.split(":")[0])]
            d["changed"] = [c for c in d["changed"] if not pattern.search(c.split(":")[0])]
        d["n_keys"] = [str(len(set(a) | set(b)))]
        out[stem] = d
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("before", type=Path, help="folder of executed chapter notebooks (the old build)")
    p.add_argument("after", type=Path, help="folder of executed chapter notebooks (the new build)")
    p.add_argument("--rtol", type=float, default=0.0, help="relative tolerance for numbers (default: exact)")
    p.add_argument("--ignore", help="regular expression of keys whose changes are expected (wall times)")
    args = p.parse_args(argv)
    for folder in (args.before, args.after):
        if not folder.is_dir() or not any(folder.glob("*.ipynb")):
            print(f"glued_diff: {folder}: no executed notebooks (*.ipynb) there", file=sys.stderr)
            return 2
    result = diff_books(args.before, args.after, args.rtol, args.ignore)
    any_change = False
    for stem, d in result.items():
        n_changed = len(d["changed"]) + len(d["added"]) + len(d["removed"])
        any_change |= n_changed > 0
        print(f"{stem}: {d['n_keys'][0]} keys, {len(d['changed'])} changed, {len(d['added'])} added, "
              f"{len(d['removed'])} removed, {len(d.get('ignored', []))} ignored")
        for kind in ("changed", "added", "removed", "ignored"):
            for line in d.get(kind, []):
                print(f"  {kind}: {line}")
    return 1 if any_change else 0


if __name__ == "__main__":
    sys.exit(main())
