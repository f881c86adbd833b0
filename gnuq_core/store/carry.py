"""Carry stored results across a verified code change.

When the code of a kind changes, its code version changes (`gnuq_core.store.codeversion`)
and its stored files are *orphaned*: a build looks for a new file and finds none. A carry
moves an orphaned file to the new code version only after the new code has reproduced it:

- an *exact* kind: every item is recomputed and must agree under its contract;
- a chaotic kind with ``carry_all_exact`` (the QA records): every item's exact part is
  recomputed from its stored outputs (the gradient pass and log-probabilities of the
  stored answers, teacher-forced), and ``carry_sample`` items are recomputed whole;
- any other chaotic kind: ``carry_sample`` items, drawn with a fixed seed, recomputed whole
  under the contract (to the stored digits on the platform that made them).

A carry may be confined to one of the kind's ``carry_parts`` (``part=``; the QA records'
``"gradient"``, for a change to the gradient engine): then every item's part is recomputed
and compared, ``carry_part_sample`` other items (fixed seed) their whole exact part, so that
a change reaching beyond the part is caught, and ``carry_sample`` items whole, as always.

Verification is resumable and may be sharded (``torchrun``): each verified item is one
line of ``<new key>.carry.jsonl`` (and its rank shards). When every planned item agreed,
the records are written unchanged (each keeps the ``_made`` stamp of the code and platform
that made it) under the new key, a report ``<new key>.carried.json`` records what was
verified, and the orphan is removed. If one item disagrees, nothing is carried.

A carry runs where the items are used, with ``GNUQ_STORE_CARRY=1``: ``python -m
gnuq_core.store carry 03`` builds chapter 03 that way; the QA campaign's command does the
same for the QA records (README, "The results store").
"""

from __future__ import annotations

import datetime as _dt
import json
import random
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from gnuq_core.repro.files import write_atomic
from gnuq_core.repro.records import RecordFile
from gnuq_core.repro.shards import World, read_merged, shard_paths, writer
from gnuq_core.store import kinds as registry
from gnuq_core.store.contracts import Chaotic, Exact, GivenInputs
from gnuq_core.store.store import check_item, disagreement

__all__ = ["CarryRefused", "carry_plan", "carry_file"]


class CarryRefused(AssertionError):
    """The new code did not reproduce an item of the orphaned file: nothing was carried."""


def carry_plan(spec: registry.Kind, ids: list[str], pool: list[str] | None = None,
               part: str | None = None) -> dict[str, str]:
    """``{item: "full" | "exact" | part}``: which items a carry recomputes, and how (see the
    module docstring).

    The whole recomputations of a chaotic kind are drawn (fixed seed) among ``pool``
    (default all ``ids``): the items a build's check may afford. With ``part`` (one of the
    kind's ``carry_parts``) every other item gets that part, but ``carry_part_sample`` of
    them (fixed seed) their whole exact part."""
    contract = spec.contract
    given = spec.carry_all_exact and isinstance(contract, Chaotic) and isinstance(contract.foreign, GivenInputs)
    if part is not None and (part not in spec.carry_parts or not given):
        raise ValueError(f"a carry of {spec.name} cannot be confined to {part!r}: its parts are "
                         f"{', '.join(spec.carry_parts) or 'none'}")
    full_all = isinstance(contract, Exact) or spec.carry_sample is None
    among = [i for i in ids if pool is None or i in set(pool)]
    full = set(ids) if full_all else set(random.Random(0).sample(among, min(spec.carry_sample or 0, len(among))))
    rest = [i for i in ids if i not in full]
    whole = set(rest) if part is None else set(random.Random(1).sample(rest, min(spec.carry_part_sample, len(rest))))
    plan = {}
    for i in ids:
        if i in full:
            plan[i] = "full"
        elif given:
            plan[i] = "exact" if i in whole else str(part)
    return plan


