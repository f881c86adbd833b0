"""Baseline uncertainty scores for LLM answers, each with its definition and source.

Cheap functions take what an expensive pass produced (per-token log-probs and entropies
from `gnuq_core.lm.decoding.generate`, samples from `gnuq_core.lm.decoding.sample_answers`,
cluster ids from `gnuq_core.lm.clustering`) so that cached generations can be re-scored
without running the model. The one extra model pass a baseline needs, P(True), is the
function `p_true`.

These are the formulas, in the orientation their papers define (the sequence probability
and P(True) are confidences). Scores of a QA record are declared, oriented ("higher = less
certain") and cited once in `gnuq_core.qa.scores`, the only caller of the sample-based
entropies (predictive, semantic): semantic entropy is computed here and nowhere else.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from gnuq_core.lm.anatomy import device_of, in_eval_mode
from gnuq_core.lm.decoding import check_length
from gnuq_core.lm.prompts import encode_prompt, format_prompt, p_true_question

__all__ = ["max_sequence_probability", "mean_token_entropy", "perplexity", "predictive_entropy",
           "length_normalized_predictive_entropy", "semantic_entropy", "discrete_semantic_entropy", "p_true"]


def _check(lps: Sequence[float]) -> np.ndarray:
    a = np.asarray(lps, dtype=np.float64)
    if a.size == 0:
        raise ValueError("no answer tokens: these baselines need at least one token's log-probability")
    return a


def max_sequence_probability(token_log_probs: Sequence[float]) -> float:
    """Probability of the (greedy) answer, prod_t p(y_t | y_<t, x).

    Also called maximum sequence probability (MSP); a confidence, so higher = more
    certain. See e.g. Fadeeva et al. (2023), *LM-Polygraph*, EMNLP demo.
    """
    return math.exp(math.fsum(_check(token_log_probs)))


def mean_token_entropy(token_entropies: Sequence[float]) -> float:
    """Mean over answer positions of the entropy of the next-token distribution (nats).

    H_t = -sum_v p(v | y_<t, x) log p(v | y_<t, x), averaged over the generated tokens
    (Malinin & Gales 2021, *Uncertainty Estimation in Autoregressive Structured
    Prediction*, ICLR; used as "mean token entropy" in LM-Polygraph).
    """
    return float(np.mean(_check(token_entropies)))


def perplexity(token_log_probs: Sequence[float]) -> float:
    """exp(-mean_t log p(y_t | y_<t, x)) of the generated answer (Ren et al. 2023, ICLR,
    *Out-of-Distribution Detection and Selective Generation for Conditional LMs*)."""
    return math.exp(-float(np.mean(_check(token_log_probs))))


def predictive_entropy(sample_log_probs: Sequence[float]) -> float:
    """Monte-Carlo predictive entropy, -1/N sum_i log p(s_i | x), over N samples s_i ~ p.

    Malinin & Gales (2021), *Uncertainty Estimation in Autoregressive Structured
    Prediction*, ICLR; the sequence-level estimator used by Kuhn et al. (2023).
    """
    return -float(np.mean(_check(sample_log_probs)))


def length_normalized_predictive_entropy(sample_log_probs: Sequence[float], lengths: Sequence[int]) -> float:
    """-1/N sum_i (1/L_i) log p(s_i | x): predictive entropy with each sample's log-prob
    divided by its length (Malinin & Gales 2021). Empty samples count with length 1."""
    lp = _check(sample_log_probs)
    ln = np.maximum(np.asarray(lengths, dtype=np.float64), 1.0)
    if ln.shape != lp.shape:
        raise ValueError(f"{lp.size} log-probs but {ln.size} lengths")
    return -float(np.mean(lp / ln))


def semantic_entropy(sample_log_probs: Sequence[float], cluster_ids: Sequence[int],
                     lengths: Sequence[int] | None = None) -> float:
    """Semantic entropy: entropy over meaning clusters of the sampled answers.

    p(c | x) is proportional to sum_{i in c} p(s_i | x) (Kuhn, Gal & Farquhar 2023, ICLR,
    *Semantic Uncertainty*; Farquhar et al. 2024, Nature), normalised over the observed
    clusters, and SE = -sum_c p(c) log p(c). With ``lengths``, each sample's probability
    is length-normalised first (exp(log p / L)), as in both papers' code. Computed with
    logsumexp, so long answers do not underflow.
    """
    lp = _check(sample_log_probs)
    if lengths is not None:
        lp = lp / np.maximum(np.asarray(lengths, dtype=np.float64), 1.0)
    cid = np.asarray(cluster_ids)
    if cid.shape != lp.shape:
        raise ValueError(f"{lp.size} log-probs but {cid.size} cluster ids")
    # sorted: the value does not depend on how the clusters are numbered, to the last bit
    log_pc = np.sort([np.logaddexp.reduce(lp[cid == c]) for c in np.unique(cid)])
    log_pc -= np.logaddexp.reduce(log_pc)
    return float(-(np.exp(log_pc) * log_pc).sum())


def discrete_semantic_entropy(cluster_ids: Sequence[int]) -> float:
    """Discrete semantic entropy: p(c) = fraction of samples in cluster c (Farquhar et al.
    2024, Nature, *Detecting hallucinations in large language models using semantic
    entropy*), SE = -sum_c p(c) log p(c). Needs no token probabilities."""
    cid = np.asarray(cluster_ids)
    if cid.size == 0:
        raise ValueError("no samples")
    _, counts = np.unique(cid, return_counts=True)
    f = np.sort(counts) / counts.sum()  # sorted: equal cluster sizes give bit-equal values (exact ties)
    return float(-(f * np.log(f)).sum())


@in_eval_mode
def p_true(model: Any, tokenizer: Any, question: str, answer: str, *, style: str = "chat") -> dict[str, float]:
    """P(True) self-evaluation (Kadavath et al. 2022, *Language Models (Mostly) Know What
    They Know*): one extra forward pass on a prompt that shows the question and the
    proposed answer and asks "Is the proposed answer True or False?".

    Returns ``{"p_true": p, "log_p_true": ..., "log_p_false": ..., "seconds": ...}`` with
    p = p(True) / (p(True) + p(False)) over the first tokens of the two words as the model
    would write them (``" True"`` after ``"Answer:"`` in few-shot style, ``"True"`` as the
    start of the assistant turn in chat style). A confidence: higher = more certain. A model
    in train mode is run in eval mode and gets its mode back (`gnuq_core.lm.anatomy.in_eval_mode`).
    """
    started = time.perf_counter()
    q = p_true_question(question, answer)
    if style == "chat":
        text = format_prompt(tokenizer, q, "chat", brief=False)
        words = ("True", "False")
    else:
        format_prompt(tokenizer, question, "fewshot")  # validates the question
        text = f"{q}\nAnswer:"  # Kadavath et al.'s format, without the QA shots
        words = (" True", " False")
    ids = encode_prompt(tokenizer, text, style)
    t_id, f_id = (tokenizer(w, add_special_tokens=False)["input_ids"][0] for w in words)
    check_length(model, len(ids), 1)
    dev = device_of(model)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids], device=dev), use_cache=False, logits_to_keep=1).logits[0, -1]
    lp = torch.log_softmax(logits.double(), -1)
    lt, lf = float(lp[t_id]), float(lp[f_id])
    p = 1.0 / (1.0 + math.exp(lf - lt))
    return {"p_true": p, "log_p_true": lt, "log_p_false": lf, "seconds": time.perf_counter() - started}
