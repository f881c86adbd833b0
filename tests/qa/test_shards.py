"""Sharded QA runs: two real torchrun ranks (gloo, CPU) on a tiny saved model; one is
killed mid-way, the job is resumed, and the merged store equals a one-process run."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.records import read_records
from gnuq_core.store.contracts import Context, Exact, worst
from gnuq_core.repro.keys import without as _without
from gnuq_core.repro.shards import ShardLocked, locked, shard_path, shard_paths
from tests.qa import shard_worker
from tests.tiny_models import byte_tokenizer, tiny_llama

TORCHRUN = Path(sys.executable).with_name("torchrun")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_model")
    tiny_llama().save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return folder


def _torchrun(model_dir, store, pids, slow=0.0):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT),
           "TQDM_DISABLE": "1"}
    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", "-m", "tests.qa.shard_worker",
           str(model_dir), str(store), str(pids), str(slow)]
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _n_records(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text().splitlines() if '"type": "record"' in line)
    except FileNotFoundError:
        return 0


def _wait(cond, timeout: float, what: str) -> None:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.mark.subprocess
@pytest.mark.skipif(not TORCHRUN.exists(), reason="torchrun not installed next to python")
def test_two_ranks_killed_resumed_and_merged_equal_one_process(model_dir, tmp_path):
    # the reference: one process, no torchrun
    ref_store = tmp_path / "one"
    reference = shard_worker.run(model_dir, ref_store)
    (ref_file,) = ref_store.glob("qa/*.jsonl")
    _, ref_records = read_records(ref_file)
    assert [r["id"] for r in ref_records] == [it.id for it in shard_worker.ITEMS]
    assert len({r["samples"][0]["answer"] for r in reference}) > 1  # samples are seeded per question

    store, pids = tmp_path / "two", tmp_path / "pids"
    job = _torchrun(model_dir, store, pids, slow=0.4)
    try:
        _wait(lambda: sum(map(_n_records, store.glob("qa/*.rank1of2.jsonl"))) >= 2 or job.poll() is not None,
              90, "rank 1's second record")
        assert job.poll() is None, job.stdout.read()
        (shard1,) = store.glob("qa/*.rank1of2.jsonl")
        main = shard1.with_name(shard1.name.replace(".rank1of2", ""))
        with pytest.raises(ShardLocked, match="another job"):  # a second job on the same shard is refused
            with locked(shard1):
                pass
        os.kill(int((pids / "rank1.pid").read_text()), signal.SIGKILL)
        job.wait(60)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode != 0
    assert not main.exists() or _n_records(main) < len(shard_worker.ITEMS)
    assert 2 <= _n_records(shard1) < len(shard_worker.ITEMS) // 2  # killed mid-way, finished ones kept
    _, kept = read_records(shard1)

    job = _torchrun(model_dir, store, pids)  # resume
    out, _ = job.communicate(timeout=120)
    assert job.returncode == 0, out
    assert shard_paths(main) == [] and not list(store.glob("qa/*.shardlock"))  # merged, locks released
    _, merged = read_records(main)
    assert [r["id"] for r in merged] == [r["id"] for r in ref_records]  # same ids, same order
    for a, b in zip(merged, ref_records):
        top = worst(Exact(rtol=1e-6, atol=1e-9).compare(_numbers(a), _numbers(b), True, Context()))
        assert top is None or top.units <= 1, top.text()
    by_id = {r["id"]: r for r in merged}
    assert all(by_id[r["id"]]["timings"] == r["timings"] for r in kept)  # not recomputed on resume


def _numbers(record: dict) -> dict:
    # wall times differ, and so may the thread count (torchrun ranks run 1 thread each)
    return _without(record, ("timings", "seconds", "torch_threads", "_made", "type", "id"))


def test_one_process_run_merges_shards_left_by_a_killed_job(model_dir, tmp_path):
    ref = shard_worker.run(model_dir, tmp_path / "one")
    (ref_file,) = (tmp_path / "one" / "qa").glob("*.jsonl")
    # a sharded job that wrote two records into rank 1's shard, then died
    main = tmp_path / "two" / "qa" / ref_file.name
    main.parent.mkdir(parents=True)
    header, *lines = ref_file.read_text().splitlines(keepends=True)
    shard_path(main, 1, 2).write_text(header + lines[1] + lines[3])
    again = shard_worker.run(model_dir, tmp_path / "two")
    assert shard_paths(main) == []
    assert main.read_text().splitlines()[1:3] == [lines[1].rstrip("\n"), lines[3].rstrip("\n")]
    assert [r["id"] for r in again] == [r["id"] for r in ref]
    shutil.rmtree(tmp_path / "two")
