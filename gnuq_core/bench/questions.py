"""The benchmark's questions: a fixed, seeded choice, with their answers prepared untimed.

Text models get questions from the QA datasets (`gnuq_core.qa.data.load_qa`), prompted as
the QA study prompts them (`gnuq_core.lm.prompts`). Synthetic-question models (random
weights, no text tokenizer) get random token ids of realistic length.

`prepare_question` runs, untimed, what the timed passes take as input: the greedy answer
(`gnuq_core.lm.decoding.generate`), N samples (`gnuq_core.lm.decoding.sample_answers`) and
the question text of the reference P(True) prompt, which lists the samples as
brainstormed candidates (Kadavath et al. 2022; Farquhar et al. 2024's ``p_true.py``);
the prompt itself is built by `gnuq_core.lm.baselines.p_true`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnuq_core.bench.config import BenchConfig
from gnuq_core.bench.subjects import Subject

__all__ = ["Question", "build_questions", "pick", "prepare_question", "with_candidates", "limits"]

# Instruction words around question and answer in a P(True) prompt: the length a synthetic
# P(True) prompt adds to the question and answer ids.
_P_TRUE_FRAME = 25


@dataclass
class Question:
    """One benchmark question, ready to time.

    Attributes
    ----------
    id, dataset, text : str
    prompt_ids : list[int]
        The formatted prompt.
    answer_ids : list[int]
        The greedy answer.
    answer : str
    sample_texts : list[str]
        The N samples (clustering input, P(True) candidates).
    sample_tokens : list[int]
        Their lengths.
    p_true_question : str
        Text models: the question with the samples as brainstormed candidates.
    p_true_ids, p_true_1pass_ids : list[int]
        Synthetic models: random ids as long as the reference and the zero-shot P(True)
        prompts would be.
    """

    id: str
    dataset: str
    text: str
    prompt_ids: list[int]
    answer_ids: list[int] = field(default_factory=list)
    answer: str = ""
    sample_texts: list[str] = field(default_factory=list)
    sample_tokens: list[int] = field(default_factory=list)
    p_true_question: str = ""
    p_true_ids: list[int] = field(default_factory=list)
    p_true_1pass_ids: list[int] = field(default_factory=list)


def pick(n_total: int, n: int, seed: int) -> list[int]:
    """A seeded choice of ``min(n, n_total)`` distinct indices, sorted."""
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(n_total, size=min(n, n_total), replace=False).tolist())


def with_candidates(question: str, candidates: list[str]) -> str:
    """The question followed by brainstormed candidate answers (the reference P(True) prompt's
    question part; ``"(empty)"`` stands for an empty answer)."""
    return question.strip() + "\nBrainstormed answers:\n" + "\n".join(c if c else "(empty)" for c in candidates)


def build_questions(subject: Subject, config: BenchConfig, data_dir: str | None = None,
                    n_questions: int | None = None) -> list[Question]:
    """The fixed question set: a seeded choice of ``n_questions`` (default
    ``config.n_questions``) per dataset for text models, or synthetic prompts of realistic
    length. Prompts only; `prepare_question` fills in the rest."""
    from gnuq_core.lm.prompts import encode_prompt, format_prompt

    n = config.n_questions if n_questions is None else n_questions
    out: list[Question] = []
    if subject.synthetic:
        rng = np.random.default_rng(config.seed)
        lo, hi = config.synthetic_prompt
        for i in range(n * max(1, len(config.datasets))):
            k = int(rng.integers(lo, hi + 1))
            ids = rng.integers(5, subject.vocab, size=k).tolist()
            out.append(Question(f"syn_{i}", "synthetic", f"<{k} random tokens>", ids))
        return out
    from gnuq_core.qa.data import load_qa

    for k, ds in enumerate(config.datasets):
        items = load_qa(ds, data_dir=data_dir)
        for j in pick(len(items), n, config.seed + k):
            it = items[j]
            ids = encode_prompt(subject.tokenizer, format_prompt(subject.tokenizer, it.question, subject.style),
                                subject.style)
            out.append(Question(it.id, ds, it.question, ids))
    return out


def limits(subject: Subject, config: BenchConfig) -> tuple[int, bool]:
    """``(token cap, stop at newline)`` of the decoding passes for this subject."""
    cap = config.synthetic_answer if subject.synthetic else config.max_new_tokens
    return cap, subject.style == "fewshot"


def prepare_question(subject: Subject, q: Question, config: BenchConfig) -> Question:
    """Greedy answer, N samples (seed = ``config.seed``) and the P(True) inputs of ``q``, untimed."""
    from gnuq_core.lm.decoding import generate, sample_answers

    cap, nl = limits(subject, config)
    gen = generate(subject.model, subject.tokenizer, q.prompt_ids, max_new_tokens=cap, stop_at_newline=nl)
    q.answer_ids, q.answer = list(gen.answer_ids), gen.answer
    samples = sample_answers(subject.model, subject.tokenizer, q.prompt_ids, config.n_samples,
                             temperature=config.temperature, max_new_tokens=cap, stop_at_newline=nl, seed=config.seed)
    q.sample_texts = [s.answer for s in samples]
    q.sample_tokens = [len(s.answer_ids) for s in samples]
    if subject.synthetic:
        rng = np.random.default_rng(config.seed + 1)
        n_ref = len(q.prompt_ids) + sum(q.sample_tokens) + len(q.sample_tokens) + 2 * len(q.answer_ids) + _P_TRUE_FRAME
        n_one = len(q.prompt_ids) + len(q.answer_ids) + _P_TRUE_FRAME
        q.p_true_ids = rng.integers(5, subject.vocab, size=n_ref).tolist()
        q.p_true_1pass_ids = rng.integers(5, subject.vocab, size=n_one).tolist()
    else:
        q.p_true_question = with_candidates(q.text, q.sample_texts)
    return q


def question_payload(q: Question) -> dict[str, Any]:
    """``q`` as a JSON-ready dict (for a worker process)."""
    from dataclasses import asdict

    return asdict(q)
