"""The efficiency benchmark's driver: `run` measures everything a `BenchConfig` asks for.

Per model: the timed passes (`gnuq_core.bench.passes`) on a fixed set of questions, their
summaries (`gnuq_core.bench.summary`), answers per second against batch size
(`gnuq_core.bench.batching`), cost against length and the answer-length factor of the
speed-up (`gnuq_core.bench.scaling`),
a profiler table (`gnuq_core.bench.profiler`), full against symmetric Gram products
(`gnuq_core.bench.grams`), records per hour of the whole QA pipeline
(`gnuq_core.bench.throughput`); then peak memory (`gnuq_core.bench.memory`, a separate
process on CPU), the size ladder, the full-study estimate and the targets. ``section_seconds``
records the wall time of each part (per model and overall), so that a run that takes too
long (the efficiency chapter's share of the book's budget) shows where to cut.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import shutil
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import numpy as np

from gnuq_core.bench import clock
from gnuq_core.bench.batching import batch_throughput
from gnuq_core.bench.side_by_side import peer_throughput
from gnuq_core.bench.config import SCHEMA, BenchConfig
from gnuq_core.bench.grams import gram_kernels
from gnuq_core.bench.memory import memory_profiles
from gnuq_core.bench.passes import beyond_reference_questions, clusterer_for, time_questions
from gnuq_core.bench.profiler import profile_ops
from gnuq_core.bench.questions import Question, build_questions
from gnuq_core.bench.scaling import answer_length_factor, length_sweep, size_ladder
from gnuq_core.bench.subjects import Subject, gradient_bytes, load_subject, worker_spec
from gnuq_core.bench.summary import summarize_model, targets
from gnuq_core.bench.throughput import campaign, measure_throughput, study_sizes, throughput_items
from gnuq_core.repro.provenance import git_state, machine, package_versions

__all__ = ["run", "environment", "Sections"]


class Sections:
    """Wall seconds of named parts of a run, in the order they ran.

    ``with sections("passes"):`` adds the block's wall time to ``sections.seconds["passes"]``
    (also when the block raises).
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0


def environment(device: str) -> dict[str, Any]:
    """Machine, versions and commit for the results file (`gnuq_core.repro.provenance`), with
    the measurement conditions: device, torch threads and the load average at the start."""
    import torch

    info: dict[str, Any] = {**machine(), "device": device, "torch_threads": torch.get_num_threads()}
    try:
        info["load_average"] = list(os.getloadavg())
    except OSError:
        pass
    versions = {"python": platform.python_version(), **package_versions(("torch", "transformers", "numpy"))}
    return {"machine": info, "versions": versions, "git": git_state()}


