"""One interface to stored per-item results: :class:`Store`.

Chapters and the QA campaign ask a store for items::

    store = open_store(profile)            # the results store (paper edition) or the local cache
    records = store.items("nuts_reference", config, ids, compute, recompute=..., verify=2)

An item is one JSON line in ``<root>/<kind>/<key>.jsonl``; ``key`` hashes the
configuration and the kind's code version (`gnuq_core.store.codeversion`). A call

1. reads what is stored (the main file and any shards of a sharded run);
2. if items are missing and a file of the same configuration made by *other* code exists
   (an orphan), carries it across when asked to (``carry``: every item's exact part, or a
   declared sample, recomputed and compared under the kind's contract) or says so;
3. recomputes ``verify`` stored items from scratch and compares them under the kind's
   contract (`gnuq_core.store.contracts`): on the platform that made an item
   (`gnuq_core.store.fingerprint`) to the stored digits, elsewhere by the contract's
   statistical rule; a disagreement raises :class:`ResultsDisagree` naming the item;
4. computes what is missing and appends it (resumable: one fsynced line per item; with a
   `~gnuq_core.repro.shards.World` each rank fills its own shard), each record stamped
   with the code version and the fingerprint id that made it (``_made``).

What was read, computed and checked is kept in :attr:`Store.reads`; a chapter shows it
with :meth:`Store.describe` and :meth:`Store.check_rows`.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import random
import sys
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from gnuq_core.repro.paths import REPO_ROOT, cache_dir, env_path
from gnuq_core.repro.provenance import is_paper_edition, run_parameters
from gnuq_core.repro.records import read_records
from gnuq_core.repro.shards import World, read_merged, writer
from gnuq_core.store import kinds as registry
from gnuq_core.store.contracts import Chaotic, Context, Deviation, worst
from gnuq_core.store.fingerprint import fingerprint, fingerprint_id
from gnuq_core.store.fingerprint import describe as describe_fingerprint
from gnuq_core.store.keys import canonical, config_key

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["ResultsDisagree", "StoreIncomplete", "Check", "Read", "Store", "open_store", "check_item", "disagreement",
           "RESULTS", "rounded", "plain", "pool_words"]

RESULTS = REPO_ROOT / "results"
"""The repository's results store."""

FINGERPRINTS = "fingerprints.jsonl"
MISSING_POLICIES = ("compute", "warn", "error")

Compute = Callable[[str], dict[str, Any]]
FromOutputs = Callable[[str, dict[str, Any], Mapping[str, dict[str, Any]]], dict[str, Any]]
"""``(id, stored record, every stored record by id) -> record``: the part of an item that is exact
given stored chaotic outputs (its own, or another item's such as a stored trained network).
A kind with ``carry_parts`` also takes ``part=<name>``: then only that part's fields."""


class ResultsDisagree(AssertionError):
    """A recomputed item differs from its stored result by more than its kind's contract allows."""


class StoreIncomplete(RuntimeError):
    """The paper edition would have to compute stored items from scratch (``GNUQ_STORE_MISSING=error``)."""


