"""The results store: per-item results of long runs, kept in the repository and verified.

The full profile takes hours on a CPU, so the published book cannot recompute everything
on every build. Per-item results (one JSON line per question or per configuration,
produced by this project's own code: ids and numbers, never question or reference texts)
live in ``results/<kind>/<key>.jsonl``, keyed by the run's configuration *and* the source
of the code that computes them. A build

1. reads what is there,
2. computes only what is missing (appending, so a killed run resumes), and
3. recomputes a random sample of the stored items and fails if any number disagrees
   beyond a stated tolerance (:class:`ResultsDisagree`).

A long run can be sharded over processes (``torchrun --nproc-per-node N``, see
`gnuq_core.repro.shards`): rank r appends its share to ``<key>.rank{r}of{N}.jsonl`` next to
``<key>.jsonl``; reading a result reads the main file and every shard (no duplicates), and
rank 0 merges the shards into the main file at the end (in the order of the requested ids,
so the file is the one a single process writes).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import random
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from gnuq_core.repro.cache import config_key
from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.shards import World, read_merged, writer

STORE = REPO_ROOT / "results"


class ResultsDisagree(AssertionError):
    """A recomputed item differs from its stored result beyond the tolerance."""


def module_file(module: str) -> Path:
    """The source file of ``module`` (a dotted name such as ``"gnuq_core.bayes.mcmc"``),
    found without importing it (so listing torch-heavy modules costs nothing)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"no module named {module!r}: fix the code list of the results store")
    return Path(spec.origin)


def code_version(code: Iterable[str | Path]) -> str:
    """Hash of the given code's sources: a stored result is only reused by the same code.

    ``code`` lists dotted module names (``"gnuq_core.bayes.mcmc"``; what the library uses)
    or paths of source files. Entries are hashed in sorted order of their names.
    """
    h = hashlib.sha256()
    for entry in sorted(code, key=str):
        path = Path(entry) if isinstance(entry, Path) or str(entry).endswith(".py") else module_file(str(entry))
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def store_path(kind: str, config: dict[str, Any], code: str, root: Path = STORE) -> Path:
    """Where the results of ``config`` computed by code version ``code`` live."""
    return root / kind / f"{config_key({**config, '_code': code})}.jsonl"


def compare(stored: Any, fresh: Any, rtol: float, atol: float, where: str = "") -> list[str]:
    """Paths of the numbers (recursively in dicts and lists) that differ beyond tolerance."""
    if isinstance(stored, dict) and isinstance(fresh, dict):
        out = [f"{where}.{k}: missing in one of them" for k in set(stored) ^ set(fresh)]
        for k in set(stored) & set(fresh):
            out += compare(stored[k], fresh[k], rtol, atol, f"{where}.{k}")
        return out
    if isinstance(stored, list) and isinstance(fresh, list):
        if len(stored) != len(fresh):
            return [f"{where}: lengths {len(stored)} vs {len(fresh)}"]
        return [d for i, (a, b) in enumerate(zip(stored, fresh)) for d in compare(a, b, rtol, atol, f"{where}[{i}]")]
    if isinstance(stored, (int, float)) and isinstance(fresh, (int, float)) and not isinstance(stored, bool):
        if math.isclose(stored, fresh, rel_tol=rtol, abs_tol=atol) or (math.isnan(stored) and math.isnan(fresh)):
            return []
        return [f"{where}: stored {stored!r}, recomputed {fresh!r}"]
    if stored is None and isinstance(fresh, float) and not math.isfinite(fresh):
        return []  # stored files hold NaN/inf as null
    return [] if stored == fresh else [f"{where}: stored {stored!r}, recomputed {fresh!r}"]


