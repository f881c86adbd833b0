"""One interface to stored per-item results: :meth:`Store.items` (``<root>/<kind>/<key>.jsonl``, ``key``
a hash of the kind, its version and the configuration; `open_store` picks the store of a profile, and
`gnuq_core.chapters.base.store_words` states on the page what a build read, computed and checked)."""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from tqdm.auto import tqdm

from gnuq_core.repro.keys import canonical, config_key, plain, rounded
from gnuq_core.repro.paths import REPO_ROOT, cache_dir, env_path
from gnuq_core.repro.records import check_output
from gnuq_core.repro.provenance import is_paper_edition, run_parameters
from gnuq_core.repro.shards import World, read_merged, writer
from gnuq_core.repro.fingerprint import fingerprint, fingerprint_id, register, registered
from gnuq_core.repro.threads import blas_threads
from gnuq_core.store import kinds as registry
from gnuq_core.store.contracts import field_pattern, leaves
from gnuq_core.store.verify import (Check, Compute, Recipe, ResultsDisagree, Sample, check_item, disagreement,
                                     relative, verify_file)

__all__ = ["StoreIncomplete", "StoreDamaged", "Read", "Store", "OneFile", "open_store", "damage", "stored_files", "RESULTS"]

RESULTS = REPO_ROOT / "results"
"""The repository's results store."""

FINGERPRINTS = "fingerprints.jsonl"
MISSING_POLICIES = ("compute", "warn", "error")


class StoreIncomplete(RuntimeError):
    """The paper edition would have to compute stored items from scratch (``GNUQ_STORE_MISSING=error``)."""


class StoreDamaged(ValueError):
    """A stored file whose header or numbers cannot be what its kind and name say."""


@dataclass
class Read:
    """What one :meth:`Store.items` call did: items read, computed, checked, and the sample's rule."""

    kind: str
    file: str
    wanted: int
    stored: int
    computed: int
    checks: list[Check] = field(default_factory=list)
    rule: str = ""


def stored_files(folder: Path) -> list[Path]:
    """A kind's store files in ``folder`` (shards by their main file's name), never a full verification's log."""
    return sorted({p.with_name(p.name.split(".rank")[0].removesuffix(".jsonl") + ".jsonl")
                   for p in Path(folder).glob("*.jsonl") if ".verify." not in p.name})


