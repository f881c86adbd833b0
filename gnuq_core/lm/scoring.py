"""Score an LLM answer: one forward-backward pass gives epistemic, aleatoric and combined.

For an answer y = (y_1..y_T) to a prompt x, the prediction is either

* ``"sequence"``: p = prod_t p(y_t | y_<t, x)  (log p = sum_t log p_t), or
* ``"normalized"``: the length-normalised geometric mean p = exp(mean_t log p_t).

Both come from the same backward pass: grad log p_norm = grad log p_seq / T. Epistemic is
``||grad_theta p||^2 = p^2 ||grad_theta log p||^2`` computed in log space
(`gnuq_core.estimators.from_log_p_and_grad_sq`), aleatoric is ``p (1 - p)`` and combined
is their sum (law of total variance, as in the paper).

The passes live in `gnuq_core.lm.decoding` (greedy answer, samples) and
`gnuq_core.lm.gradient` (the forward–backward pass, ``backend="fast"`` or ``"reference"``);
parameter groups in `gnuq_core.lm.anatomy`. This module is the front door: `score`.

Prompt longer than the context window: an error (not truncation), because cutting the
start of a prompt silently changes the question (and drops the few-shot examples or the
chat header). The message says how many tokens are too many.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gnuq_core.lm.decoding import Generation, generate
from gnuq_core.lm.gradient import _reference_pass, forward_backward
from gnuq_core.lm.prompts import encode_answer, encode_prompt, format_prompt

__all__ = ["ScoreResult", "PREDICTIONS", "score", "score_many", "uncertainties"]

PREDICTIONS = ("sequence", "normalized")


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
        """JSON-ready dict (infinite log10 values become None)."""
        def unc(u: Any) -> dict[str, Any]:
            d = u._asdict()
            return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}

        return {"answer": self.answer, "answer_ids": self.answer_ids, "token_log_probs": self.token_log_probs,
                "prediction": self.prediction, "sequence": unc(self.sequence),
                "normalized": unc(self.normalized),
                "generation": asdict(self.generation) if self.generation else None, "timings": self.timings}


def uncertainties(token_log_probs: Sequence[float], grad_sq: float, group_sq: Mapping[str, float] | None = None
                  ) -> tuple[Any, Any]:
    """(sequence, normalized) `Uncertainty` from per-token log-probs and ``||grad log p_seq||^2``.

    The normalized prediction log p / T has gradient grad(log p)/T, so its squared norm
    (and every per-group value) is divided by T^2.
    """
    from gnuq_core.estimators import from_log_p_and_grad_sq

    n = len(token_log_probs)
    log_p = math.fsum(token_log_probs)
    seq = from_log_p_and_grad_sq(log_p, grad_sq, group_sq)
    norm = from_log_p_and_grad_sq(log_p / n, grad_sq / n**2, {k: v / n**2 for k, v in (group_sq or {}).items()})
    return seq, norm


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
    """
    if prediction not in PREDICTIONS:
        raise ValueError(f"unknown prediction {prediction!r}; use one of {', '.join(PREDICTIONS)}")
    if backend not in ("fast", "reference"):
        raise ValueError(f"unknown backend {backend!r}; use 'fast' or 'reference'")
    text = format_prompt(tokenizer, prompt, style, brief=brief)
    prompt_ids = encode_prompt(tokenizer, text, style)
    timings: dict[str, float] = {}
    if answer is None:
        if generation is None:
            generation = generate(model, tokenizer, prompt_ids, max_new_tokens=max_new_tokens,
                                  stop_at_newline=(style == "fewshot"))
        timings["generate"] = generation.seconds
        answer_ids, answer_text = generation.answer_ids, generation.answer
    else:
        answer_ids, answer_text = encode_answer(tokenizer, answer, style), answer.strip()
        generation = None
    run = forward_backward if backend == "fast" else _reference_pass
    gp = run(model, prompt_ids, answer_ids, groups=groups, per_group=per_group)
    timings["gradient"] = gp.seconds
    seq, norm = uncertainties(gp.token_log_probs, gp.grad_sq, gp.group_sq)
    return ScoreResult(answer_text, list(answer_ids), gp.token_log_probs, seq, norm, prediction, generation, timings)


def score_many(model: Any, tokenizer: Any, prompts: Sequence[str], answers: Sequence[str | None] | None = None,
               *, progress: bool = True, **kwargs: Any) -> list[ScoreResult]:
    """`score` for many (prompt, answer) pairs, with a progress bar. ``kwargs`` go to `score`."""
    from tqdm.auto import tqdm

    answers = list(answers) if answers is not None else [None] * len(prompts)
    if len(answers) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
    return [score(model, tokenizer, p, a, **kwargs)
            for p, a in tqdm(list(zip(prompts, answers)), desc="scoring", disable=not progress)]
