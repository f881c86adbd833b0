"""Checks of stored items: one item under its kind's contract (:func:`check_item`), a build's
:class:`Sample`, or every item of a file (:func:`verify_file`, ``gnuq store verify --all``).

A full verification of a chaotic kind whose check elsewhere recomputes from the stored outputs
(QA records, the spectra of a stored θ*) recomputes every item's exact part and the build's
sample whole; of any other kind every item whole, or the sample it declares (``Kind.full_sample``).
It is resumable and shardable (``torchrun``): each item checked is a line of ``<key>.verify.jsonl``
naming its platform, so it goes on in a later session on any CPU (commit the log); when all agreed,
``<key>.verified.json`` reports what was compared, where, and the largest deviation. The first
item that disagrees stops it with :class:`ResultsDisagree` naming the item.
"""

from __future__ import annotations

import datetime as _dt
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from tqdm.auto import tqdm

from gnuq_core.repro.files import write_atomic
from gnuq_core.repro.keys import plain, without
from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.shards import World, read_merged, writer
from gnuq_core.repro.threads import blas_thread_variants
from gnuq_core.store import kinds as registry
from gnuq_core.store.contracts import Chaotic, Context, Deviation, worst

__all__ = ["ResultsDisagree", "Recipe", "Sample", "Check", "check_item", "disagreement", "verify_file",
           "report_path", "describe_report", "relative"]

Compute = Callable[[str], dict[str, Any]]
FromOutputs = Callable[[str, dict[str, Any], Mapping[str, dict[str, Any]]], dict[str, Any]]
"""``(id, stored record, every stored record by id) -> record``: the part of an item that is exact
given stored chaotic outputs (its own, or another item's such as a stored trained network)."""


class ResultsDisagree(AssertionError):
    """A recomputed item differs from its stored result by more than its kind's contract allows."""


@dataclass(frozen=True)
class Recipe:
    """How one call's items are made: ``compute`` (``id -> record``, JSON-able) a missing one;
    ``fresh`` one from scratch for the check (default ``compute``); ``from_outputs`` (`FromOutputs`)
    the fields that are exact given the stored chaotic outputs (a `GivenInputs` contract
    elsewhere); ``variants`` (``(id, stored record) -> records``) under the settings it may have
    been made with (thread counts): on the platform that made it the check passes if one agrees."""

    compute: Compute
    fresh: Compute | None = None
    from_outputs: FromOutputs | None = None
    variants: Callable[[str, dict[str, Any]], Iterable[dict[str, Any]]] | None = None


@dataclass(frozen=True)
class Sample:
    """Which stored items a build recomputes from scratch.

    The items of ``always`` (what the page quotes, when a random draw could miss it), then ``n``
    more drawn with ``seed`` among ``pool`` (default: every id asked for) and among the stored
    records ``among`` accepts; ``words`` states that rule on the page when it is not "at random
    among all".
    """

    n: int = 0
    pool: Sequence[str] | None = None
    among: Callable[[dict[str, Any]], bool] | None = None
    seed: int = 0
    words: str = ""
    always: Sequence[str] = ()

    def draw(self, ids: Sequence[str], stored: Mapping[str, dict[str, Any]]) -> list[str]:
        """The stored items this sample checks, among ``ids``: ``always`` first, then the draw."""
        first = [i for i in self.always if i in stored]
        pool = [i for i in (self.pool if self.pool is not None else ids)
                if i in stored and i not in first and (self.among is None or self.among(stored[i]))]
        return first + random.Random(self.seed).sample(pool, min(self.n, len(pool)))


@dataclass
class Check:
    """One stored item recomputed and compared under its kind's contract."""

    kind: str
    file: str
    item: str
    contract: str
    rule: str
    made_on: str | None
    checked_on: str
    same_platform: bool
    compared: int
    worst: Deviation | None
    passed: bool
    seconds: float

    @property
    def largest(self) -> float:
        """The largest deviation in the contract's units (0 when nothing differed)."""
        return 0.0 if self.worst is None else float(self.worst.units)


