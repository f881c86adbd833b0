"""Records per hour of the whole QA pipeline, and what the full study would take.

A *record* is what the QA study stores per question: `gnuq_core.qa.engine.question_record`
(greedy answer, gradient pass, P(True), N samples, their clustering) with the study's
settings (`qa_config`: N = 10, a 32-token cap, T = 1, P(True), embedding clustering, unless
the `BenchConfig` says otherwise). Nothing here re-implements a pass: the workers call the
engine, and the share of each pass comes from the timings the engine writes into every
record (``record["timings"]``).

Layouts. ``[processes, threads]``: ``processes`` worker processes (``python -m gnuq_core.bench
--throughput-worker``) with ``threads`` torch threads each score disjoint questions (question
``i`` goes to worker ``i mod processes``, as a sharded run splits them) at the same time.
Each worker loads the model and runs one short warm-up record (2 tokens, 2 samples: every
code path loaded, the clusterer included) before a common start signal, so loading is not
counted. Records per hour = records / (last worker's end − common start). Every layout
scores the same questions.

Full-study estimate. The study is every question of the datasets (817 TruthfulQA and
2,933 TriviaQA) per model. For a layout, the measured wall time is scaled by the ratio of
the study's work to the measured work, per dataset: ``wall × Σ_d N_d · mean_d / Σ_r t_r``
(``mean_d``: mean seconds of a record of dataset d; ``t_r``: seconds of record r).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from gnuq_core.bench.config import BenchConfig
from gnuq_core.bench.passes import clusterer_for
from gnuq_core.bench.questions import pick
from gnuq_core.bench.summary import summary
from gnuq_core.lm.models import load_model
from gnuq_core.qa.data import QAItem, load_qa
from gnuq_core.qa.engine import QAConfig, question_record, resolved_style

__all__ = ["qa_config", "throughput_items", "study_sizes", "measure_layout", "summarize_layout",
           "measure_throughput", "campaign", "throughput_worker", "layout_key"]


def layout_key(processes: int, threads: int) -> str:
    """``"1x2"``: processes × threads."""
    return f"{int(processes)}x{int(threads)}"


def qa_config(spec: str, config: BenchConfig) -> Any:
    """The `gnuq_core.qa.engine.QAConfig` of a records/hour run: the QA study's settings."""
    return QAConfig(model=spec, dtype=config.dtype, max_new_tokens=config.qa_max_new_tokens,
                    n_samples=config.qa_n_samples, temperature=config.temperature, clusterer=config.clusterer,
                    p_true=True, seed=config.seed)


def throughput_items(config: BenchConfig, data_dir: str | None = None) -> list[Any]:
    """The questions of the records/hour runs: a seeded choice per dataset
    (``config.throughput_questions``, default ``config.n_questions``), datasets interleaved
    so that every worker of a layout gets a mix."""
    n = config.throughput_questions or config.n_questions
    per: list[list[Any]] = []
    for k, ds in enumerate(config.datasets):
        items = load_qa(ds, data_dir=data_dir)
        per.append([items[j] for j in pick(len(items), n, config.seed + k)])
    out = []
    for i in range(max((len(p) for p in per), default=0)):
        out += [p[i] for p in per if i < len(p)]
    return out


def study_sizes(datasets: list[str], data_dir: str | None = None) -> dict[str, int]:
    """Questions per dataset in the full study (every question of each dataset)."""
    return {ds: len(load_qa(ds, data_dir=data_dir)) for ds in datasets}


# --------------------------------------------------------------------------- worker side


def _clusterer(name: str, threshold: float) -> Any:
    return clusterer_for(name, threshold)[0]


