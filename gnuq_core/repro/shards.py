"""Sharded runs: N processes (torch.distributed ranks) fill one result file together.

A run writes the items of an ordered id list into one `~gnuq_core.repro.records.RecordFile`
(``<stem>.jsonl``). Under ``torchrun --nproc-per-node N`` rank r takes the items whose
position in that order is ≡ r (mod N) and appends them to its own shard,
``<stem>.rank{r}of{N}.jsonl`` (a RecordFile with the main file's header: resumable after a
kill at any moment). Each shard is locked by the process that writes it (an advisory
``flock`` on ``<shard>.shardlock``, removed on release), so a second job on the same shards
is refused with `ShardLocked`, naming the process that holds it.

* Reading a result (`read_merged`) = the main file + every shard, first occurrence of an id
  wins, no duplicates.
* Merging (`merge_shards`, done by rank 0 after a final barrier, or by the next one-process
  run that writes) appends the shards' records to the main file in the run's order and
  deletes the shards: the main file then holds exactly the records, in the order, that one
  process would have written.

Which process am I: `World` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` as torchrun sets them;
one process without them). `distributed` starts the process group (gloo on CPU, NCCL on
GPUs, one per rank) and sets one torch thread per rank when there are several;
`rank_device` says which GPU a rank uses.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from gnuq_core.options import OPTIONS, PeerLost
from gnuq_core.repro.records import ConfigMismatch, RecordFile, canonical_config, read_records

__all__ = ["World", "ShardLocked", "world_from_env", "rank_device", "distributed", "shard_path", "shard_paths", "locked",
           "read_merged", "merge_shards", "writer"]

_SHARD = re.compile(r"\.rank(\d+)of(\d+)$")
LOCK_SUFFIX = ".shardlock"
# A rank may finish hours before the slowest one: the final barrier must not time out.
BARRIER_TIMEOUT = timedelta(days=7)


class ShardLocked(ValueError):
    """Another process is writing the shard (or a job still holds it)."""


@dataclass(frozen=True)
class World:
    """This process's place in a sharded run.

    Attributes
    ----------
    rank, size : int
        Rank r of N processes (0 of 1 without torchrun).
    local_rank : int
        Rank on this machine (which GPU to use).
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def sharded(self) -> bool:
        """Whether several processes share the run."""
        return self.size > 1

    def mine(self, ids: Sequence[str]) -> list[str]:
        """The ids at positions ≡ rank (mod size) of ``ids`` (duplicates removed first)."""
        unique = list(dict.fromkeys(ids))
        return [i for k, i in enumerate(unique) if k % self.size == self.rank]

    def barrier(self) -> None:
        """Wait for every rank (no-op for one process or without a process group); `PeerLost`
        if another rank died (killed, or failed) instead of arriving."""
        import torch.distributed as dist

        if self.sharded and dist.is_available() and dist.is_initialized():
            try:
                if dist.get_backend() == "nccl":
                    import torch

                    dist.barrier(device_ids=[torch.cuda.current_device()])
                else:
                    dist.barrier()
            except RuntimeError as err:  # gloo: "Connection closed by peer", NCCL: "... remote process exited"
                raise PeerLost(f"rank {self.rank} of {self.size}: another rank stopped before reaching the barrier "
                               f"({' '.join(str(err).split())[:120]}); this rank's records are kept: rerun the "
                               "same command to resume") from None


def world_from_env() -> World:
    """`World` from torchrun's ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` (one process without them)."""
    try:
        size = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError as err:
        raise ValueError(f"RANK / WORLD_SIZE / LOCAL_RANK must be integers ({err}); start the job with "
                         "torchrun, or unset them for one process") from None
    if size < 1 or not 0 <= rank < size:
        raise ValueError(f"RANK={rank} with WORLD_SIZE={size}: need 0 <= RANK < WORLD_SIZE; start the job with "
                         "torchrun, or unset them for one process")
    return World(rank, size, local)


def rank_device(world: World, device: str) -> str:
    """The device this rank computes on: ``"cuda"`` becomes ``"cuda:<LOCAL_RANK mod GPUs>"``
    (ranks share GPUs round-robin when there are more ranks than GPUs); others unchanged."""
    if device != "cuda":
        return device
    import torch

    n = torch.cuda.device_count()
    if n == 0:
        raise ValueError("--device cuda: no CUDA device is visible to this process; use --device cpu")
    return f"cuda:{world.local_rank % n}"


