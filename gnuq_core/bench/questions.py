"""The benchmark's questions: a fixed, seeded choice, with their answers prepared untimed.

Text models get questions from the QA datasets (`gnuq_core.qa.data.load_qa`), prompted as
the QA study prompts them (`gnuq_core.lm.prompts`). Synthetic-question models (random
weights, no text tokenizer) get random token ids of realistic length.

`prepare_question` runs, untimed, what the timed passes take as input: the greedy answer
(`gnuq_core.lm.decoding.generate`), N samples (`gnuq_core.lm.decoding.sample_answers`) and
the question text of the reference P(True) prompt, which lists the samples as
brainstormed candidates (Kadavath et al. 2022; Farquhar et al. 2024's ``p_true.py``);
the prompt itself is built by `gnuq_core.lm.baselines.p_true`. The few-shot P(True) of
the reference implementation puts ``p_true_shots`` worked examples of the same format
before it (`fewshot_prefix`: other questions of the dataset, their reference answers
standing in for the brainstormed ones), and the reference semantic entropy's
entailment loop makes `gnuq_core.lm.entailment.reference_comparisons` comparisons for the
samples' clusters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnuq_core.bench.config import BenchConfig
from gnuq_core.bench.subjects import Subject
from gnuq_core.lm.clustering import exact_match_clusters
from gnuq_core.lm.decoding import generate, sample_answers
from gnuq_core.lm.entailment import reference_comparisons
from gnuq_core.lm.prompts import encode_prompt, format_prompt
from gnuq_core.qa.data import load_qa

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
    fewshot_prefix : str
        Text models: the worked examples of the few-shot P(True) prompt (`fewshot_prefix`).
    p_true_fewshot_question : str
        The prefix followed by the question with the samples and the greedy answer as
        brainstormed candidates (Farquhar et al.'s format).
    nli_pair : list[str]
        Text models: the first pair the reference entailment loop compares (question +
        sample 1, question + sample 2).
    nli_comparisons : int
        Comparisons the reference loop makes for the samples' clusters.
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
    fewshot_prefix: str = ""
    p_true_fewshot_question: str = ""
    nli_pair: list[str] = field(default_factory=list)
    nli_comparisons: int = 0


def pick(n_total: int, n: int, seed: int) -> list[int]:
    """A seeded choice of ``min(n, n_total)`` distinct indices, sorted."""
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(n_total, size=min(n, n_total), replace=False).tolist())


def with_candidates(question: str, candidates: list[str]) -> str:
    """The question followed by brainstormed candidate answers (the reference P(True) prompt's
    question part; ``"(empty)"`` stands for an empty answer)."""
    return question.strip() + "\nBrainstormed answers:\n" + "\n".join(c if c else "(empty)" for c in candidates)


def fewshot_example(question: str, candidates: list[str], answer: str, true: bool) -> str:
    """One worked example of the reference few-shot P(True) prompt (Farquhar et al. 2024's
    ``p_true.py``: brainstormed answers, a possible answer, and its A/B verdict)."""
    return (f"Question: {question.strip()}\nBrainstormed Answers: " + "\n".join(c.strip() for c in candidates)
            + f"\nPossible answer: {answer.strip()}\nIs the possible answer:\nA) True\nB) False\n"
            + f"The possible answer is: {'A' if true else 'B'}")


def fewshot_prefix(items: list[Any], shots: int, n_candidates: int, seed: int, exclude: set[str]) -> str:
    """The worked examples of a few-shot P(True) prompt: ``shots`` seeded questions of
    ``items`` (none of ``exclude``), each with ``n_candidates`` of its reference answers
    (correct and incorrect, cycled) as the brainstormed ones and, alternately, a correct
    (True) or an incorrect (False) possible answer."""
    pool = [it for it in items if it.id not in exclude and it.correct_answers]
    out = []
    for k, j in enumerate(pick(len(pool), shots, seed)):
        it = pool[j]
        answers = list(it.correct_answers) + list(it.incorrect_answers)
        candidates = [answers[i % len(answers)] for i in range(n_candidates)]
        true = k % 2 == 0 or not it.incorrect_answers
        out.append(fewshot_example(it.question, candidates, (it.correct_answers if true else it.incorrect_answers)[0],
                                   true))
    return "\n".join(out)


def build_questions(subject: Subject, config: BenchConfig, data_dir: str | None = None,
                    n_questions: int | None = None) -> list[Question]:
    """The fixed question set: a seeded choice of ``n_questions`` (default
    ``config.n_questions``) per dataset for text models, or synthetic prompts of realistic
    length. Prompts only; `prepare_question` fills in the rest."""
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

    for k, ds in enumerate(config.datasets):
        items = load_qa(ds, data_dir=data_dir)
        chosen = [items[j] for j in pick(len(items), n, config.seed + k)]
        prefix = (fewshot_prefix(items, config.p_true_shots, config.n_samples + 1, config.seed + 100 + k,
                                 {it.id for it in chosen}) if config.reference else "")
        for it in chosen:
            ids = encode_prompt(subject.tokenizer, format_prompt(subject.tokenizer, it.question, subject.style),
                                subject.style)
            out.append(Question(it.id, ds, it.question, ids, fewshot_prefix=prefix))
    return out


def limits(subject: Subject, config: BenchConfig) -> tuple[int, bool]:
    """``(token cap, stop at newline)`` of the decoding passes for this subject."""
    cap = config.synthetic_answer if subject.synthetic else config.max_new_tokens
    return cap, subject.style == "fewshot"


def prepare_question(subject: Subject, q: Question, config: BenchConfig, clusterer: Any = None) -> Question:
    """Greedy answer, N samples (seed = ``config.seed``), the P(True) inputs of ``q`` and,
    with ``config.reference``, the reference baselines' inputs (the entailment loop's
    comparisons counted on ``clusterer``'s clusters of the samples; default: exact match), untimed."""
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
        if config.reference:
            q.p_true_fewshot_question = "\n".join(
                x for x in (q.fewshot_prefix, f"Question: {q.text.strip()}\nBrainstormed Answers: "
                            + "\n".join(a.strip() or "(empty)" for a in [*q.sample_texts, q.answer])) if x)
            q.nli_pair = [f"{q.text.strip()} {a.strip()}" for a in q.sample_texts[:2]]
            q.nli_comparisons = reference_comparisons((clusterer or exact_match_clusters)(q.sample_texts))
    return q


def question_payload(q: Question) -> dict[str, Any]:
    """``q`` as a JSON-ready dict (for a worker process)."""
    from dataclasses import asdict

    return asdict(q)