def _die_with_parent() -> None:
    """Ask Linux to end this worker when the benchmark process that started it ends (a killed
    benchmark leaves no worker behind); elsewhere a no-op."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def throughput_worker(payload: dict[str, Any]) -> dict[str, Any]:
    """One worker process: load, warm up, say ``ready``, wait for ``go`` on stdin, then score
    the payload's questions with `gnuq_core.qa.engine.question_record`; returns the timings."""
    import torch

    _die_with_parent()
    torch.set_num_threads(int(payload["threads"]))
    t0 = time.perf_counter()
    loaded = load_model(payload["load"], device=payload["device"], dtype=payload["dtype"])
    load_seconds = time.perf_counter() - t0
    cfg = QAConfig(**payload["qa"])
    style = resolved_style(loaded, cfg)
    clusterer = _clusterer(cfg.clusterer, cfg.threshold) if cfg.n_samples > 0 else None
    items = [QAItem(**{**it, "correct_answers": tuple(it["correct_answers"]),
                       "incorrect_answers": tuple(it["incorrect_answers"])}) for it in payload["items"]]
    t0 = time.perf_counter()
    if items:
        warm = replace(cfg, max_new_tokens=min(2, cfg.max_new_tokens), n_samples=min(2, cfg.n_samples))
        question_record(loaded, items[0], warm, style=style, clusterer=clusterer, texts=False)
    warmup_seconds = time.perf_counter() - t0
    print("ready", flush=True)
    sys.stdout = sys.stderr  # nothing else may fill the pipe the parent no longer reads
    sys.stdin.readline()
    start = time.time()
    records = []
    for it in items:
        w0, c0 = time.perf_counter(), time.process_time()
        rec = question_record(loaded, it, cfg, style=style, clusterer=clusterer, texts=False)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        tim = rec.get("timings", {})
        records.append({"id": it.id, "dataset": it.dataset, "seconds": wall, "cpu_seconds": cpu,
                        "timings": {k: float(v) for k, v in tim.items() if isinstance(v, (int, float))},
                        "cpu_timings": {k: float(v) for k, v in (tim.get("cpu") or {}).items()},
                        "prompt_tokens": len(rec["generation"].get("prompt_ids", []) or []),
                        "answer_tokens": len(rec["generation"]["answer_ids"]),
                        "sample_tokens": [len(s["answer_ids"]) for s in rec.get("samples", [])]})
    return {"start": start, "end": time.time(), "load_seconds": load_seconds, "warmup_seconds": warmup_seconds,
            "threads": torch.get_num_threads(), "style": style, "records": records}


# --------------------------------------------------------------------------- parent side


def _item_payload(item: Any) -> dict[str, Any]:
    return {"id": item.id, "question": item.question, "correct_answers": list(item.correct_answers),
            "incorrect_answers": list(item.incorrect_answers), "dataset": item.dataset}


