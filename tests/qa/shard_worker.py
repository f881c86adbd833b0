"""One rank of the sharded QA run of tests/qa/test_shards.py (started by torchrun, or alone).

    torchrun --standalone --nproc-per-node 2 -m tests.qa.shard_worker MODEL_DIR STORE PID_DIR [SLOW]

Runs the fixture questions `ITEMS` with `CFG` through `gnuq_core.qa.study.run_dataset` into
the results store at STORE, sharded over the torchrun ranks; writes its pid to
``PID_DIR/rank{r}.pid`` first; SLOW (seconds) is slept before each question so the test can
kill a rank mid-way.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from gnuq_core.qa.data import QAItem  # noqa: E402
from gnuq_core.qa.engine import QAConfig  # noqa: E402

ITEMS = [QAItem(f"tqa_{i}", f"What is question number {i}?", ("a",), (), "triviaqa") for i in range(8)]
CFG = QAConfig(model="tiny", dtype="float64", max_new_tokens=3, n_samples=2, clusterer="exact")


def run(model_dir: str | Path, store: str | Path, world=None, slow: float = 0.0) -> list[dict]:
    """The records of `ITEMS` (this process's share computed, all returned)."""
    from gnuq_core.lm.models import load_model
    from gnuq_core.qa import engine
    from gnuq_core.qa.study import run_dataset

    if slow:
        record = engine.question_record

        def slow_record(*args, **kwargs):
            time.sleep(slow)
            return record(*args, **kwargs)

        engine.question_record = slow_record
    from gnuq_core.store import Store

    lm = load_model(str(model_dir), dtype="float64")
    return run_dataset(lm, ITEMS, CFG, progress=False, store=Store(Path(store), label="the test store"), verify=0,
                       world=world)


def main(argv: list[str]) -> int:
    from gnuq_core.repro.shards import distributed

    model_dir, store, pid_dir = argv[:3]
    slow = float(argv[3]) if len(argv) > 3 else 0.0
    with distributed() as world:
        Path(pid_dir).mkdir(parents=True, exist_ok=True)
        (Path(pid_dir) / f"rank{world.rank}.pid").write_text(str(os.getpid()))
        recs = run(model_dir, store, world, slow)
    print(f"rank {world.rank} of {world.size}: {len(recs)} records")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
