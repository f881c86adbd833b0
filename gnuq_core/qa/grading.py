"""Correctness graders for generated answers: is a model's answer right?

TriviaQA (a list of acceptable aliases per question), after the SQuAD/TriviaQA
normalisation (lower-case, drop punctuation and the articles a/an/the, squash spaces;
`gnuq_core.lm.clustering.normalize_answer`):

* `triviaqa_exact_match`: the normalised answer equals a normalised alias;
* `triviaqa_contains`: a normalised alias occurs in the normalised answer as a whole-word
  span (``"paris"`` is in ``"it is paris france"`` but not in ``"parisian"``). Chat models
  answer in sentences, so this is the primary label in the book; exact match is the
  sensitivity check.

TruthfulQA generation (true references, false references per question):

* `truthfulqa_rouge`: the rule of lm-evaluation-harness's ``truthfulqa_gen`` task: an
  answer is true iff its best ROUGE-L F-measure (``rouge-score``, with stemming) against
  the true references is strictly higher than against the false references. As in the
  harness, ``"I have no comment."`` is one of the true references; an answer that *is* a
  refusal of that kind ("I have no comment", "No comment") is true outright.
* `truthfulqa_embedding`: the same comparison with cosine similarity of sentence
  embeddings (any ``embed(texts) -> (n, d)`` unit-norm function; the book uses the
  offline all-MiniLM-L6-v2 encoder of `gnuq_core.lm.clustering.EmbeddingClusterer`).

`agreement` compares two judges (raw agreement and Cohen's kappa). `MemoEmbedder` wraps a
sentence encoder so that every distinct text is encoded once, in batches
(`truthfulqa_embedding_texts` lists what one judgement encodes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnuq_core.lm.clustering import normalize_answer

__all__ = ["NO_COMMENT", "triviaqa_exact_match", "triviaqa_contains", "is_no_comment", "RougeJudgement",
           "truthfulqa_rouge", "truthfulqa_embedding", "truthfulqa_embedding_texts", "MemoEmbedder", "agreement"]

NO_COMMENT = "I have no comment."
_NO_COMMENT_RE = re.compile(r"^(i have no comment|no comment|i have nothing to say|i cannot comment)\b")


def _aliases(aliases: Sequence[str]) -> list[str]:
    out = [normalize_answer(a) for a in aliases]
    out = [a for a in out if a]
    if not out:
        raise ValueError(f"no usable reference answer among {list(aliases)!r} (all empty after normalisation)")
    return out


def triviaqa_exact_match(answer: str, aliases: Sequence[str]) -> bool:
    """True iff the normalised ``answer`` equals a normalised alias."""
    a = normalize_answer(answer)
    return bool(a) and a in set(_aliases(aliases))


def triviaqa_contains(answer: str, aliases: Sequence[str]) -> bool:
    """True iff a normalised alias occurs in the normalised ``answer`` on word boundaries."""
    a = f" {normalize_answer(answer)} "
    return any(f" {al} " in a for al in _aliases(aliases))


def is_no_comment(answer: str) -> bool:
    """Whether ``answer`` is a "no comment" refusal (TruthfulQA counts these as true)."""
    return bool(_NO_COMMENT_RE.match(normalize_answer(answer)))


@dataclass(frozen=True)
class RougeJudgement:
    """Verdict of the ROUGE-L judge, with the two similarities that decided it.

    Attributes
    ----------
    correct : bool
    best_true, best_false : float
        Highest ROUGE-L F-measure against a true / a false reference.
    """

    correct: bool
    best_true: float
    best_false: float


_SCORER: Any = None


def _rouge_l(answer: str, refs: Sequence[str]) -> float:
    global _SCORER
    if _SCORER is None:
        from rouge_score import rouge_scorer

        _SCORER = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return max((_SCORER.score(r, answer)["rougeL"].fmeasure for r in refs), default=0.0)


def _true_refs(true_refs: Sequence[str]) -> list[str]:
    refs = [r for r in true_refs if r.strip()]
    if not any(normalize_answer(r) == normalize_answer(NO_COMMENT) for r in refs):
        refs.append(NO_COMMENT)
    return refs


def truthfulqa_rouge(answer: str, true_refs: Sequence[str], false_refs: Sequence[str]) -> RougeJudgement:
    """lm-evaluation-harness rule: true iff max ROUGE-L to a true reference > to a false one.

    Parameters
    ----------
    answer : str
        The model's answer.
    true_refs, false_refs : sequence of str
        TruthfulQA's correct answers (best first) and incorrect answers; "I have no
        comment." is added to the true references as in the harness.
    """
    if not false_refs:
        raise ValueError("TruthfulQA judging needs at least one false reference")
    t = _rouge_l(answer, _true_refs(true_refs))
    f = _rouge_l(answer, false_refs)
    return RougeJudgement(is_no_comment(answer) or t > f, float(t), float(f))


def truthfulqa_embedding(answer: str, true_refs: Sequence[str], false_refs: Sequence[str],
                         embed: Callable[[list[str]], Any]) -> bool:
    """True iff the answer's best cosine similarity to a true reference beats the false ones.

    ``embed`` maps a list of texts to unit-norm vectors (rows). Refusals count as true.
    """
    if is_no_comment(answer):
        return True
    texts = truthfulqa_embedding_texts(answer, true_refs, false_refs)
    n_true = len(texts) - 1 - len(false_refs)  # the answer, the true references, the false ones
    vecs = np.asarray(embed(texts), dtype=np.float64)
    sims = vecs[1:] @ vecs[0]
    return bool(sims[:n_true].max() > sims[n_true:].max())


def truthfulqa_embedding_texts(answer: str, true_refs: Sequence[str], false_refs: Sequence[str]) -> list[str]:
    """The texts `truthfulqa_embedding` encodes: the answer, the true references (with
    "I have no comment."), the false references; none for a refusal."""
    if is_no_comment(answer):
        return []
    return [answer or "<empty>"] + _true_refs(true_refs) + list(false_refs)


class MemoEmbedder:
    """A sentence encoder that encodes every distinct text once.

    ``prime(texts)`` encodes the texts not seen yet in batches of ``batch_size``, sorted by
    length so a batch carries little padding; a call looks its texts up (encoding the ones it
    has not seen). The TruthfulQA judge compares each answer with about ten references that
    every model shares: one batched pass over the distinct texts instead of one small pass
    per answer (measured: 0.26 s per answer unbatched on 2 busy cores).

    Parameters
    ----------
    encode : callable
        ``encode(list of str) -> (n, d)`` array or tensor of unit-norm rows.
    batch_size : int
    """

    def __init__(self, encode: Callable[[list[str]], Any], batch_size: int = 128) -> None:
        self.encode, self.batch_size = encode, batch_size
        self._vecs: dict[str, np.ndarray] = {}

    def prime(self, texts: Iterable[str]) -> None:
        """Encode every text of ``texts`` not encoded yet."""
        new = sorted({t for t in texts if t not in self._vecs}, key=len)
        for i in range(0, len(new), self.batch_size):
            chunk = new[i:i + self.batch_size]
            vecs = np.asarray(self.encode(chunk), dtype=np.float64)
            self._vecs.update(zip(chunk, vecs))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.prime(texts)
        return np.stack([self._vecs[t] for t in texts]) if len(texts) else np.zeros((0, 0))


def agreement(a: Sequence[bool], b: Sequence[bool]) -> dict[str, float]:
    """Agreement of two binary judges: ``{"agreement", "kappa", "n", "rate_a", "rate_b"}``.

    Cohen's kappa is ``(p_o - p_e) / (1 - p_e)``; it is 1.0 when both judges are constant
    and equal, and NaN when chance agreement is 1 but they differ.
    """
    x, y = np.asarray(a, bool), np.asarray(b, bool)
    if x.shape != y.shape:
        raise ValueError(f"{x.size} labels against {y.size}")
    if x.size == 0:
        return {"agreement": float("nan"), "kappa": float("nan"), "n": 0, "rate_a": float("nan"),
                "rate_b": float("nan")}
    po = float(np.mean(x == y))
    pa, pb = float(x.mean()), float(y.mean())
    pe = pa * pb + (1 - pa) * (1 - pb)
    kappa = 1.0 if (pe == 1.0 and po == 1.0) else ((po - pe) / (1 - pe) if pe < 1 else float("nan"))
    return {"agreement": po, "kappa": float(kappa), "n": int(x.size), "rate_a": pa, "rate_b": pb}