@contextmanager
def distributed(device: str = "cpu", threads: int | None = None) -> Iterator[World]:
    """This process's `World`, with the torch.distributed process group running when sharded.

    Parameters
    ----------
    device : str
        ``"cpu"`` (gloo backend) or ``"cuda"`` (each rank on GPU `rank_device`; NCCL when
        every rank of the machine has its own GPU, else gloo: the run only needs barriers).
    threads : int, optional
        torch threads per process; default 1 when there are several ranks (two processes
        with one thread each are faster than one with two), else torch's default.
    """
    import torch

    if threads is not None:
        OPTIONS["threads"].check("threads", threads)  # libgomp allocates per thread: 10⁸ asked for 21.6 GB
    world = world_from_env()
    if threads is None and world.sharded:
        threads = 1
    if threads:
        torch.set_num_threads(threads)
    own = False
    if world.sharded:
        import torch.distributed as dist

        if not dist.is_initialized():
            backend = "gloo"
            if device == "cuda":
                torch.cuda.set_device(torch.device(rank_device(world, device)))
                per_machine = int(os.environ.get("LOCAL_WORLD_SIZE", world.size))
                backend = "nccl" if per_machine <= torch.cuda.device_count() else "gloo"
            dist.init_process_group(backend, timeout=BARRIER_TIMEOUT)
            own = True
    try:
        yield world
    finally:
        if own:
            import torch.distributed as dist

            with suppress(RuntimeError):  # after a lost peer the group may be broken already
                dist.destroy_process_group()


def shard_path(path: str | Path, rank: int, size: int) -> Path:
    """The shard of rank ``rank`` of ``size``: ``<stem>.rank{rank}of{size}<suffix>`` next to ``path``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.rank{rank}of{size}{path.suffix}")


def shard_paths(path: str | Path) -> list[Path]:
    """The shard files of ``path`` that exist, by world size, then rank."""
    path = Path(path)
    found = []
    for p in path.parent.glob(f"{path.stem}.rank*of*{path.suffix}"):
        m = _SHARD.search(p.name[: len(p.name) - len(path.suffix)] if path.suffix else p.name)
        if m and p.name == shard_path(path, int(m[1]), int(m[2])).name:
            found.append((int(m[2]), int(m[1]), p))
    return [p for _, _, p in sorted(found)]


@contextmanager
def locked(shard: str | Path) -> Iterator[Path]:
    """Hold the advisory lock of ``shard`` (refused at once, with `ShardLocked`, if another
    process holds it). The lock file ``<shard>.shardlock`` holds the owner's pid and is
    removed on release."""
    shard = Path(shard)
    lock = shard.with_name(shard.name + LOCK_SUFFIX)
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = ""
            try:
                holder = os.read(fd, 64).decode(errors="replace").strip()
            finally:
                os.close(fd)
            if err.errno in (errno.EAGAIN, errno.EACCES):
                raise ShardLocked(f"{shard} is being written by another job (pid {holder or '?'}): wait for it to "
                                  "finish or stop it; two jobs never write the same shard") from None
            raise
        try:  # the file may have been removed by its previous owner between open and flock
            same = os.path.exists(lock) and os.stat(lock).st_ino == os.fstat(fd).st_ino
        except OSError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield shard
    finally:
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass
        os.close(fd)


def read_merged(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(config, records)`` of a result and its shards: the main file's records, then each
    shard's (`shard_paths` order) whose id is new. Shards must carry the main file's header."""
    path = Path(path)
    config: dict[str, Any] | None = None
    records: dict[str, dict[str, Any]] = {}
    for p in ([path] if path.exists() else []) + shard_paths(path):
        cfg, recs = read_records(p)
        if not cfg and not recs:
            continue  # killed before its header was complete: nothing in it
        if config is None:
            config = cfg
        elif canonical_config(cfg) != canonical_config(config):
            raise ConfigMismatch(f"{p} has another configuration than {path.name}: it is not a shard of this run; "
                                 "move it away")
        for r in recs:
            records.setdefault(str(r["id"]), r)
    return config or {}, list(records.values())


