"""Verify every stored item of a file, not a sample (``gnuq store verify --all``).

A chaotic kind whose check elsewhere recomputes from the stored outputs (the QA records, the
spectra of a stored θ*) recomputes *every* item's exact part that way and the build's sample
whole; any other kind every item whole, or the sample it declares (``Kind.full_sample``:
NUTS, hours to rerun all). Resumable and shardable (``torchrun``): each verified
item is a line of ``<key>.verify.jsonl`` stamped with the platform that checked it, so a
verification longer than a session goes on in the next (commit the log), on whatever CPU that
one has; when all agreed, ``<key>.verified.json`` reports what was compared, on which platforms,
and the largest deviation, and the log goes. The first item that disagrees stops it with
`~gnuq_core.store.store.ResultsDisagree` naming the item.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any, Sequence

from gnuq_core.repro.files import write_atomic
from gnuq_core.repro.shards import World, read_merged, writer
from gnuq_core.store import kinds as registry
from gnuq_core.store.contracts import Chaotic
from gnuq_core.store.store import Check, Recipe, ResultsDisagree, Sample, Store, check_item, disagreement, relative

__all__ = ["verify_file", "report_path"]


def report_path(path: Path) -> Path:
    """The report of a full verification of the store file ``path``."""
    return path.with_name(f"{path.stem}.verified.json")


def _plan(spec: registry.Kind, ids: Sequence[str], recipe: Recipe, sample: Sample,
          stored: dict[str, dict[str, Any]]) -> dict[str, str]:
    """``{item: "whole" | "exact part"}`` (see the module docstring)."""
    contract = spec.contract
    by_inputs = (recipe.from_outputs is not None and isinstance(contract, Chaotic) and contract.foreign.needs_inputs)
    if not by_inputs:
        drawn = ids if spec.full_sample is None else Sample(spec.full_sample, seed=1).draw(ids, stored)
        return {i: "whole" for i in drawn}
    whole = set(sample.draw(ids, stored))
    return {i: "whole" if i in whole else "exact part" for i in ids}


def verify_file(store: Store, spec: registry.Kind, path: Path, stored: dict[str, dict[str, Any]], ids: Sequence[str],
                recipe: Recipe, sample: Sample, world: World, progress: str | None = None) -> list[Check]:
    """Check every item of ``ids`` stored in ``path`` (this rank's share); the checks made now.

    Resumes from the log of an earlier, interrupted verification of this version (on any
    platform: each line names its own); writes the report when all items are verified (rank 0)."""
    plan = _plan(spec, ids, recipe, sample, stored)
    platform = store.fingerprint_id
    log = path.with_name(f"{path.stem}.verify.jsonl")
    config = {"_kind": spec.name, "_version": spec.version, "file": path.name}
    if world.rank == 0 and log.exists() and read_merged(log)[0].get("_version") != spec.version:
        log.unlink()  # an interrupted verification of an earlier version checks nothing now
    checks: list[Check] = []
    with writer(log, config, world, list(plan)) as out:
        mine = world.mine(list(plan))
        todo = [i for i in mine if i not in out.done]
        if todo and progress:
            from tqdm.auto import tqdm

            rank = f" [rank {world.rank}/{world.size}]" if world.sharded else ""
            todo = tqdm(todo, desc=f"verify {progress}{rank}", total=len(mine), initial=len(mine) - len(todo))
        for item in todo:
            check = check_item(spec, path, item, stored, platform, recipe, exact_part=plan[item] == "exact part")
            if not check.passed:
                raise ResultsDisagree(disagreement(check, spec))
            checks.append(check)
            out.append(item, {"how": plan[item], "platform": platform, "largest": check.largest,
                              "where": check.worst.path if check.worst else "", "rule": check.rule,
                              "seconds": round(check.seconds, 3)})
    if world.rank == 0:
        _report(spec, path, log, plan, len(stored))
    return checks


def _report(spec: registry.Kind, path: Path, log: Path, plan: dict[str, str], stored: int) -> None:
    """Write ``<key>.verified.json`` once the log holds every planned item, then remove the log; merged with
    an earlier call's report of this version (``verified``: every item verified, and how; ``platforms``: which
    items each platform checked)."""
    _, done = read_merged(log)
    if {str(r["id"]) for r in done} < set(plan):
        return
    earlier = json.loads(report_path(path).read_text(encoding="utf-8")) if report_path(path).exists() else {}
    if (earlier.get("version"), "verified" in earlier) != (spec.version, True):
        earlier = {"verified": {}, "platforms": {}, "largest_deviation": -1.0, "rules": [], "seconds": 0.0}
    verified = {**earlier["verified"], **plan}
    platform_of = {i: fp for fp, items in earlier["platforms"].items() for i in items}
    platform_of.update({str(r["id"]): r["platform"] for r in done})
    platforms = {fp: sorted(i for i in verified if platform_of[i] == fp) for fp in sorted(set(platform_of.values()))}
    top = max(done, key=lambda r: r["largest"], default={"largest": 0.0, "where": "", "id": ""})
    if earlier["largest_deviation"] > top["largest"]:
        top = {"largest": earlier["largest_deviation"], "where": earlier["largest_where"], "id": ""}
    report = {"kind": spec.name, "version": spec.version, "file": path.name,
              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "items": len(verified),
              "of": stored, "whole": sum(h == "whole" for h in verified.values()),
              "exact_part": sum(h == "exact part" for h in verified.values()),
              "largest_deviation": top["largest"], "largest_where": f"{top['id']} {top['where']}".strip(),
              "rules": sorted({*earlier["rules"], *(r["rule"] for r in done)}),
              "seconds": round(earlier["seconds"] + sum(r["seconds"] for r in done), 1), "verified": verified,
              "platforms": {fp: items for fp, items in platforms.items() if items}}
    write_atomic(report_path(path), json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    log.unlink(missing_ok=True)


def describe_report(path: Path) -> str:
    """One line on the last full verification of ``path``, or on the one under way ("" if none)."""
    report, log = report_path(path), path.with_name(f"{path.stem}.verify.jsonl")
    if log.exists():
        return f"a full verification under way: {len(read_merged(log)[1])} items checked (rerun it to go on)"
    if not report.exists():
        return ""
    try:
        r = json.loads(report.read_text(encoding="utf-8"))
        platforms = r["platforms"]
        where = ", ".join(f"{fp} ({len(items)})" if len(platforms) > 1 else fp for fp, items in platforms.items())
        return (f"verified {r['date'][:10]} on {where}: {r['items']} of {r.get('of', r['items'])} items "
                f"({r['exact_part']} by their exact part), largest deviation {r['largest_deviation']:.2g}")
    except (ValueError, KeyError, TypeError):
        return f"{relative(report)} is unreadable"