def rounded(obj: Any, digits: int) -> Any:
    """``obj`` with every float rounded to ``digits`` significant digits and NaN/inf as ``None``
    (store files are strict JSON)."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}") if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    return obj


def plain(obj: Any) -> Any:
    """``obj`` as a store file holds it: numpy arrays and scalars as lists and Python numbers,
    NaN and inf as ``None``, tuples as lists, dict keys as strings (nothing rounded)."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, bytes, bool, int)) or obj is None:
        return obj
    tolist = getattr(obj, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return plain(tolist())
    return str(obj)


def _without(obj: Any, keys: Iterable[str]) -> Any:
    keys = set(keys)
    if isinstance(obj, dict):
        return {k: _without(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [_without(v, keys) for v in obj]
    return obj


def _relative(path: Path) -> str:
    with suppress(ValueError):
        return str(path.relative_to(REPO_ROOT))
    return str(path)


@dataclass
class Check:
    """One stored item recomputed from scratch and compared under its kind's contract."""

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


@dataclass
class Read:
    """What one :meth:`Store.items` call did: items read, computed, carried, checked."""

    kind: str
    file: str
    wanted: int
    stored: int
    computed: int
    checks: list[Check] = field(default_factory=list)
    carried_from: str | None = None
    orphan: str | None = None


class Store:
    """Per-item results under ``root``, checked under their kinds' contracts.

    Parameters
    ----------
    root : path
        Folder of ``<kind>/<key>.jsonl`` files and ``fingerprints.jsonl``.
    label : str
        What the store is, in words ("the results store", "the local cache").
    check : bool
        Run the from-scratch checks asked for with ``verify`` (the local cache holds only
        what this machine computed, so previews do not check it).
    missing : str
        When stored items are missing: ``"compute"`` them quietly (a cache), ``"warn"``
        loudly and compute them (the paper edition: an incomplete or orphaned store is not
        a normal event), or ``"error"`` (:class:`StoreIncomplete`; CI).
    carry : bool
        Carry an orphaned file (same configuration, other code version) across to this
        code after verifying it (`gnuq_core.store.carry`); otherwise report it.
    carry_part : str, optional
        Confine the carries of the kinds that have this part (``Kind.carry_parts``) to it;
        other kinds are carried as usual.
    """

    def __init__(self, root: str | Path, *, label: str, check: bool = True, missing: str = "compute",
                 carry: bool = False, carry_part: str | None = None) -> None:
        if missing not in MISSING_POLICIES:
            raise ValueError(f"missing must be one of {', '.join(MISSING_POLICIES)}, not {missing!r} "
                             "(GNUQ_STORE_MISSING)")
        self.root = Path(root)
        self.label = label
        self.check = check
        self.missing = missing
        self.carry = carry
        self.carry_part = carry_part
        self.reads: list[Read] = []
        self._fingerprint: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"Store({_relative(self.root)!r}, label={self.label!r})"

    # ------------------------------------------------------------------ identity

    @property
    def fingerprint(self) -> dict[str, Any]:
        """This process's platform (`gnuq_core.store.fingerprint.fingerprint`)."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint()
        return self._fingerprint

    @property
    def fingerprint_id(self) -> str:
        return fingerprint_id(self.fingerprint)

    def fingerprints(self) -> dict[str, dict[str, Any]]:
        """Every registered fingerprint of this store: ``{id: fingerprint}``."""
        path = self.root / FINGERPRINTS
        out: dict[str, dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                with suppress(ValueError):
                    entry = json.loads(line)
                    out[entry["id"]] = entry["fingerprint"]
        return out

    def register_fingerprint(self, fp: Mapping[str, Any] | None = None, note: str | None = None) -> str:
        """Add ``fp`` (default: this process's) to ``fingerprints.jsonl`` unless it is there; its id."""
        fp = dict(self.fingerprint if fp is None else fp)
        fid = fingerprint_id(fp)
        path = self.root / FINGERPRINTS
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a+", encoding="utf-8") as f:
            if fcntl is not None:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            f.seek(0)
            known = {json.loads(line).get("id") for line in f if line.strip()}
            if fid not in known:
                entry = {"id": fid, "fingerprint": fp,
                         "first_seen": _dt.date.today().isoformat(), **({"note": note} if note else {})}
                f.write(json.dumps(entry, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())
        return fid

    # ------------------------------------------------------------------ files

    def code(self, kind: str | registry.Kind) -> str:
        """The current code version of ``kind``."""
        return registry.get(kind).code

    def path(self, kind: str | registry.Kind, config: Mapping[str, Any], code: str | None = None) -> Path:
        """The file of ``config``'s items of ``kind`` computed by code version ``code`` (default: the current)."""
        spec = registry.get(kind)
        code = spec.code if code is None else code
        return self.root / spec.name / f"{config_key({**config, '_code': code})}.jsonl"

    def orphans(self, kind: str | registry.Kind, config: Mapping[str, Any], code: str | None = None) -> list[Path]:
        """Files of ``kind`` with this configuration but made by other code versions."""
        spec = registry.get(kind)
        code = spec.code if code is None else code
        want = canonical({k: v for k, v in config.items() if k != "_code"})
        out = []
        for p in sorted((self.root / spec.name).glob("*.jsonl")):
            if ".rank" in p.name or ".carry" in p.name:
                continue
            header, _ = _header(p)
            cfg = header.get("config", {}) if isinstance(header, dict) else {}
            if isinstance(cfg, dict) and cfg.get("_code") != code and \
                    canonical({k: v for k, v in cfg.items() if k != "_code"}) == want:
                out.append(p)
        return out

    # ------------------------------------------------------------------ the one entry point

    def items(self, kind: str | registry.Kind, config: Mapping[str, Any], ids: Sequence[str], compute: Compute, *,
              recompute: Compute | None = None,
              recompute_variants: Callable[[str, dict[str, Any]], Iterable[dict[str, Any]]] | None = None,
              from_outputs: FromOutputs | None = None,
              verify: int = 0, pool: Sequence[str] | None = None,
              verify_among: Callable[[dict[str, Any]], bool] | None = None, seed: int = 0,
              world: World | None = None, compute_missing: bool = True,
              progress: str | None = None) -> list[dict[str, Any]]:
        """The records of ``ids`` (in that order): stored ones read (a sample checked), missing ones computed.

        Parameters
        ----------
        kind : str
            A registered kind (`gnuq_core.store.kinds`).
        config : dict
            The run's configuration (with the code version, the file's key).
        ids : sequence of str
            The items wanted.
        compute : callable
            ``id -> record`` (JSON-able; may read a local cache).
        recompute : callable, optional
            ``id -> record`` from scratch, for the check (default ``compute``).
        recompute_variants : callable, optional
            ``(id, stored record) -> records`` under the settings the stored record may have been
            made with (thread counts); on the platform that made it the check passes if one agrees.
        from_outputs : callable, optional
            ``(id, stored record, stored records by id) -> record``: the fields that are exact
            given stored chaotic outputs (a kind whose contract is `GivenInputs` on another platform).
        verify : int
            Stored items recomputed from scratch and compared (drawn with ``seed``).
        pool, verify_among : optional
            Draw the check's items among ``pool`` (default ``ids``) and among the stored records
            ``verify_among`` accepts (e.g. those whose recorded cost fits a build's budget).
        world : World, optional
            This process's rank in a sharded run: it computes the missing ids at positions
            ≡ rank (mod size) into its own shard; rank 0 alone checks; all ranks return all records.
        compute_missing : bool
            ``False``: only read (and check) what is stored; nothing is computed or written.
        progress : str, optional
            Label of a progress bar while missing items are computed.
        """
        spec = registry.get(kind)
        world = world or World()
        code = spec.code
        path = self.path(spec, config, code)
        order = list(dict.fromkeys(str(i) for i in ids))
        existing = {str(r["id"]): r for r in read_merged(path)[1]}
        read = Read(spec.name, _relative(path), len(order), sum(i in existing for i in order), 0)
        self.reads.append(read)
        if any(i not in existing for i in order):
            orphans = self.orphans(spec, config, code)
            if orphans:
                read.orphan = _relative(orphans[0])
                if self.carry:
                    from gnuq_core.store.carry import carry_file  # here: carry imports this module

                    carry_file(self, spec, orphans[0], path, config, code, compute=recompute or compute,
                               from_outputs=from_outputs, recompute_variants=recompute_variants, world=world,
                               pool=[str(i) for i in pool] if pool is not None else None, verify_among=verify_among,
                               known=order, part=self.carry_part if self.carry_part in spec.carry_parts else None)
                    read.carried_from = read.orphan
                    existing = {str(r["id"]): r for r in read_merged(path)[1]}
                    read.stored = sum(i in existing for i in order)
        stored_before = dict(existing)
        if self.check and verify > 0 and world.rank == 0:
            candidates = [i for i in (pool if pool is not None else order) if str(i) in stored_before
                          and (verify_among is None or verify_among(stored_before[str(i)]))]
            for item in random.Random(seed).sample(candidates, min(verify, len(candidates))):
                read.checks.append(self._check(spec, path, item, stored_before, compute=recompute or compute,
                                               recompute_variants=recompute_variants, from_outputs=from_outputs))
        todo_all = [i for i in order if i not in existing]
        if todo_all and compute_missing:
            self._on_missing(spec, path, len(todo_all), len(order), read.orphan)
        if not compute_missing:
            return [self._public(existing[i]) for i in order if i in existing]
        mine = [i for i in world.mine(order) if i not in existing]
        if mine or world.sharded:
            meta = {"code": code, "fp": self.register_fingerprint()}
            with writer(path, {**config, "_code": code}, world, order) as out:
                todo = [i for i in mine if i not in out.done]
                if todo and progress:
                    from tqdm.auto import tqdm

                    label = f"{progress} [rank {world.rank}/{world.size}]" if world.sharded else progress
                    todo = tqdm(todo, desc=label, initial=len(world.mine(order)) - len(todo),
                                total=len(world.mine(order)))
                for item in todo:
                    record = plain(compute(item))
                    if spec.digits is not None:
                        record = rounded(record, spec.digits)
                    record["_made"] = meta
                    out.append(item, record)
                    existing[item] = {"type": "record", "id": item, **record}
                    read.computed += 1
            if world.sharded:
                existing.update({str(r["id"]): r for r in read_merged(path)[1] if str(r["id"]) not in existing})
        return [self._public(existing[i]) for i in order if not world.sharded or i in existing]

    @staticmethod
    def _public(record: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in record.items() if k not in ("type", "_made")}

    def _on_missing(self, spec: registry.Kind, path: Path, n: int, total: int, orphan: str | None) -> None:
        if self.missing == "compute":
            return
        why = (f"{orphan} holds this configuration's items made by other code: carry them across with "
               f"`gnuq store carry {spec.chapter}` (it verifies them), or delete that file to recompute"
               if orphan else "nothing stored yet for this configuration and code version: fill the store "
               "(`gnuq store status` shows what is there)")
        text = (f"{self.label}: {n} of {total} items of {spec.name} are missing from {_relative(path)} and would be "
                f"computed from scratch in this build; {why}")
        if self.missing == "error":
            raise StoreIncomplete(text + " (GNUQ_STORE_MISSING=error)")
        bar = "!" * 78
        print(f"{bar}\n{text}\n{bar}", file=sys.stderr)

    # ------------------------------------------------------------------ the from-scratch check

    def _check(self, spec: registry.Kind, path: Path, item: str, stored_records: Mapping[str, dict[str, Any]], *,
               compute: Compute, recompute_variants: Callable[..., Iterable[dict[str, Any]]] | None,
               from_outputs: FromOutputs | None) -> Check:
        """Recompute ``item`` and compare it under ``spec.contract``; :class:`ResultsDisagree` if it fails."""
        check = check_item(spec, path, item, stored_records, self.fingerprint_id, compute=compute,
                           recompute_variants=recompute_variants, from_outputs=from_outputs)
        if not check.passed:
            raise ResultsDisagree(disagreement(check, spec))
        return check

    # ------------------------------------------------------------------ what the page says

    def checks(self, kinds: Sequence[str] | None = None) -> list[Check]:
        """Every check run by this store (of ``kinds``, default all)."""
        return [c for r in self.reads if kinds is None or r.kind in kinds for c in r.checks]

    def check_rows(self, kinds: Sequence[str] | None = None) -> list[dict[str, str]]:
        """One row per check: kind, item, contract, made on, checked on, compared values, largest deviation."""
        rows = []
        for c in self.checks(kinds):
            rows.append({
                "kind": c.kind, "item": c.item, "contract": c.contract,
                "made on": c.made_on or "not recorded", "checked on": c.checked_on + (" (same)" if c.same_platform
                                                                                      else " (other)"),
                "values compared": f"{c.compared:,}",
                "largest deviation": f"{c.largest:.3g} of the allowed" + (f" ({c.worst.path})" if c.worst and
                                                                          c.largest > 0 else ""),
                "rule": c.rule,
            })
        return rows

    def describe(self, what: str, kinds: Sequence[str], extra: str = "") -> str:
        """Markdown (a paragraph, a bullet per check, the platforms): where ``what`` came from in
        this build and how it was checked (the page's statement of its stored results).
        ``extra`` ends the paragraph (how the check's items are drawn, say)."""
        reads = [r for r in self.reads if r.kind in kinds]
        folders = ", ".join(f"`{f}/`" for f in sorted({Path(r.file).parent.name for r in reads})) or ", ".join(kinds)
        stored = sum(r.stored for r in reads)
        computed = sum(r.computed for r in reads)
        if not self.check:
            return (f"{what} come from {self.label} ({folders}): {stored:,} items read back, {computed:,} computed in "
                    "this build. A preview does not check its cache against recomputation; the paper edition reads "
                    "the repository's results store and recomputes a random sample from scratch, under each kind's "
                    "reproducibility contract.")
        text = (f"{what} are read from {self.label} ({folders}; each file keyed by the run's configuration and the "
                f"code version of what computes it): {stored:,} items read")
        text += (f", and {computed:,} computed in this build because they were missing (an incomplete or orphaned "
                 "store)." if computed else ".")
        for r in reads:
            if r.carried_from:
                text += f" `{r.carried_from}` was carried across a verified code change to `{r.file}`."
        checks = self.checks(kinds)
        if not checks:
            return text + " No stored item was recomputed from scratch in this build: the store was not checked."
        text += (f" To check the store, {len(checks)} stored item{'s were' if len(checks) != 1 else ' was'} drawn at "
                 "random (with a fixed seed), recomputed from scratch and compared under its kind's reproducibility "
                 f"contract.{' ' + extra if extra else ''}\n\n")
        for c in checks:
            where = ("the platform that made it" if c.same_platform else
                     f"another platform than the one that made it (`{c.made_on or 'not recorded'}`)")
            top = f" (at `{c.worst.path}`)" if c.worst is not None and c.largest > 0 else ""
            text += (f"- **{c.kind}** `{c.item}`, checked on {where}, {c.contract} contract: {c.rule}. Largest "
                     f"deviation {c.largest:.2g} of what the contract allows{top}, over {c.compared:,} compared "
                     "values.\n")
        fids = sorted({c.checked_on for c in checks} | {c.made_on for c in checks if c.made_on})
        prints = self.fingerprints() | {self.fingerprint_id: self.fingerprint}
        text += "\nPlatforms: " + "; ".join(
            f"`{fid}`{' (this build)' if fid == self.fingerprint_id else ''} = "
            f"{describe_fingerprint(prints[fid]) if fid in prints else 'not registered'}" for fid in fids) + "."
        return text


def pool_words(costs: Sequence[float], max_seconds: float, noun: str, verb: str) -> str:
    """The sentence saying that a check draws only among the stored items it can afford
    (``verify_among``): ``costs`` are the items' recorded seconds."""
    if not costs:
        return ""
    n = sum(c <= max_seconds for c in costs)
    return (f"The {noun} recomputed are drawn among the {n} of these {len(costs)} that took at most "
            f"{max_seconds:g} s to {verb} when they were stored (the longest took {max(costs) / 60:.0f} minutes, "
            "longer than this whole build may take).")


def check_item(spec: registry.Kind, path: Path, item: str, stored_records: Mapping[str, dict[str, Any]],
               platform: str, *, compute: Compute,
               recompute_variants: Callable[..., Iterable[dict[str, Any]]] | None = None,
               from_outputs: FromOutputs | None = None,
               exact_part: bool = False, part: str | None = None) -> Check:
    """Recompute one stored item and compare it under its kind's contract (no exception: see ``passed``).

    Parameters
    ----------
    spec, path, item
        The kind, its file and the item's id.
    stored_records : mapping
        Every stored record of the file, by id (the seed-spread rule uses them all).
    platform : str
        The fingerprint id of this process.
    compute, recompute_variants, from_outputs
        As in :meth:`Store.items`.
    exact_part : bool
        Recompute only the part that is exact given the stored outputs (``from_outputs``),
        compared under the kind's foreign `GivenInputs` rule, whatever the platform (a
        verified carry of every item).
    part : str, optional
        One of the kind's ``carry_parts``: recompute only that part of the exact part
        (``from_outputs(..., part=part)``) and compare only the fields it returns (a carry
        across a change confined to that part; `gnuq_core.store.carry`).
    """
    t0 = time.perf_counter()
    stored_full = stored_records[item]
    made_on = (stored_full.get("_made") or {}).get("fp")
    same = made_on == platform
    drop = ("type", "id", "_made", *spec.ignore)
    view = spec.view or (lambda record: record)
    stored = view(_without(stored_full, drop))
    context = Context(stored_records=[view(_without(r, drop)) for r in stored_records.values()])
    contract = spec.contract
    use_inputs = exact_part or part is not None or contract.needs_inputs(same)
    if part is not None and part not in spec.carry_parts:
        raise ValueError(f"{spec.name} has no part {part!r} to check apart (its parts: "
                         f"{', '.join(spec.carry_parts) or 'none'})")
    if use_inputs:
        if from_outputs is None:
            raise ValueError(f"{spec.name}: checking item {item} from its stored outputs needs from_outputs")
        by_part = {} if part is None else {"part": part}
        attempts: Iterable[dict[str, Any]] = iter([from_outputs(item, stored_full, stored_records, **by_part)])
    elif same and recompute_variants is not None:
        attempts = recompute_variants(item, stored_full)
    else:
        attempts = iter([compute(item)])
    compare_same = same and not use_inputs
    found: list[Deviation] | None = None
    for fresh in attempts:  # lazily: the first variant that agrees ends the check
        fresh_plain = view(_without(plain(fresh), spec.ignore))
        if use_inputs and isinstance(contract, Chaotic):
            mine = stored if part is None else _pruned_to(stored, fresh_plain)
            devs = contract.foreign.compare(mine, fresh_plain, context)
        else:
            devs = contract.compare(stored, fresh_plain, compare_same, context)
        top_units = max((d.units for d in devs), default=0.0)
        if found is None or top_units <= 1:
            found = devs
        if top_units <= 1:
            break
    devs = found or []
    top = worst(devs)
    rule = (contract.foreign.rule() if use_inputs and isinstance(contract, Chaotic) else contract.rule(compare_same))
    if part is not None:
        rule += f"; only the {part} part recomputed and compared"
    return Check(spec.name, _relative(path), item, contract.name, rule, made_on, platform, same, len(devs), top,
                 top is None or top.units <= 1, time.perf_counter() - t0)


def _pruned_to(stored: Any, fresh: Any) -> Any:
    """``stored`` with only the keys ``fresh`` has, at every level of nested dicts (what a
    part's recomputation is compared on; a key of ``fresh`` that ``stored`` lacks stays out)."""
    if isinstance(stored, dict) and isinstance(fresh, dict):
        return {k: _pruned_to(stored[k], v) for k, v in fresh.items() if k in stored}
    return stored


def disagreement(check: Check, spec: registry.Kind) -> str:
    """The one-line message of a failed check: the file, the item, the rule, the values, what to do."""
    where = "the platform that made it" if check.same_platform else (
        f"another platform than the one that made it ({check.made_on or 'not recorded'})")
    worst_text = check.worst.text() if check.worst else "nothing compared"
    return (f"{check.file}: item {check.item} recomputed differently on {where}, breaking the {check.contract} "
            f"contract ({check.rule}); largest deviation: {worst_text}. If the code changed, the store is stale: "
            f"carry it across with `gnuq store carry {spec.chapter}` (it verifies the items) or delete "
            "the file to recompute; if nothing changed, the stored item was altered (`git diff results/`) or this "
            "platform computes differently (report it with `gnuq store status`).")


def _header(path: Path) -> tuple[dict[str, Any], int]:
    """The header line of a store file and its record count (``({}, 0)`` for an unreadable file)."""
    try:
        config, records = read_records(path)
    except (OSError, ValueError):
        return {}, 0
    return {"config": config}, len(records)


def open_store(profile: str | None = None, *, root: str | Path | None = None) -> Store:
    """The store a build of ``profile`` uses: the results store for the paper edition, the local cache otherwise.

    ``GNUQ_STORE_MISSING`` (``warn`` by default; ``error`` in CI) says what the paper edition
    does when items are missing; ``GNUQ_STORE_CARRY=1`` carries orphaned files across a code
    change after verifying them (`gnuq store carry` sets it), ``GNUQ_STORE_CARRY_PART`` confines
    those carries to a part of the kinds that have it (`gnuq study carry --part`);
    ``GNUQ_RESULTS_DIR`` reads another copy of the results store (default ``results/``).
    """
    profile = profile if profile is not None else run_parameters().get("profile")
    carry = os.environ.get("GNUQ_STORE_CARRY", "") not in ("", "0")
    part = os.environ.get("GNUQ_STORE_CARRY_PART") or None
    parts = sorted({p for k in registry.KINDS.values() for p in k.carry_parts})
    if part is not None and part not in parts:
        raise ValueError(f"GNUQ_STORE_CARRY_PART={part!r}: no stored kind has that part; use one of "
                         f"{', '.join(parts) or 'none'} or unset it")
    if root is not None or is_paper_edition(profile):
        root = root or env_path("GNUQ_RESULTS_DIR") or RESULTS
        return Store(root, label="the results store", check=True,
                     missing=os.environ.get("GNUQ_STORE_MISSING", "warn"), carry=carry, carry_part=part)
    return Store(cache_dir() / "store", label="the local cache", check=False, missing="compute", carry=False)