def carry_file(store: Any, spec: registry.Kind, orphan: Path, target: Path, config: Mapping[str, Any], code: str, *,
               compute: Callable[[str], dict[str, Any]],
               from_outputs: Callable[..., dict[str, Any]] | None = None,
               recompute_variants: Callable[..., Iterable[dict[str, Any]]] | None = None,
               world: World | None = None, pool: list[str] | None = None,
               verify_among: Callable[[dict[str, Any]], bool] | None = None, known: list[str] | None = None,
               progress: bool = True, part: str | None = None) -> dict[str, Any]:
    """Verify ``orphan``'s records with the current code and write them to ``target``; the report.

    ``known`` are the ids the caller can compute (default: all of the file's): a chaotic
    kind's sample is drawn among them (and ``pool``, filtered by ``verify_among``); an exact
    kind, whose every item must be verified, is refused if the file holds others. ``part``
    confines the carry to one of the kind's ``carry_parts`` (`carry_plan`).

    Raises
    ------
    CarryRefused
        An item disagreed (the verification log is kept; the orphan is untouched).
    """
    world = world or World()
    old_config, records = read_merged(orphan)
    old_code = old_config.get("_code")
    by_id = {str(r["id"]): r for r in records}
    order = list(by_id)
    computable = set(order if known is None else known)
    unknown = [i for i in order if i not in computable]
    affordable = [i for i in (pool if pool is not None else order)
                  if i in by_id and i in computable and (verify_among is None or verify_among(by_id[i]))]
    plan = carry_plan(spec, [i for i in order if i in computable], affordable, part=part)
    if unknown and (isinstance(spec.contract, Exact) or spec.carry_sample is None or spec.carry_all_exact):
        raise CarryRefused(f"carrying {orphan.name}: it holds {len(unknown)} items this run does not compute (e.g. "
                           f"{unknown[0]}), and every item of {spec.name} must be verified: carry it from the run "
                           "that asks for all of them")
    if any(mode != "full" for mode in plan.values()) and from_outputs is None:
        raise ValueError(f"carrying {spec.name} needs from_outputs (the recomputation from stored outputs)")
    log = target.with_name(f"{target.stem}.carry.jsonl")
    log_config = {"from": orphan.name, "from_code": old_code, "to_code": code, **({"part": part} if part else {})}
    fid = store.fingerprint_id
    planned = [i for i in order if i in plan]
    if log.exists():
        earlier_config, earlier = read_merged(log)
        if any(not r.get("passed") for r in earlier) or earlier_config.get("part") != part:
            for p in [log, *shard_paths(log)]:  # a refused carry, or one of another part, starts over
                p.unlink(missing_ok=True)
    with writer(log, log_config, world, planned) as out:
        todo = [i for i in world.mine(planned) if i not in out.done]
        if progress and todo:
            from tqdm.auto import tqdm

            todo = tqdm(todo, desc=f"verifying {spec.name} for the carry", total=len(world.mine(planned)),
                        initial=len(world.mine(planned)) - len(todo))
        for item in todo:
            mode = plan[item]
            check = check_item(spec, orphan, item, by_id, fid, compute=compute, recompute_variants=recompute_variants,
                               from_outputs=from_outputs, exact_part=mode == "exact",
                               part=None if mode in ("full", "exact") else mode)
            out.append(item, {"mode": mode, "passed": check.passed, "largest": check.largest,
                              "where": check.worst.path if check.worst else None, "compared": check.compared,
                              "same_platform": check.same_platform, "rule": check.rule})
            if not check.passed:
                raise CarryRefused(f"carrying {orphan.name} to code version {code} refused (verification log: "
                                   f"{log.name}): " + disagreement(check, spec))
    report: dict[str, Any] = {}
    if world.rank == 0:
        _, verified = read_merged(log)
        done = {str(v["id"]): v for v in verified}
        missing = [i for i in planned if i not in done]
        failed = [i for i in planned if i in done and not done[i]["passed"]]
        if missing or failed:
            raise CarryRefused(f"carrying {orphan.name}: {len(missing)} planned items not verified, {len(failed)} "
                               f"disagreed (see {log.name}); nothing was carried")
        new = RecordFile(target, {**config, "_code": code})
        try:
            for rid in order:
                if rid not in new.done:
                    new.append(rid, {k: v for k, v in by_id[rid].items() if k not in ("type", "id")})
        finally:
            new.close()
        top = max(verified, key=lambda v: v["largest"], default=None)
        report = {
            "kind": spec.name, "from": orphan.name, "to": target.name, "from_code": old_code, "to_code": code,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "platform": fid,
            "items": len(order), "verified_full": sum(v["mode"] == "full" for v in verified),
            "verified_exact_part": sum(v["mode"] == "exact" for v in verified),
            **({"part": part, "verified_part_only": sum(v["mode"] == part for v in verified)} if part else {}),
            "largest_deviation": top["largest"] if top else 0.0,
            "largest_where": (f"{top['id']} {top['where']}" if top and top.get("where") else None),
            "rules": sorted({v["rule"] for v in verified}),
        }
        earlier = orphan.with_name(f"{orphan.stem}.carried.json")
        if earlier.exists():  # the orphan was itself carried: its report travels with the items
            previous = json.loads(earlier.read_text())
            report["earlier_carries"] = [*previous.pop("earlier_carries", []), previous]
        write_atomic(target.with_name(f"{target.stem}.carried.json"), json.dumps(report, indent=1) + "\n")
        for p in [orphan, *shard_paths(orphan), log, *shard_paths(log), earlier]:
            if p.exists():
                p.unlink()
    world.barrier()
    return report