def header_config(spec: registry.Kind, config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration a file's header holds: the kind, its version and ``config``."""
    return {"_kind": spec.name, "_version": spec.version, **config}


def damage(spec: registry.Kind, path: Path, header: Mapping[str, Any], records: Iterable[Mapping[str, Any]],
           want: Mapping[str, Any] | None = None) -> str | None:
    """Why a stored file cannot be read as ``spec``'s file of ``want`` (its header config), or None.

    The header must be ``want`` (by default: at least the kind and version); every number in
    every record finite, and a null only where ``spec.nullable`` allows one."""
    file = relative(path)
    fix = f"restore it (`git checkout -- {file}`) or delete it to recompute"
    found = {k: header.get(k) for k in ("_kind", "_version")}
    if want is not None and canonical(dict(header)) != canonical(dict(want)):
        diff = sorted(k for k in set(header) | set(want) if canonical(header.get(k)) != canonical(want.get(k)))
        return (f"{file}: its header is not the {spec.name} configuration its name stands for (it differs in "
                f"{', '.join(diff[:4])}; header: kind {found['_kind']!r}, version {found['_version']!r}): {fix}")
    if want is None and found != {"_kind": spec.name, "_version": spec.version}:
        return f"{file}: its header says kind {found['_kind']!r} version {found['_version']!r}, not {spec.name} " \
               f"version {spec.version}: {fix}"
    allowed = [field_pattern(p) for p in spec.nullable]
    for record in records:
        for where, value in leaves({k: v for k, v in record.items() if k not in ("type", "_made")}):
            bad = value is None and not any(p.fullmatch(where) for p in allowed)
            if bad or (isinstance(value, float) and not math.isfinite(value)):
                return (f"{file}: item {record.get('id')} holds {value!r} at {where}, where {spec.name} stores only "
                        f"finite numbers: the file was altered or damaged; {fix}")
    return None


class Store:
    """Per-item results under ``root`` (``<kind>/<key>.jsonl`` and ``fingerprints.jsonl``).

    ``label`` names it ("the results store", "the local cache"); ``check`` runs the from-scratch
    checks (previews do not check their cache); ``missing`` says what missing items do:
    ``"compute"`` quietly, ``"warn"`` loudly (the paper edition), ``"error"``
    (:class:`StoreIncomplete`; CI); ``verify_all`` checks every stored item (`gnuq_core.store.verify`)
    of every kind (True) or of the kinds named.
    """

    def __init__(self, root: str | Path, *, label: str, check: bool = True, missing: str = "compute",
                 verify_all: bool | frozenset[str] = False) -> None:
        if missing not in MISSING_POLICIES:
            raise ValueError(f"missing must be one of {', '.join(MISSING_POLICIES)}, not {missing!r} "
                             "(GNUQ_STORE_MISSING)")
        self.root = Path(root)
        self.label = label
        self.check = check
        self.missing = missing
        self.verify_all = verify_all
        self.reads: list[Read] = []
        self._fingerprint: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"Store({relative(self.root)!r}, label={self.label!r})"

    @property
    def fingerprint(self) -> dict[str, Any]:
        """This process's platform (`gnuq_core.repro.fingerprint.fingerprint`)."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint()
        return self._fingerprint

    @property
    def fingerprint_id(self) -> str:
        return fingerprint_id(self.fingerprint)

    def fingerprints(self) -> dict[str, dict[str, Any]]:
        """Every registered fingerprint of this store: ``{id: fingerprint}``."""
        return registered(self.root / FINGERPRINTS)

    def register_fingerprint(self) -> str:
        """Add this process's fingerprint to the store's ``fingerprints.jsonl`` unless it is there; its id."""
        return register(self.root / FINGERPRINTS, self.fingerprint)

    def path(self, kind: str | registry.Kind, config: Mapping[str, Any]) -> Path:
        """The file of ``config``'s items of ``kind`` at its current version."""
        spec = registry.get(kind)
        return self.root / spec.name / f"{config_key(header_config(spec, config))}.jsonl"

    def read(self, kind: str | registry.Kind, config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """The stored records of ``config`` by id (shards included), after checking the file
        (:func:`damage`; :class:`StoreDamaged` naming it)."""
        spec = registry.get(kind)
        path = self.path(spec, config)
        header, records = read_merged(path)
        if not header and not records:
            return {}
        why = damage(spec, path, header, records, header_config(spec, config))
        if why:
            raise StoreDamaged(why)
        return {str(r["id"]): r for r in records}

    def items(self, kind: str | registry.Kind, config: Mapping[str, Any], ids: Sequence[str],
              recipe: Recipe | Compute, *, verify: Sample | int = 0, world: World | None = None,
              read_only: bool = False, progress: str | None = None) -> list[dict[str, Any]]:
        """The records of ``ids`` (in that order): stored ones read and a sample checked, missing ones computed.

        Parameters
        ----------
        kind : str
            A registered kind (`gnuq_core.store.kinds`).
        config : dict
            The run's configuration (with the kind and its version, the file's key).
        ids : sequence of str
            The items wanted.
        recipe : Recipe or callable
            How items are made (a callable is ``Recipe(compute=...)``).
        verify : Sample or int
            Stored items recomputed from scratch and compared (an int: that many, at random).
        world : World, optional
            This process's rank in a sharded run: it computes the missing ids at positions
            ≡ rank (mod size) into its own shard; rank 0 alone checks a sample (every rank its
            share under ``verify_all``); all ranks return all records.
        read_only : bool
            Only read (and check) what is stored; nothing is computed or written.
        progress : str, optional
            Label of a progress bar while items are computed or verified.
        """
        spec = registry.get(kind)
        world = world or World()
        recipe = recipe if isinstance(recipe, Recipe) else Recipe(recipe)
        sample = verify if isinstance(verify, Sample) else Sample(int(verify))
        path = self.path(spec, config)
        order = list(dict.fromkeys(str(i) for i in ids))
        existing = self.read(spec, config)
        read = Read(spec.name, relative(path), len(order), sum(i in existing for i in order), 0, rule=sample.words)
        self.reads.append(read)
        stored = dict(existing)
        if self.check and (self.verify_all is True or spec.name in (self.verify_all or ())):
            read.checks += verify_file(self.fingerprint_id, spec, path, stored, [i for i in order if i in stored], recipe, sample,
                                       world, progress)
        elif self.check and world.rank == 0:
            for item in sample.draw(order, stored):
                check = check_item(spec, path, item, stored, self.fingerprint_id, recipe)
                read.checks.append(check)
                if not check.passed:
                    raise ResultsDisagree(disagreement(check, spec))
        todo = [i for i in order if i not in existing]
        if read_only:
            return [self._public(existing[i]) for i in order if i in existing]
        if todo:
            self._on_missing(spec, path, len(todo), len(order))
        mine = [i for i in world.mine(order) if i not in existing]
        if mine or world.sharded:
            made = {"fp": self.register_fingerprint(), "blas_threads": blas_threads()}
            with writer(path, header_config(spec, config), world, order) as out:
                todo = [i for i in mine if i not in out.done]
                if todo and progress:
                    label = f"{progress} [rank {world.rank}/{world.size}]" if world.sharded else progress
                    todo = tqdm(todo, desc=label, initial=len(world.mine(order)) - len(todo),
                                total=len(world.mine(order)))
                for item in todo:
                    record = rounded(plain(recipe.compute(item)), spec.digits)
                    record["_made"] = made
                    out.append(item, record)
                    existing[item] = {"type": "record", "id": item, **record}
                    read.computed += 1
            if world.sharded:
                existing.update({k: v for k, v in self.read(spec, config).items() if k not in existing})
        return [self._public(existing[i]) for i in order if not world.sharded or i in existing]

    @staticmethod
    def _public(record: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in record.items() if k not in ("type", "_made")}

    def _on_missing(self, spec: registry.Kind, path: Path, n: int, total: int) -> None:
        if self.missing == "compute":
            return
        text = (f"{self.label}: {n} of {total} items of {spec.name} (version {spec.version}) are missing from "
                f"{relative(path)} and would be computed from scratch in this build; fill the store (`gnuq store "
                "status` shows what is there, and files of an older version of the kind)")
        if self.missing == "error":
            raise StoreIncomplete(text + " (GNUQ_STORE_MISSING=error)")
        print(f"{'!' * 78}\n{text}\n{'!' * 78}", file=sys.stderr)

    def checks(self, kinds: Sequence[str] | None = None) -> list[Check]:
        """Every check run by this store (of ``kinds``, default all)."""
        return [c for r in self.reads if kinds is None or r.kind in kinds for c in r.checks]


class OneFile(Store):
    """``gnuq qa --out FILE``: the records of one kind and configuration in the file the user named,
    written, resumed and sharded by :meth:`Store.items` (another run's file is refused); not verified."""

    def __init__(self, file: str | Path, *, label: str) -> None:
        super().__init__(Path(file).parent, label=label, check=False, missing="compute")
        self.file = Path(file)

    def path(self, kind: str | registry.Kind, config: Mapping[str, Any]) -> Path:
        return self.file

    def read(self, kind: str | registry.Kind, config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        check_output(self.file, header_config(registry.get(kind), config))  # another run's file: choose another
        return super().read(kind, config)

    def register_fingerprint(self) -> str:
        return self.fingerprint_id


def open_store(profile: str | None = None, *, root: str | Path | None = None) -> Store:
    """The store a build of ``profile`` uses: the results store for the paper edition, the local cache otherwise.

    ``GNUQ_STORE_MISSING`` (``warn``; ``error`` in CI) says what missing items do; ``GNUQ_STORE_VERIFY=all``
    checks every stored item, ``=qa,qa_mc`` those kinds'; ``GNUQ_RESULTS_DIR`` names another copy of ``results/``.
    """
    profile = profile if profile is not None else run_parameters().get("profile")
    verify = os.environ.get("GNUQ_STORE_VERIFY", "")
    kinds = frozenset(verify.split(",")) - {"", "sample", "all"}
    if verify not in ("", "sample", "all") and not kinds <= set(registry.KINDS):
        raise ValueError(f"GNUQ_STORE_VERIFY={verify!r}: use 'all' (check every stored item), stored kinds (e.g. "
                         f"qa,qa_mc; known: {', '.join(registry.KINDS)}) or unset it")
    if root is not None or is_paper_edition(profile):
        return Store(root or env_path("GNUQ_RESULTS_DIR") or RESULTS, label="the results store", check=True,
                     missing=os.environ.get("GNUQ_STORE_MISSING", "warn"), verify_all=verify == "all" or kinds)
    return Store(cache_dir() / "store", label="the local cache", check=False, missing="compute")
