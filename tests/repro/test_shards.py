"""gnuq_core.repro.shards: shard files, their locks, merged reading and the merge (files only;
the two-process run is tests/qa/test_shards.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gnuq_core.repro.records import ConfigMismatch, RecordFile, read_records
from gnuq_core.repro.shards import (ShardLocked, World, locked, merge_shards, read_merged, shard_path, shard_paths,
                                    world_from_env)


def _fill(path, ids, config=None):
    rf = RecordFile(path, config or {"run": 1})
    for i in ids:
        rf.append(i, {"v": int(i)})
    getattr(rf, "close", lambda: None)()


def test_shard_names(tmp_path):
    main = tmp_path / "abc.jsonl"
    assert shard_path(main, 1, 2) == tmp_path / "abc.rank1of2.jsonl"
    for name in ["abc.rank1of2.jsonl", "abc.rank0of2.jsonl", "abc.rank2of3.jsonl", "abc.rank1of2.jsonl.shardlock",
                 "abcd.rank0of2.jsonl", "abc.rankXof2.jsonl"]:
        (tmp_path / name).write_text("")
    assert [p.name for p in shard_paths(main)] == ["abc.rank0of2.jsonl", "abc.rank1of2.jsonl", "abc.rank2of3.jsonl"]


def test_world_from_env(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    assert world_from_env() == World(0, 1, 0) and not World().sharded
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert world_from_env() == World(3, 4, 1)
    assert World(1, 3).mine(["a", "b", "c", "d", "b", "e"]) == ["b", "e"]
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match="RANK=4 with WORLD_SIZE=4"):
        world_from_env()


def test_a_shard_has_one_writer(tmp_path):
    shard = tmp_path / "k.rank0of2.jsonl"
    with locked(shard):
        lock = tmp_path / "k.rank0of2.jsonl.shardlock"
        assert lock.read_text() == str(os.getpid())
        with pytest.raises(ShardLocked, match=f"another job \\(pid {os.getpid()}\\)"):
            with locked(shard):
                pass
    assert not lock.exists()
    with locked(shard):  # free again
        pass


def test_reading_merges_shards_without_duplicates(tmp_path):
    main = tmp_path / "k.jsonl"
    _fill(main, ["0", "1"])
    _fill(shard_path(main, 0, 2), ["2", "4"])
    _fill(shard_path(main, 1, 2), ["1", "3"])  # "1" also in the main file: read once
    config, recs = read_merged(main)
    assert config == {"run": 1} and [r["id"] for r in recs] == ["0", "1", "2", "4", "3"]
    _fill(shard_path(main, 0, 3), ["9"], config={"run": 2})
    with pytest.raises(ConfigMismatch, match="k.rank0of3.jsonl has another configuration"):
        read_merged(main)


def test_merge_writes_the_run_order_and_removes_the_shards(tmp_path):
    main = tmp_path / "k.jsonl"
    _fill(shard_path(main, 0, 2), ["0", "2", "4"])
    _fill(shard_path(main, 1, 2), ["1", "3"])
    with locked(shard_path(main, 1, 2)):  # a job still writes rank 1
        with pytest.raises(ShardLocked):
            merge_shards(main)
    assert len(shard_paths(main)) == 2 and not main.exists()
    assert merge_shards(main) == 5  # round robin: the order of one job of that size
    assert [r["id"] for r in read_records(main)[1]] == ["0", "1", "2", "3", "4"] and shard_paths(main) == []
    # with the run's order; records already in the main file are not repeated
    _fill(shard_path(main, 0, 2), ["7", "5"])
    _fill(shard_path(main, 1, 2), ["6", "4"])
    assert merge_shards(main, order=["4", "5", "6", "7"]) == 3
    assert [r["id"] for r in read_records(main)[1]] == ["0", "1", "2", "3", "4", "5", "6", "7"]
    assert json.loads(main.read_text().splitlines()[0])["config"] == {"run": 1}


def test_a_sharded_writer_refuses_a_foreign_main_file_before_any_work(tmp_path):
    from gnuq_core.repro.shards import writer

    main = tmp_path / "k.jsonl"
    _fill(main, ["0"], config={"run": 2})
    with pytest.raises(ConfigMismatch, match="different configuration"):
        with writer(main, {"run": 1}, World(0, 2), ["0", "1"]):
            pass
    assert shard_paths(main) == []
    main.write_text("not a result file\n")
    with pytest.raises(ConfigMismatch, match="no gnuq header"):
        with writer(main, {"run": 1}, World(1, 2), ["0", "1"]):
            pass
    with writer(tmp_path / "new.jsonl", {"run": 1}, World(1, 2), ["0", "1"]) as rf:
        rf.append("1", {"v": 1})
    assert [r["id"] for r in read_merged(tmp_path / "new.jsonl")[1]] == ["1"]


def test_ranks_share_the_gpus_round_robin(monkeypatch):
    import torch

    from gnuq_core.repro.shards import rank_device

    assert rank_device(World(1, 2, 1), "cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert [rank_device(World(r, 3, r), "cuda") for r in range(3)] == ["cuda:0"] * 3
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert [rank_device(World(r, 3, r), "cuda") for r in range(3)] == ["cuda:0", "cuda:1", "cuda:0"]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(ValueError, match="no CUDA device"):
        rank_device(World(), "cuda")


def test_a_shard_killed_before_its_header_holds_nothing(tmp_path):
    main = tmp_path / "k.jsonl"
    shard_path(main, 0, 2).write_text("")
    shard_path(main, 1, 2).write_text('{"type": "hea')  # torn header line
    assert read_merged(main) == ({}, [])
    assert merge_shards(main) == 0 and shard_paths(main) == [] and not main.exists()
    shard_path(main, 0, 2).write_text("")
    _fill(shard_path(main, 1, 2), ["1"])
    assert merge_shards(main, order=["0", "1"]) == 1 and [r["id"] for r in read_records(main)[1]] == ["1"]
    shard_path(main, 1, 2).write_text('{"type": "hea')  # a rank killed while writing its header resumes
    from gnuq_core.repro.shards import writer

    with writer(main, {"run": 1}, World(1, 2), ["0", "1", "2", "3"]) as rf:
        rf.append("3", {"v": 3})
    assert [r["id"] for r in read_merged(main)[1]] == ["1", "3"]


PEER_SCRIPT = """
import os, sys
from gnuq_core.options import PeerLost
from gnuq_core.repro.shards import distributed
with distributed("cpu") as world:
    if world.rank == 1:
        os._exit(9)  # killed: never reaches the barrier
    try:
        world.barrier()
    except PeerLost as err:
        print(err, file=sys.stderr)
        os._exit(3)
    os._exit(0)
"""


@pytest.mark.subprocess
def test_a_rank_whose_peer_dies_gets_peer_lost_not_a_gloo_traceback(tmp_path):
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [subprocess.Popen([sys.executable, "-c", PEER_SCRIPT], env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert procs[1].returncode == 9
    assert procs[0].returncode == 3, errs[0]
    assert "rank 0 of 2: another rank stopped before reaching the barrier" in errs[0]
    assert "Traceback" not in errs[0]