def relative(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (what messages name)."""
    return str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)


def check_item(spec: registry.Kind, path: Path, item: str, stored_records: Mapping[str, dict[str, Any]],
               platform: str, recipe: Recipe, *, exact_part: bool = False) -> Check:
    """Recompute one stored item and compare it under its kind's contract (no exception: see ``passed``).

    ``stored_records`` are every stored record of ``path`` by id (the seed-spread rule uses them
    all), ``platform`` this process's fingerprint id. With ``exact_part`` only the part that is
    exact given the stored outputs is recomputed (``recipe.from_outputs``) and compared under the
    kind's foreign `GivenInputs` rule whatever the platform (`gnuq_core.store.verify`).
    """
    t0 = time.perf_counter()
    stored_full = stored_records[item]
    made_on = (stored_full.get("_made") or {}).get("fp")
    same = made_on == platform
    drop = ("type", "id", "_made", *spec.ignore)
    view = spec.view or (lambda record: record)
    stored = view(without(stored_full, drop))
    context = Context(stored_records=[view(without(r, drop)) for r in stored_records.values()])
    contract = spec.contract
    use_inputs = exact_part or contract.needs_inputs(same)
    if use_inputs:
        if recipe.from_outputs is None:
            raise ValueError(f"{spec.name}: checking item {item} from its stored outputs needs Recipe.from_outputs")
        attempts: Iterable[dict[str, Any]] = iter([recipe.from_outputs(item, stored_full, stored_records)])
    elif same and recipe.variants is not None:
        attempts = recipe.variants(item, stored_full)
    elif same:
        attempts = blas_thread_variants(recipe.fresh or recipe.compute, item, stored_full)
    else:
        attempts = iter([(recipe.fresh or recipe.compute)(item)])
    found: list[Deviation] | None = None
    for fresh in attempts:  # lazily: the first variant that agrees ends the check
        fresh_plain = view(without(plain(fresh), spec.ignore))
        if use_inputs and isinstance(contract, Chaotic):
            devs = contract.foreign.compare(stored, fresh_plain, context)
        else:
            devs = contract.compare(stored, fresh_plain, same and not use_inputs, context)
        top_units = max((d.units for d in devs), default=0.0)
        if found is None or top_units <= 1:
            found = devs
        if top_units <= 1:
            break
    devs = found or []
    top = worst(devs)
    rule = contract.foreign.rule() if use_inputs and isinstance(contract, Chaotic) else contract.rule(same)
    return Check(spec.name, relative(path), item, contract.name, rule, made_on, platform, same, len(devs), top,
                 top is None or top.units <= 1, time.perf_counter() - t0)


def disagreement(check: Check, spec: registry.Kind) -> str:
    """The one-line message of a failed check: the file, the item, the field, both values, what to do."""
    where = "the platform that made it" if check.same_platform else (
        f"another platform than the one that made it ({check.made_on or 'not recorded'})")
    worst_text = check.worst.text() if check.worst else "nothing compared"
    return (f"{check.file}: item {check.item} recomputed differently on {where}, breaking the {check.contract} "
            f"contract ({check.rule}); largest deviation: {worst_text}. If the code changed what {spec.name} stores, "
            f"bump its version in gnuq_core/store/kinds.py and recompute; if nothing changed, the stored item was "
            f"altered (`git diff {check.file}`) or this platform computes differently (`gnuq store verify "
            f"{spec.name} --all` checks every item; report it with `gnuq store status`).")



def report_path(path: Path) -> Path:
    """The report of a full verification of the store file ``path``."""
    return path.with_name(f"{path.stem}.verified.json")


def _plan(spec: registry.Kind, ids: Sequence[str], recipe: Recipe, sample: Sample,
          stored: dict[str, dict[str, Any]]) -> dict[str, str]:
    """``{item: "whole" | "exact part"}`` (see the module docstring)."""
    if recipe.from_outputs is None or not isinstance(spec.contract, Chaotic) or not spec.contract.foreign.needs_inputs:
        return dict.fromkeys(ids if spec.full_sample is None else Sample(spec.full_sample, seed=1).draw(ids, stored),
                             "whole")
    whole = set(sample.draw(ids, stored))
    return {i: "whole" if i in whole else "exact part" for i in ids}


def verify_file(platform: str, spec: registry.Kind, path: Path, stored: dict[str, dict[str, Any]], ids: Sequence[str],
                recipe: Recipe, sample: Sample, world: World, progress: str | None = None) -> list[Check]:
    """Check every item of ``ids`` stored in ``path`` (this rank's share) on ``platform`` (this
    process's fingerprint id); the checks made now.

    Resumes from the log of an earlier, interrupted verification of this version (on any
    platform: each line names its own); writes the report when all items are verified (rank 0)."""
    plan = _plan(spec, ids, recipe, sample, stored)
    log = path.with_name(f"{path.stem}.verify.jsonl")
    config = {"_kind": spec.name, "_version": spec.version, "file": path.name}
    if world.rank == 0 and log.exists() and read_merged(log)[0].get("_version") != spec.version:
        log.unlink()  # an interrupted verification of an earlier version checks nothing now
    checks: list[Check] = []
    with writer(log, config, world, list(plan)) as out:
        mine = world.mine(list(plan))
        todo = [i for i in mine if i not in out.done]
        if todo and progress:
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
