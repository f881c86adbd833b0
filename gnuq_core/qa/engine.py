"""Evaluate one question with every estimator.

Per question, the passes are (each timed): greedy generation; the gradient-norm
forward-backward on the greedy answer; P(True) (one forward); N temperature samples
(shared by predictive, length-normalised predictive and semantic entropy); clustering
of the samples. The gradient pass also gives the per-layer split of its norm
(``group_sq``: embeddings, each decoder block, other; they sum to ``grad_sq``). The record
keeps only the raw pass outputs (token log-probs, entropies, the gradient pass's log p and
squared norms, P(True), sampled answers with their log-probs and cluster ids): every score
is computed from it on read, without the model, as declared once in `gnuq_core.qa.scores`.

Samples are seeded per question (`question_seed`: the run's seed and the question id), so a
record is the same whichever process computes it: `gnuq_core.qa.study.run_dataset` (the one
route into stored records: chapter 06, the campaign and ``gnuq qa``) can be sharded over
``torchrun`` ranks (`gnuq_core.repro.shards`) and the merged file equals a one-process run.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict, replace
from typing import Any

from gnuq_core.lm import baselines as bl
from gnuq_core.lm.decoding import decode, teacher_forced
from gnuq_core.lm.gradient import forward_backward
from gnuq_core.lm.prompts import PromptError, encode_prompt, format_prompt
from gnuq_core.qa.config import QAConfig

__all__ = ["QAConfig", "evaluate_question", "gradient_fields", "question_record", "question_seed", "record_groups",
           "resolved_style", "rescore_answers", "storable", "clean"]

def clean(obj: Any) -> Any:
    """Replace non-finite floats by None, recursively (JSON has no inf/NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return obj


class _Clock:
    """Wall-clock and process-CPU seconds of a block (CPU time is robust on a shared machine)."""

    def __init__(self, wall: dict[str, float], cpu: dict[str, float], key: str) -> None:
        self.wall, self.cpu, self.key = wall, cpu, key

    def __enter__(self) -> "_Clock":
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall[self.key] = time.perf_counter() - self.t0
        self.cpu[self.key] = time.process_time() - self.c0


def record_groups(groups: str) -> str:
    """The parameter groups of a record's gradient pass for the preset ``groups``.

    ``"all"`` becomes ``"per_block"`` (`gnuq_core.lm.anatomy.per_block_groups`): the same
    parameters, split into ``embeddings``, ``block 00`` … and ``other``, so one pass gives
    the total and the per-layer norms. Other presets are kept (one group).
    """
    return "per_block" if groups == "all" else groups


def question_seed(seed: int, question_id: str) -> int:
    """The sampling seed of one question: from the run's ``seed`` and the question's id only
    (never the process or the position in a shard), so its samples are the same in every run."""
    digest = hashlib.sha256(f"{seed}:{question_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1  # a non-negative int64


def evaluate_question(model: Any, tokenizer: Any, question: str, config: QAConfig, *, style: str,
                      clusterer: Any = None) -> dict[str, Any]:
    """One question's raw record: what the expensive passes produce (a JSON-ready dict).

    ``generation``: the greedy answer (token ids, log-probs, entropies, stop token);
    ``log_p``, ``grad_sq`` and ``group_sq``: the gradient pass on it (the answer's log p as
    that pass computes it, ``||grad log p||^2`` over the parameters of ``config.groups`` and
    its split by group, `record_groups`; they sum to ``grad_sq``); ``p_true``: the P(True)
    pass; ``samples``: the N samples (token ids, log-probs, stop token) with their meaning
    clusters. Every score is a function of these fields, computed on read
    (`gnuq_core.qa.scores.score_record`). The samples use ``config.seed`` (`question_record`
    passes the question's own seed).

    ``timings`` holds wall-clock seconds per pass: ``generate``, ``gradient``, ``p_true``,
    ``sample`` (shared by the three sampling baselines) and ``cluster`` (semantic entropy
    only); ``timings["cpu"]`` the process CPU seconds (all threads) of the same passes,
    which stay meaningful on a shared machine. `question_record` adds ``total``.
    """
    timings: dict[str, float] = {}
    cpu: dict[str, float] = {}
    ids = encode_prompt(tokenizer, format_prompt(tokenizer, question, style), style)
    # one prompt prefill for the greedy answer and the samples; decode times "generate" and "sample"
    gen, samples = decode(model, tokenizer, ids, config.n_samples, temperature=config.temperature,
                          max_new_tokens=config.max_new_tokens, stop_at_newline=(style == "fewshot"),
                          seed=config.seed, timings=timings, cpu_timings=cpu)
    with _Clock(timings, cpu, "gradient"):
        record: dict[str, Any] = {"answer": gen.answer, "generation": asdict(gen),
                                  **gradient_fields(model, ids, gen.answer_ids, config)}
    if config.p_true:
        with _Clock(timings, cpu, "p_true"):
            record["p_true"] = bl.p_true(model, tokenizer, question, gen.answer, style=style)["p_true"]
    if config.n_samples > 0:
        with _Clock(timings, cpu, "cluster"):
            clusters = clusterer([s.answer for s in samples])
        record["samples"] = [{"answer": s.answer, "answer_ids": s.answer_ids, "token_log_probs": s.token_log_probs,
                              "stop_reason": s.stop_reason, "stop_log_prob": s.stop_log_prob,
                              "stop_token_id": s.stop_token_id, "cluster": c} for s, c in zip(samples, clusters)]
    record["timings"] = {**timings, "cpu": cpu}
    return clean(record)


def gradient_fields(model: Any, prompt_ids: list[int], answer_ids: list[int], config: QAConfig) -> dict[str, Any]:
    """The gradient pass's raw fields of a record: ``log_p`` (the answer's log-probability as
    the pass computes it), ``grad_sq`` and ``group_sq`` (`gnuq_core.lm.gradient.forward_backward`)."""
    gp = forward_backward(model, prompt_ids, answer_ids, groups=record_groups(config.groups), per_group=True)
    return {"log_p": math.fsum(gp.token_log_probs), "grad_sq": gp.grad_sq, "group_sq": gp.group_sq}


def rescore_answers(model: Any, tokenizer: Any, question: str, stored: dict[str, Any], config: QAConfig, *,
                    style: str, clusterer: Any = None) -> dict[str, Any]:
    """``stored`` with every field that is exact given its answers recomputed from them.

    The greedy answer and the samples are taken *as stored* (their tokens are the chaotic
    part of a record: a sampled token near a tie can change on another CPU); everything
    computed from them is recomputed: the gradient pass on the greedy answer (``log_p``,
    ``grad_sq``, ``group_sq``), its teacher-forced token log-probs and entropies and the
    log-prob of its stop token, P(True) of its text, each sample's token and stop log-probs
    (teacher-forced, in one batch) and meaning clusters. The results store checks a record
    made on another platform this way (and ``gnuq store verify --all`` every record): the
    same numbers up to float rounding.
    """
    ids = encode_prompt(tokenizer, format_prompt(tokenizer, question, style), style)
    gen = dict(stored["generation"])
    samples = [dict(x) for x in stored.get("samples") or []]

    def with_stop(answer_ids: list[int], stop: int | None) -> list[int]:
        return list(answer_ids) + ([int(stop)] if stop is not None else [])

    scored = teacher_forced(model, ids, [with_stop(gen["answer_ids"], gen.get("stop_token_id"))]
                            + [with_stop(x["answer_ids"], x.get("stop_token_id")) for x in samples])
    n = len(gen["answer_ids"])
    lps, ents = scored[0]
    gen.update(token_log_probs=lps[:n], token_entropies=ents[:n],
               stop_log_prob=lps[n] if gen.get("stop_token_id") is not None else None)
    for x, (slp, _) in zip(samples, scored[1:]):
        m = len(x["answer_ids"])
        x.update(token_log_probs=slp[:m], stop_log_prob=slp[m] if x.get("stop_token_id") is not None else None)
    record: dict[str, Any] = {**stored, "generation": gen, **gradient_fields(model, ids, gen["answer_ids"], config)}
    if "p_true" in stored:
        record["p_true"] = bl.p_true(model, tokenizer, question, stored["answer"], style=style)["p_true"]
    if samples:
        clusters = clusterer([x["answer"] for x in samples]) if clusterer is not None else [x["cluster"] for x in samples]
        record["samples"] = [{**x, "cluster": c} for x, c in zip(samples, clusters)]
    return clean(record)


def storable(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` without its prompt token ids, which spell out the question: what the results
    store keeps (the prompt is re-encoded from the question on reading)."""
    generation = {k: v for k, v in record["generation"].items() if k != "prompt_ids"}
    return {**record, "generation": generation}


def question_record(loaded: Any, item: Any, config: QAConfig, *, style: str, clusterer: Any = None,
                    texts: bool = True) -> dict[str, Any]:
    """One question's record: `evaluate_question` plus its dataset, style and wall time.

    With ``texts`` (the command line's output files) the record also carries the question
    and the reference answers (``correctness_inputs``), so it can be graded on its own;
    without (the repository's results store) it holds only ids, generated answers and
    numbers, and is graded against the dataset by id. The samples are seeded with
    `question_seed` of ``config.seed`` and the item's id.
    """
    t0 = time.perf_counter()
    try:
        rec = evaluate_question(loaded.model, loaded.tokenizer, item.question,
                                replace(config, seed=question_seed(config.seed, item.id)), style=style,
                                clusterer=clusterer)
    except PromptError as err:  # a run of many questions stops here: say which one
        raise PromptError(f"question {item.id}: {err}") from None
    rec["timings"]["total"] = time.perf_counter() - t0
    head: dict[str, Any] = {"dataset": item.dataset, "style": style}
    if texts:
        head.update(question=item.question,
                    correctness_inputs={"correct_answers": list(item.correct_answers),
                                        "incorrect_answers": list(item.incorrect_answers)})
    return {**head, **rec}


def resolved_style(loaded: Any, config: QAConfig) -> str:
    """The prompt style a run uses: ``config.style``, or the model's own for ``"auto"``."""
    return loaded.prompt_style if config.style == "auto" else config.style
