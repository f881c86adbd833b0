"""Score an LLM answer: one forward-backward pass gives epistemic, aleatoric and combined.

For an answer y = (y_1..y_T) to a prompt x, the prediction is either

* ``"sequence"``: p = prod_t p(y_t | y_<t, x)  (log p = sum_t log p_t), or
* ``"normalized"``: the length-normalised geometric mean p = exp(mean_t log p_t).

Both come from the same backward pass: grad log p_norm = grad log p_seq / T. Epistemic is
``||grad_theta p||^2 = p^2 ||grad_theta log p||^2`` computed in log space, aleatoric is
``p (1 - p)`` and combined is their sum (law of total variance, as in the paper): the
estimator's one formula, `gnuq_core.estimators.sequence_and_normalized`.

The passes live in `gnuq_core.lm.decoding` (greedy answer, samples) and
`gnuq_core.lm.gradient` (the forward–backward pass, ``backend="fast"`` or ``"reference"``);
parameter groups in `gnuq_core.lm.anatomy`. This module is the front door: `score` for one
answer, `score_many` for many (given answers scored several per pass, `gnuq_core.lm.batched`).

Prompt longer than the context window: an error (not truncation), because cutting the
start of a prompt silently changes the question (and drops the few-shot examples or the
chat header). The message says how many tokens are too many.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from tqdm.auto import tqdm

from gnuq_core.estimators import sequence_and_normalized
from gnuq_core.lm.batched import batchable, batched_forward_backward
from gnuq_core.lm.decoding import Generation, generate
from gnuq_core.lm.gradient import GradientPass, forward_backward, reference_pass
from gnuq_core.lm import validate
from gnuq_core.lm.prompts import STYLES, encode_answer, encode_prompt, format_prompt
from gnuq_core.options import OPTIONS

__all__ = ["ScoreResult", "PREDICTIONS", "BACKENDS", "BatchingFallback", "score", "score_many", "check_many",
           "to_frame"]

PREDICTIONS = ("sequence", "normalized")
BACKENDS = ("fast", "reference")


class BatchingFallback(UserWarning):
    """`score_many` scores one answer at a time because a selected parameter's module type has no
    per-answer norm rule (`gnuq_core.estimators.norm_rules.register_norm_rule` adds one): same numbers, slower."""


@dataclass
class ScoreResult:
    """Scored answer.

    Attributes
    ----------
    answer : str
    answer_ids : list[int]
    token_log_probs : list[float]
    sequence : Uncertainty
        For p = prod_t p_t.
    normalized : Uncertainty
        For p = exp(mean_t log p_t).
    prediction : str
        Which of the two `uncertainty` returns.
    generation : Generation or None
        The greedy pass, when the answer was generated.
    timings : dict[str, float]
        Seconds for ``generate`` and ``gradient``.
    """

    answer: str
    answer_ids: list[int]
    token_log_probs: list[float]
    sequence: Any
    normalized: Any
    prediction: str = "sequence"
    generation: Generation | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def uncertainty(self) -> Any:
        """The `Uncertainty` of the chosen prediction."""
        return self.sequence if self.prediction == "sequence" else self.normalized

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (infinite log10 values become None: `Uncertainty.to_dict`)."""
        return {"answer": self.answer, "answer_ids": self.answer_ids, "token_log_probs": self.token_log_probs,
                "prediction": self.prediction, "sequence": self.sequence.to_dict(),
                "normalized": self.normalized.to_dict(),
                "generation": asdict(self.generation) if self.generation else None, "timings": self.timings}


def to_frame(results: Sequence[ScoreResult]) -> Any:
    """A pandas DataFrame of `score`/`score_many` results, one row per answer, in order.

    Columns: ``answer``, ``answer_tokens``, ``prediction`` (which reading of p), the chosen
    reading's `Uncertainty` fields (``log_p`` … ``combined``; rank by ``log10_epistemic``,
    which does not underflow), ``group:<name>`` per requested parameter group, and the
    seconds of each pass (``seconds:generate``, ``seconds:gradient``).
    """
    import pandas as pd

    if not isinstance(results, (list, tuple)) or not all(isinstance(r, ScoreResult) for r in results):
        raise validate.InputTypeError("results: pass a list of ScoreResult, as score_many returns (for one result "
                                      "of score, [result])")
    rows = []
    for r in results:
        fields = r.uncertainty._asdict()
        groups = fields.pop("group_sq_norms")
        rows.append({"answer": r.answer, "answer_tokens": len(r.answer_ids), "prediction": r.prediction, **fields,
                     **{f"group:{g}": v for g, v in groups.items()},
                     **{f"seconds:{k}": v for k, v in r.timings.items()}})
    return pd.DataFrame(rows)