def _without(obj: Any, keys: Sequence[str]) -> Any:
    """``obj`` with every dict entry named in ``keys`` removed, at any depth."""
    if isinstance(obj, dict):
        return {k: _without(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [_without(v, keys) for v in obj]
    return obj


def rounded(obj: Any, digits: int) -> Any:
    """``obj`` with every float (at any depth) rounded to ``digits`` significant digits, and
    NaN/inf as ``None`` (result files are strict JSON)."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}") if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    return obj


def describe(what: str, kinds: Sequence[str], verify: int, redo: str, rtol: float, extra: str = "") -> str:
    """The sentence a chapter shows to say what it read from the store and how it checked it.

    Parameters
    ----------
    what : str
        The stored results, as the subject of the sentence ("The NUTS summaries").
    kinds : sequence of str
        Their folders under ``results/``.
    verify : int
        Stored items of each kind recomputed from scratch in this build.
    redo : str
        What recomputing one item from scratch means ("NUTS sampled again").
    rtol : float
        The relative tolerance of the check.
    extra : str
        A further sentence (how the check's sample is drawn, a kind's own rule).
    """
    folders = ", ".join(f"results/{k}" for k in kinds)
    text = (f"{what} are read from the repository's results store ({folders}; keyed by the configuration and "
            "the source of the code that computes them); missing items are computed and added. ")
    if verify > 0:
        text += (f"To check the store, {verify} stored item{'s' if verify != 1 else ''} of each kind, drawn at random "
                 f"with a fixed seed, {'are' if verify != 1 else 'is'} recomputed from scratch in this build "
                 f"({redo}) and must agree with what is stored to a relative tolerance of {rtol:.0e}.")
    else:
        text += "No stored item is recomputed from scratch in this build (store_verify = 0): the store is not checked."
    return text + (f" {extra}" if extra else "")


def pool_words(costs: Sequence[float], max_seconds: float, noun: str, verb: str) -> str:
    """The sentence saying that the check draws only among the stored items it can afford
    (``run_stored(..., verify_among=...)``): ``costs`` are the items' recorded seconds."""
    n = sum(c <= max_seconds for c in costs)
    return (f"The {noun} recomputed are drawn among the {n} of these {len(costs)} that took at most "
            f"{max_seconds:g} s to {verb} when they were stored (the longest took {max(costs) / 60:.0f} minutes, "
            "longer than this whole build may take).")


def describe_without_store(what: str) -> str:
    """The sentence of a build that does not use the store (a preview profile)."""
    return ("Every result in this chapter is computed in this build (or read back from the local cache of a "
            f"previous run with the same parameters); the paper edition reads {what} from the repository's "
            "results store instead, and recomputes a random few from scratch.")


def run_stored(kind: str, config: dict[str, Any], ids: Sequence[str], compute: Callable[[str], dict[str, Any]], *,
               code_files: Iterable[str | Path], verify: int = 3, rtol: float = 1e-4, atol: float = 1e-8,
               seed: int = 0, root: Path | None = None,
               ignore: Sequence[str] = ("seconds", "timings"),
               recompute: Callable[[str], dict[str, Any]] | None = None,
               progress: str | None = None, digits: int | None = 7,
               world: World | None = None, compute_missing: bool = True,
               verify_among: Callable[[dict[str, Any]], bool] | None = None,
               recompute_variants: Callable[[str, dict[str, Any]], Iterable[dict[str, Any]]] | None = None
               ) -> list[dict[str, Any]]:
    """Results for ``ids``: stored ones are reused (and a sample re-checked), missing ones computed.

    Parameters
    ----------
    kind, config : str, dict
        The experiment and its full configuration (the store key).
    ids : sequence of str
        Items wanted, in order.
    compute : callable
        ``id -> record`` (JSON-serialisable, deterministic up to ``rtol``/``atol``).
    code_files : iterable of str or Path
        The code whose source defines the code version: dotted module names (every module
        that computes a stored number) or source paths.
    verify : int
        How many stored items (chosen with ``seed``) to recompute and compare.
    ignore : sequence of str
        Fields not compared, at any depth (wall times).
    recompute : callable, optional
        ``id -> record`` used for the verification sample, when ``compute`` may read a
        local cache (the check must redo the work, not read it back). Default ``compute``.
    progress : str, optional
        Show a progress bar with this label while missing items are computed.
    digits : int or None
        Floats are stored (and returned) with this many significant digits, which keeps
        the files small and makes a build from stored items equal one that computed them.
    world : World, optional
        This process's rank in a sharded run (`gnuq_core.repro.shards`): it computes the
        missing ids at positions ≡ rank (mod size) of ``ids`` into its own shard; rank 0
        alone checks the ``verify`` sample; at the end all ranks wait, rank 0 merges the
        shards, and every rank returns all records it can read. Default: one process.
    recompute_variants : callable, optional
        ``(id, stored record) -> iterable of fresh records``, used instead of ``recompute``
        when the stored record says under which of several legitimate settings it was made
        (e.g. a thread count): the check passes if one of them agrees (iterated lazily, so a
        generator stops at the first match), and otherwise reports the first one's differences.
    verify_among : callable, optional
        ``stored record -> bool``: draw the ``verify`` sample only from the stored items it
        accepts (e.g. those whose recorded cost fits a build's time budget). Default: all.
    compute_missing : bool
        ``False`` reads only: what is stored is returned (and its sample checked), nothing is
        computed or written (a build that must fit a time budget while a long campaign
        fills the store in pieces).

    Returns
    -------
    list of dict
        One record per id, in the order of ``ids`` (only the stored ids when not
        ``compute_missing``).
    """
    world = world or World()
    code = code_version(code_files)
    path = store_path(kind, config, code, root or STORE)
    existing = {r["id"]: r for r in read_merged(path)[1]}  # the main file and any shards
    wanted_stored = [i for i in dict.fromkeys(ids) if i in existing and (verify_among is None or verify_among(existing[i]))]
    for item in random.Random(seed).sample(wanted_stored, min(verify if world.rank == 0 else 0, len(wanted_stored))):
        stored = _without(existing[item], ("type", "id", *ignore))
        attempts = recompute_variants(item, existing[item]) if recompute_variants else [(recompute or compute)(item)]
        diffs: list[str] = []
        for fresh in attempts:  # lazily: the first variant that reproduces the item ends the check
            found = compare(stored, json.loads(json.dumps(_without(fresh, ignore), default=str)), rtol, atol)
            if not found:
                diffs = []
                break
            diffs = diffs or found  # report the first variant's differences
        if diffs:
            raise ResultsDisagree(f"{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}: "
                                  f"item {item} recomputed differently ({'; '.join(diffs[:5])}). The stored result "
                                  "is stale or the computation is not deterministic: delete the file to recompute.")
    if not compute_missing:
        return [{k: v for k, v in existing[i].items() if k != "type"} for i in ids if i in existing]
    order = list(dict.fromkeys(ids))
    missing = [i for i in world.mine(order) if i not in existing]
    if missing or world.sharded:  # a one-process read of a complete result writes nothing
        with writer(path, {**config, "_code": code}, world, order) as out:
            todo = [i for i in missing if i not in out.done]
            if todo and progress:
                from tqdm.auto import tqdm

                label = f"{progress} [rank {world.rank}/{world.size}]" if world.sharded else progress
                todo = tqdm(todo, desc=label, initial=len(world.mine(order)) - len(todo),
                            total=len(world.mine(order)))
            for item in todo:
                record = compute(item)
                if digits is not None:
                    record = rounded(record, digits)
                out.append(item, record)
                existing[item] = {"type": "record", "id": item, **record}
        if world.sharded:  # the other ranks' records
            existing.update({r["id"]: r for r in read_merged(path)[1] if r["id"] not in existing})
    # one process: every id; a rank: those it can read (all of them after the final barrier)
    return [{k: v for k, v in existing[i].items() if k != "type"} for i in ids if not world.sharded or i in existing]