def merge_shards(path: str | Path, order: Sequence[str] | None = None) -> int:
    """Move the shards' records into the main file ``path`` and delete the shards.

    Records already in the main file are skipped; the others are appended in the order of
    ``order`` (the run's ids), then any not in ``order`` in shard order. Without ``order``
    the shards are interleaved round-robin (`shard_paths` order: rank 0, 1, …), which is
    the run's order when one job wrote them all. Shards killed before their header was
    complete hold nothing and are removed. Every shard is locked during
    the merge (`ShardLocked` if a job still writes one); a merge killed half-way is
    completed by the next one. Returns the number of records moved.
    """
    path = Path(path)
    shards = shard_paths(path)
    if not shards:
        return 0
    with ExitStack() as stack:
        for s in shards:
            stack.enter_context(locked(s))
        contents = [read_records(s) for s in shards]
        configs = [cfg for cfg, recs in contents if cfg or recs]
        if not configs:  # only shards killed before their header was complete
            for s in shards:
                s.unlink()
            return 0
        main = RecordFile(path, configs[0])
        pending: dict[str, dict[str, Any]] = {}
        per_shard: list[list[str]] = []
        for s, (cfg, recs) in zip(shards, contents):
            if not cfg and not recs:
                continue
            if canonical_config(cfg) != main.config:
                raise ConfigMismatch(f"{s} has another configuration than {path.name}: it is not a shard of this "
                                     "run; move it away")
            per_shard.append([])
            for r in recs:
                rid = str(r["id"])
                if rid not in main.done and rid not in pending:
                    pending[rid] = r
                    per_shard[-1].append(rid)
        if order is None:
            order = _round_robin(per_shard)
        first = {rid: k for k, rid in enumerate(dict.fromkeys(str(i) for i in order))}
        ids = sorted(pending, key=lambda rid: first.get(rid, len(first)))  # stable: shard order for the rest
        for rid in ids:
            rec = {k: v for k, v in pending[rid].items() if k not in ("type", "id")}
            main.append(rid, rec)
        _close(main)
        for s in shards:
            s.unlink()
    return len(ids)


def _same_run(path: Path, config: dict[str, Any]) -> None:
    """Raise `ConfigMismatch` if the main file ``path`` exists and belongs to another run."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open(encoding="utf-8") as f:
        first = f.readline()
    try:
        header = json.loads(first)
    except json.JSONDecodeError:
        header = {}
    if not isinstance(header, dict) or header.get("type") != "header":
        raise ConfigMismatch(f"{path} exists but has no gnuq header line: it is not a gnuq result file; choose "
                             "another --out path")
    if canonical_config(header.get("config")) != canonical_config(config):
        raise ConfigMismatch(f"{path} belongs to a run with a different configuration: use a different --out "
                             "file, or delete this one to start over")


def _close(rf: RecordFile) -> None:
    """Release ``rf``'s file lock where RecordFile has one (it is also released when ``rf`` is freed)."""
    close = getattr(rf, "close", None)
    if close is not None:
        close()


def _round_robin(lists: list[list[str]]) -> list[str]:
    out: list[str] = []
    for k in range(max((len(x) for x in lists), default=0)):
        out += [x[k] for x in lists if k < len(x)]
    return out


@contextmanager
def writer(path: str | Path, config: dict[str, Any], world: World, order: Sequence[str]) -> Iterator[RecordFile]:
    """The RecordFile this process appends to, for a run of the ids ``order``.

    One process: the main file, after merging any shards left by a sharded job
    (`ShardLocked` if that job still runs). Several: this rank's locked shard; on a normal
    exit every rank waits at a barrier, rank 0 merges the shards into the main file, and the
    others wait for the merge.
    """
    path = Path(path)
    if not world.sharded:
        merge_shards(path, order)
        out = RecordFile(path, config)
        try:
            yield out
        finally:
            _close(out)
        return
    _same_run(path, config)  # a foreign main file fails now, not at the merge after all the work
    shard = shard_path(path, world.rank, world.size)
    with locked(shard):
        if shard.exists() and read_records(shard) == ({}, []):
            shard.unlink()  # killed while its header was written: start it again
        out = RecordFile(shard, config)
        try:
            yield out
        finally:
            _close(out)
    world.barrier()
    if world.rank == 0:
        try:
            merge_shards(path, order)
        except ShardLocked as err:
            warnings.warn(f"shards not merged yet ({err}); they are read with the main file and merged by the "
                          "next run", stacklevel=3)
    world.barrier()