def score(model: Any, tokenizer: Any, prompt: str, answer: str | None = None, *, style: str = "chat",
          brief: bool = True, max_new_tokens: int = 32, groups: Any = None, per_group: bool = False,
          prediction: str = "sequence", backend: str = "fast", generation: Generation | None = None
          ) -> ScoreResult:
    """Answer a prompt (greedy, unless ``answer`` is given) and score it in one forward-backward pass.

    Parameters
    ----------
    model, tokenizer
        A causal LM (eval mode) and its tokenizer.
    prompt : str
        The question; it is formatted with `gnuq_core.lm.prompts.format_prompt`.
    answer : str, optional
        Score this answer instead of generating one.
    style : {"chat", "fewshot"}
        Prompt format; few-shot generation stops at the first newline.
    brief : bool
        Chat mode: ask for an answer "in a few words".
    max_new_tokens : int
        Cap on generated tokens.
    groups, per_group
        Parameter groups for the epistemic term (`resolve_groups`) and per-group norms.
    prediction : {"sequence", "normalized"}
        Which p `ScoreResult.uncertainty` refers to (both are always computed).
    backend : {"fast", "reference"}
        ``"fast"`` is the efficient path; ``"reference"`` the plain full-gradient one.
    generation : Generation, optional
        A cached greedy pass to re-score (skips generation).

    Returns
    -------
    ScoreResult

    Raises
    ------
    InputTypeError
        (a `TypeError`) before any pass, for an argument of the wrong type: a prompt that is
        not a str, a model that is not a causal LM with an LM head (a masked LM, a seq2seq
        model, a plain ``nn.Module``), a tokenizer that is not one (`gnuq_core.lm.validate`).
    ValueError
        Before any pass, for an empty or invisible prompt or answer, an unknown option, weights
        on the meta device or in an integer dtype; `PromptError` for a prompt too long for the
        context.
    """
    _check_arguments(model, tokenizer, style, brief, max_new_tokens, groups, per_group, prediction, backend)
    validate.one_text(prompt, "prompt")
    validate.one_text(answer, "answer", what="answer", optional=True)
    if generation is not None and not isinstance(generation, Generation):
        raise validate.InputTypeError(f"generation is a {type(generation).__name__}: pass the Generation a "
                                      "previous score(...).generation holds, or None")
    prompt_ids, answer_ids, answer_text, generation = _answer(model, tokenizer, prompt, answer, style, brief,
                                                              max_new_tokens, generation)
    run = forward_backward if backend == "fast" else reference_pass
    gp = run(model, prompt_ids, answer_ids, groups=groups, per_group=per_group)
    return _result(answer_text, answer_ids, gp, prediction, generation)


def _check_arguments(model: Any, tokenizer: Any, style: str, brief: bool, max_new_tokens: int, groups: Any,
                     per_group: bool, prediction: str, backend: str) -> None:
    """The arguments `score` and `score_many` share, checked once (`gnuq_core.lm.validate`)."""
    validate.causal_lm(model)
    validate.tokenizer(tokenizer)
    validate.choice(style, "style", STYLES)
    validate.flag(brief, "brief")
    OPTIONS["max_new_tokens"].check("max_new_tokens", max_new_tokens)
    validate.group_spec(groups)
    validate.flag(per_group, "per_group")
    validate.choice(prediction, "prediction", PREDICTIONS)
    validate.choice(backend, "backend", BACKENDS)


def _answer(model: Any, tokenizer: Any, prompt: str, answer: str | None, style: str, brief: bool,
            max_new_tokens: int, generation: Generation | None
            ) -> tuple[list[int], list[int], str, Generation | None]:
    """Prompt ids, answer ids, answer text and the greedy pass (None for a given answer)."""
    prompt_ids = encode_prompt(tokenizer, format_prompt(tokenizer, prompt, style, brief=brief), style)
    if answer is not None:
        return prompt_ids, list(encode_answer(tokenizer, answer, style)), answer.strip(), None
    if generation is None:
        generation = generate(model, tokenizer, prompt_ids, max_new_tokens=max_new_tokens,
                              stop_at_newline=(style == "fewshot"))
    return prompt_ids, list(generation.answer_ids), generation.answer, generation


