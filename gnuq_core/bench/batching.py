"""Answers per second against batch size: `gnuq_core.lm.batched.batched_forward_backward`
scoring the same answers B at a time.

The benchmark's questions, with their prepared greedy answers, are cycled to
``BenchConfig.batch_pairs`` (prompt, answer) pairs; every batch size in
``BenchConfig.batch_sizes`` scores all of them (``pairs / B`` passes), the sizes in a fresh
random order per repeat, after one untimed warm-up pass per size. Per size: the median
wall seconds, answers per second, and the speed-up over B = 1 (one answer per pass, the
batched code path with a batch of one).

Beside each timed size, in the same rounds, the public boundary's checks
(`gnuq_core.lm.scoring.check_many`: the model, the tokenizer, the options, every prompt and
answer text) run on the same pairs as text, one call per batch, so that ``checks_share``
(checks ÷ passes, medians) says what validating at the boundary costs the batched pass
(NaN for a synthetic subject: it has no text to check).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from gnuq_core.bench import clock
from gnuq_core.bench.config import BenchConfig
from gnuq_core.bench.questions import Question
from gnuq_core.bench.subjects import Subject
from gnuq_core.lm.batched import batched_forward_backward
from gnuq_core.lm.scoring import check_many

__all__ = ["batch_throughput"]


def _score_all(model: Any, prompts: list[list[int]], answers: list[list[int]], size: int) -> None:
    for s in range(0, len(prompts), size):
        batched_forward_backward(model, prompts[s:s + size], answers[s:s + size])


def _check_all(model: Any, tokenizer: Any, prompts: list[str], answers: list[str | None], size: int) -> None:
    for s in range(0, len(prompts), size):
        check_many(model, tokenizer, prompts[s:s + size], answers[s:s + size], batch_size=size, progress=False)


def batch_throughput(subject: Subject, questions: list[Question], config: BenchConfig,
                     progress: bool = True) -> list[dict[str, Any]]:
    """One row per batch size: ``{"batch_size", "pairs", "seconds", "answers_per_second",
    "speedup_over_1", "runs", "checks_seconds", "checks_share"}`` (empty when no question has an
    answer or no size is asked for)."""
    from tqdm.auto import tqdm

    usable = [q for q in questions if q.answer_ids]
    if not usable or not config.batch_sizes:
        return []
    n = config.batch_pairs
    prompts = [list(usable[i % len(usable)].prompt_ids) for i in range(n)]
    answers = [list(usable[i % len(usable)].answer_ids) for i in range(n)]
    prompt_texts = [usable[i % len(usable)].text for i in range(n)]
    answer_texts = [usable[i % len(usable)].answer.strip() or None for i in range(n)]  # None: to generate
    sizes = sorted({min(b, n) for b in config.batch_sizes})
    for b in sizes:  # warm-up: one pass per size
        _score_all(subject.model, prompts[:b], answers[:b], b)
    rng = np.random.default_rng(config.seed + 13)
    runs: dict[int, list[float]] = {b: [] for b in sizes}
    checks: dict[int, list[float]] = {b: [] for b in sizes}
    for _ in tqdm(range(config.batch_repeats), desc=f"{subject.spec} batching", disable=not progress):
        for b in rng.permutation(sizes):
            runs[int(b)].append(clock.timed(functools.partial(_score_all, subject.model, prompts, answers, int(b)),
                                            subject.device)[1])
            if not subject.synthetic:  # a synthetic subject has no text to check
                checks[int(b)].append(clock.timed(functools.partial(_check_all, subject.model, subject.tokenizer,
                                                                    prompt_texts, answer_texts, int(b)))[1])
    base = float(np.median(runs[sizes[0]])) if sizes[0] == 1 else float("nan")
    rows = []
    for b in sizes:
        sec = float(np.median(runs[b]))
        checked = float(np.median(checks[b])) if checks[b] else float("nan")
        rows.append({"batch_size": b, "pairs": n, "seconds": sec, "answers_per_second": n / sec,
                     "speedup_over_1": base / sec, "runs": runs[b], "checks_seconds": checked,
                     "checks_share": checked / sec})
    return rows