def measure_layout(load: str, items: list[Any], qa: Any, processes: int, threads: int, *, device: str = "cpu",
                   dtype: str = "float32", timeout: float = 7200.0) -> list[dict[str, Any]]:
    """Run ``processes`` workers of ``threads`` threads on disjoint shares of ``items`` at
    the same time; returns each worker's result (`throughput_worker`).

    ``load`` is what `gnuq_core.lm.models.load_model` loads in the workers (an alias or a
    saved model's folder; see `gnuq_core.bench.subjects.worker_spec`).
    """
    shards = [items[r::processes] for r in range(processes)]
    tmp = Path(tempfile.mkdtemp(prefix="gnuq-bench-throughput-"))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TRANSFORMERS_VERBOSITY": "error", "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"}
    procs: list[tuple[subprocess.Popen, Path, Path, Any]] = []
    try:
        for r, shard in enumerate(shards):
            payload = {"load": load, "device": device, "dtype": dtype, "threads": threads, "qa": asdict(qa),
                       "items": [_item_payload(it) for it in shard]}
            path, out, err = tmp / f"payload{r}.json", tmp / f"result{r}.json", tmp / f"stderr{r}.txt"
            path.write_text(json.dumps(payload))
            errf = open(err, "w")  # noqa: SIM115 - closed below, after the process ends
            p = subprocess.Popen([sys.executable, "-m", "gnuq_core.bench", "--throughput-worker", str(path),
                                  "--out", str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf,
                                 text=True, env=env)
            procs.append((p, out, err, errf))
        for p, _, err, errf in procs:  # wait until every worker has loaded and warmed up
            line = p.stdout.readline()
            while line and line.strip() != "ready":
                line = p.stdout.readline()
            if not line:
                p.wait(timeout=60)
                errf.close()
                raise RuntimeError(f"records/hour worker for {load} failed before starting:\n"
                                   f"{err.read_text()[-3000:]}")
        for p, *_ in procs:  # the common start
            p.stdin.write("go\n")
            p.stdin.close()
        results = []
        for p, out, err, errf in procs:
            rc = p.wait(timeout=timeout)
            errf.close()
            if rc != 0:
                raise RuntimeError(f"records/hour worker for {load} failed (exit {rc}):\n{err.read_text()[-3000:]}")
            results.append(json.loads(out.read_text()))
        return results
    finally:
        for p, _, _, errf in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            if not errf.closed:
                errf.close()
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()


def summarize_layout(workers: list[dict[str, Any]], sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """Records per hour, per-record seconds, the share of each pass and the full-study estimate
    of one layout's worker results."""
    recs = [{**r, "worker": i} for i, w in enumerate(workers) for r in w["records"]]
    wall = max(w["end"] for w in workers) - min(w["start"] for w in workers)
    n = len(recs)
    busy = float(sum(r["seconds"] for r in recs))
    passes = sorted({k for r in recs for k in r["timings"] if k != "total"})
    shares = {k: float(sum(r["timings"].get(k, 0.0) for r in recs) / busy) if busy > 0 else float("nan")
              for k in passes}
    shares["other"] = max(1.0 - sum(shares.values()), 0.0) if busy > 0 else float("nan")
    by_ds: dict[str, list[float]] = {}
    for r in recs:
        by_ds.setdefault(r["dataset"], []).append(r["seconds"])
    mean_ds = {d: float(np.mean(v)) for d, v in by_ds.items()}
    out: dict[str, Any] = {
        "processes": len(workers), "threads": workers[0]["threads"] if workers else None, "records": n,
        "wall_seconds": wall, "records_per_hour": 3600.0 * n / wall if wall > 0 else float("nan"),
        "seconds_per_record": wall / n if n else float("nan"), "record_seconds": summary([r["seconds"] for r in recs]),
        "busy_seconds": busy, "utilisation": busy / (len(workers) * wall) if wall > 0 else float("nan"),
        "shares": shares, "dataset_mean_seconds": mean_ds,
        "load_seconds": [w["load_seconds"] for w in workers], "warmup_seconds": [w["warmup_seconds"] for w in workers],
        "record_list": recs}
    if sizes and busy > 0:
        overall = busy / n
        work = sum(N * mean_ds.get(d, overall) for d, N in sizes.items())
        out["study_records"] = int(sum(sizes.values()))
        out["study_seconds"] = wall * work / busy
    return out


def measure_throughput(load: str, config: BenchConfig, items: list[Any], sizes: dict[str, int] | None = None,
                       log: Any = None, on_layout: Any = None) -> dict[str, Any]:
    """Records/hour of one model in every layout of ``config.layouts`` (same questions);
    ``on_layout(results so far)`` is called after each layout."""
    qa = qa_config(load, config)
    out: dict[str, Any] = {"qa_config": asdict(qa), "questions": [it.id for it in items], "layouts": {}}
    for processes, threads in config.layouts:
        key = layout_key(processes, threads)
        if log:
            log(f"[bench] records/hour, {key}: {len(items)} records")
        workers = measure_layout(load, items, qa, int(processes), int(threads), device=config.device,
                                 dtype=config.dtype)
        out["layouts"][key] = summarize_layout(workers, sizes)
        if on_layout:
            on_layout(out)
    best = max(out["layouts"], key=lambda k: out["layouts"][k]["records_per_hour"])
    out["best"] = {"layout": best, "records_per_hour": out["layouts"][best]["records_per_hour"],
                   "seconds_per_record": out["layouts"][best]["seconds_per_record"]}
    return out


def campaign(models: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Estimated wall time of the full study (every model, every question) per layout, from
    the models' records/hour runs; ``best`` is the fastest layout."""
    per: dict[str, dict[str, float]] = {}
    for spec, e in models.items():
        for key, lay in e.get("throughput", {}).get("layouts", {}).items():
            if "study_seconds" in lay:
                per.setdefault(key, {})[spec] = lay["study_seconds"]
    with_all = {k: v for k, v in per.items() if len(v) == len([e for e in models.values() if "throughput" in e])}
    layouts = {k: {"hours": sum(v.values()) / 3600.0, "per_model_hours": {s: x / 3600.0 for s, x in v.items()},
                   "records": int(sum(models[s]["throughput"]["layouts"][k]["study_records"] for s in v))}
               for k, v in with_all.items()}
    out: dict[str, Any] = {"layouts": layouts}
    if layouts:
        best = min(layouts, key=lambda k: layouts[k]["hours"])
        out["best"] = {"layout": best, **layouts[best]}
    return out