def _result(answer_text: str, answer_ids: list[int], gp: GradientPass, prediction: str,
            generation: Generation | None) -> ScoreResult:
    timings = {"generate": generation.seconds} if generation is not None else {}
    timings["gradient"] = gp.seconds
    seq, norm = sequence_and_normalized(gp.token_log_probs, gp.grad_sq, gp.group_sq)
    return ScoreResult(answer_text, answer_ids, gp.token_log_probs, seq, norm, prediction, generation, timings)


def check_many(model: Any, tokenizer: Any, prompts: Any, answers: Any = None, *, style: str = "chat",
               brief: bool = True, max_new_tokens: int = 32, groups: Any = None, per_group: bool = False,
               prediction: str = "sequence", backend: str = "fast", batch_size: int = 16,
               progress: bool = True) -> tuple[list[str], list[str | None]]:
    """`score_many`'s checks of its arguments, all of them, before any pass: the prompts and the
    answers as lists of equal length (None for an answer to generate).

    Its own function so that the benchmark can time the public boundary beside the passes
    (`gnuq_core.bench.batching`). Raises as `score_many` does.
    """
    _check_arguments(model, tokenizer, style, brief, max_new_tokens, groups, per_group, prediction, backend)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}: use a whole number ≥ 1")
    validate.flag(progress, "progress")
    checked = validate.text_list(prompts, "prompts")
    paired = (validate.text_list(answers, "answers", what="answer", optional=True) if answers is not None
              else [None] * len(checked))
    validate.same_length(prompts=checked, answers=paired)
    return cast("list[str]", checked), paired


def score_many(model: Any, tokenizer: Any, prompts: Sequence[str], answers: Sequence[str | None] | None = None,
               *, style: str = "chat", brief: bool = True, max_new_tokens: int = 32, groups: Any = None,
               per_group: bool = False, prediction: str = "sequence", backend: str = "fast", batch_size: int = 16,
               progress: bool = True) -> list[ScoreResult]:
    """`score` for many (prompt, answer) pairs: the same `ScoreResult` objects (to float rounding).

    A missing answer (None) is generated greedily first, one prompt at a time. Then the
    gradient passes run ``batch_size`` answers at a time in one forward–backward pass
    (`gnuq_core.lm.batched`, exact per-answer norms) where the model allows it
    (`gnuq_core.lm.batched.batchable`: every selected parameter's module type has a norm
    rule); otherwise, and with ``backend="reference"`` or ``batch_size=1``, one at a time.
    Arguments as in `score`; ``prompts`` a list of str and ``answers`` a list of the same
    length (str, or None to generate) or None (generate all); ``batch_size`` answers per pass
    (≥ 1; larger batches pay off most on a GPU). When the model cannot be batched, one
    `BatchingFallback` warning says which module type lacks a rule.

    Raises
    ------
    InputTypeError, ValueError
        As `score` does, before any pass; also for a bare ``str`` given as ``prompts`` or
        ``answers`` and for lists of different lengths (`gnuq_core.lm.validate`).
    """
    prompts, answers = check_many(model, tokenizer, prompts, answers, style=style, brief=brief,
                                  max_new_tokens=max_new_tokens, groups=groups, per_group=per_group,
                                  prediction=prediction, backend=backend, batch_size=batch_size, progress=progress)
    pairs = [_answer(model, tokenizer, p, a, style, brief, max_new_tokens, None)
             for p, a in tqdm(list(zip(prompts, answers)), desc="answering", disable=not progress or
                              all(a is not None for a in answers))]
    batched = backend == "fast" and batch_size > 1 and len(pairs) > 1
    if batched:
        why = batchable(model, groups)
        if why is not None:
            warnings.warn(f"score_many scores one answer at a time (slower): {why}", BatchingFallback, stacklevel=2)
            batched = False
    out: list[ScoreResult] = []
    step = batch_size if batched else 1
    for s in tqdm(range(0, len(pairs), step), desc="scoring", disable=not progress):
        chunk = pairs[s:s + step]
        if batched:
            passes = batched_forward_backward(model, [c[0] for c in chunk], [c[1] for c in chunk], groups=groups,
                                              per_group=per_group)
        else:
            run = forward_backward if backend == "fast" else reference_pass
            passes = [run(model, c[0], c[1], groups=groups, per_group=per_group) for c in chunk]
        out += [_result(text, ids, gp, prediction, gen) for (_, ids, text, gen), gp in zip(chunk, passes)]
    return out