def _quiet_loading() -> None:
    """No "Loading weights" progress bars (they would land in a notebook as stderr output)."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def _median_sample_tokens(qs: list[Question]) -> int:
    """The median length of the answers sampled for ``qs`` (tokens; 0 if none were)."""
    lengths = [n for q in qs for n in q.sample_tokens]
    return max(1, round(float(np.median(lengths)))) if lengths else 0


def _model_entry(sub: Subject, qs: list[Question], config: BenchConfig, clusterer: Any, progress: bool,
                 say: Callable[[str], None], sections: Sections) -> dict[str, Any]:
    def part(name: str) -> contextlib.AbstractContextManager[None]:
        return sections(f"{sub.spec}: {name}")

    with part("timed passes (inputs prepared untimed)"):
        recs = time_questions(sub, qs, config, clusterer, progress)
    entry: dict[str, Any] = {"params": sub.params, "gradient_bytes": gradient_bytes(sub.model), "style": sub.style,
                             "synthetic": sub.synthetic, "load_seconds": sub.load_seconds,
                             "architecture": type(sub.model).__name__, "questions": recs,
                             "summary": summarize_model(recs, config.seed),
                             "summary_cpu": summarize_model(recs, config.seed, "cpu")}
    if config.batch_sizes:
        say(f"[bench] {sub.spec}: batched scoring")
        with part("batched scoring"):
            entry["batching"] = batch_throughput(sub, qs, config, progress)
    if config.peer_sizes:
        say(f"[bench] {sub.spec}: gnuq against Opacus, torch.func and the floor")
        with part("peers side by side"):
            entry["peers"] = peer_throughput(sub, qs, config, progress)
    rep = sorted(qs, key=lambda q: len(q.prompt_ids))[len(qs) // 2]  # median-length prompt
    if config.answer_lengths or config.prompt_lengths:
        say(f"[bench] {sub.spec}: length sweep")
        with part("sweeps"):
            entry["sweeps"] = length_sweep(sub, config, rep.prompt_ids, progress)
    short = _median_sample_tokens(qs)
    if config.long_answer_tokens > short > 0:
        say(f"[bench] {sub.spec}: answer-length factor")
        with part("answer-length factor"):
            prompts = [q.prompt_ids for q in qs if not beyond_reference_questions(q, qs, config)]
            f = answer_length_factor(sub, config, prompts, short, progress)
        entry["summary"]["gap"][f"answers of {f['long']} tokens, not {short} (the samples' median)"] = f
    elif config.long_answer_tokens:
        say(f"[bench] {sub.spec}: no answer-length factor: the sampled answers' median ({short} tokens) is not "
            f"shorter than long_answer_tokens={config.long_answer_tokens}")
    if config.profile:
        with part("profile"):
            entry["profile"] = profile_ops(sub, rep)
    if config.gram_repeats:
        say(f"[bench] {sub.spec}: Gram kernels")
        with part("Gram kernels"):
            entry["grams"] = gram_kernels(sub.model, rep.prompt_ids, rep.answer_ids, repeats=config.gram_repeats,
                                          device=sub.device, seed=config.seed)
    return entry


def run(config: BenchConfig, *, data_dir: str | None = None, progress: bool = True,
        log: Callable[[str], None] | None = None,
        checkpoint: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the whole benchmark; returns the JSON-ready results dict.

    ``checkpoint(results)`` is called after each model (and at the end) with the results
    so far, so that a run stopped by a time limit still leaves its finished models.
    """
    import torch

    started = time.time()
    say = log or (lambda s: None)
    res: dict[str, Any] = {"schema": SCHEMA,
                           "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                           "config": asdict(config), "models": {}}
    _quiet_loading()
    with clock.torch_threads(config.threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res.update(environment(config.device))
        clusterer, res["clusterer"] = clusterer_for(config.clusterer)
        mem_jobs: list[tuple[Subject, Question]] = []
        sizes: dict[str, int] | None = None
        overall = Sections()
        res["section_seconds"] = overall.seconds
        for spec in config.models:
            say(f"[bench] {spec}: loading")
            with overall(f"{spec}: loading"):
                sub = load_subject(spec, config.device, config.dtype, config.seed)
                qs = build_questions(sub, config, data_dir)
            entry = _model_entry(sub, qs, config, clusterer, progress, say, overall)
            res["models"][spec] = entry

            def save(tp: dict[str, Any] | None = None, entry: dict[str, Any] = entry) -> None:
                if tp is not None:
                    entry["throughput"] = tp
                if checkpoint:
                    checkpoint({**res, "targets": targets(res), "partial": True})

            save()
            load = worker_spec(sub) if config.throughput else None
            if load is not None:
                say(f"[bench] {spec}: records per hour")
                sizes = sizes or study_sizes(config.datasets, data_dir)
                try:
                    with overall(f"{spec}: records per hour"):
                        entry["throughput"] = measure_throughput(load, config, throughput_items(config, data_dir),
                                                                 sizes, say, on_layout=save)
                finally:
                    if load != spec:  # a folder saved for the workers
                        shutil.rmtree(load, ignore_errors=True)
            if config.memory:
                rep = sorted(qs, key=lambda q: len(q.prompt_ids))[len(qs) // 2]
                mem_jobs.append((Subject(spec, None, None, sub.style, sub.synthetic, sub.params, sub.device), rep))
            sub = None  # free the model before the next one loads
            save()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        if mem_jobs:
            say("[bench] memory")
            if config.device.startswith("cuda"):  # in-process: reload each model
                mem_jobs = [(load_subject(s.spec, config.device, config.dtype, config.seed), q) for s, q in mem_jobs]
            with overall("memory"):
                for (s, _), m in zip(mem_jobs, memory_profiles(mem_jobs, config)):
                    res["models"][s.spec]["memory"] = m
        if config.ladder:
            say("[bench] size ladder")
            with overall("size ladder"):
                res["ladder"] = size_ladder(config, progress)
    res["campaign"] = campaign(res["models"])
    if sizes:
        res["campaign"]["study_sizes"] = sizes
    res["targets"] = targets(res)
    res["wall_seconds"] = time.time() - started
    return res
