"""The engine's ‖∇θ log p‖² vs plain autograd on a causal LM.

The engine (:func:`gnuq_core.lm.gradient.forward_backward`) never forms most gradients: it
uses ghost norms for linear layers, a hand-written d log p / d logits and Gram-matrix
forms for the tied embedding / output matrix. The reference here is the obvious code: one
``model(input_ids).logits`` (the model's own forward, logit soft-capping included), log-
softmax, the sum of the answer tokens' log-probabilities, ``backward()``, and the sum of
every parameter's squared ``.grad`` (``model.parameters()`` lists a tied matrix once).

Answers come from the stored QA records (their greedy answers, prompts re-encoded from the
questions, and the ``grad_sq`` the campaign stored) or, where there are none, from a few
fixed question/answer pairs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gnuq_core.bench.subjects import load_subject
from gnuq_core.crosscheck.agreement import compare, frame
from gnuq_core.lm.gradient import forward_backward
from gnuq_core.lm.models import LoadedModel
from gnuq_core.lm.prompts import encode_answer, encode_prompt, format_prompt
from gnuq_core.qa.study import with_prompt_ids

__all__ = ["FIXED_QA", "TOL_GRAD", "TOL_LOGP", "TOL_STORED", "load", "fixed_answers", "record_answers",
           "autograd_pass", "compare_answers"]

TOL_GRAD = 1e-4
"""float32 model: the engine's ghost norms and Gram forms vs explicit float32 gradients."""
TOL_LOGP = 1e-4
"""log p of the answer (relative, or absolute in nats below 1): a float32 log-softmax over a
49k–262k vocabulary rounds at about √V·ε ≈ 3e-5 per token, and the engine forms it differently."""
TOL_STORED = 1e-4
"""The stored record (7 significant digits, another process, maybe another BLAS) vs now."""

FIXED_QA: tuple[tuple[str, str], ...] = (
    ("What is the capital of France?", "Paris"),
    ("How many legs does a spider have?", "Eight legs."),
    ("Who wrote the play Romeo and Juliet?", "William Shakespeare wrote it."),
)
"""Question/answer pairs used when no stored records are available."""


def load(spec: str) -> Any:
    """A model as a :class:`gnuq_core.lm.models.LoadedModel`: a real alias (``"gemma3-270m"``) or
    ``"tiny-llama"`` (a random 2-layer Llama with a byte tokenizer, :func:`gnuq_core.bench.subjects.load_subject`)."""
    s = load_subject(spec)
    if s.synthetic:
        raise ValueError(f"{spec!r} has no text tokenizer; use a real alias or 'tiny-llama'")
    return LoadedModel(s.model, s.tokenizer, spec, spec, s.style, s.load_seconds)


def fixed_answers(loaded: Any, pairs: Sequence[tuple[str, str]] = FIXED_QA) -> list[dict[str, Any]]:
    """Prompt and answer token ids of ``pairs`` in ``loaded``'s prompt style."""
    style = loaded.prompt_style
    out = []
    for q, a in pairs:
        ids = encode_prompt(loaded.tokenizer, format_prompt(loaded.tokenizer, q, style), style)
        out.append({"id": q, "prompt_ids": ids, "answer_ids": encode_answer(loaded.tokenizer, a, style)})
    return out


def record_answers(loaded: Any, records: Sequence[Mapping[str, Any]], questions: Mapping[str, str],
                   n: int) -> list[dict[str, Any]]:
    """The first ``n`` records' greedy answers, prompts re-encoded from their questions.

    Parameters
    ----------
    loaded : LoadedModel
        The model the records were made with.
    records : sequence of dict
        Stored QA records (:mod:`gnuq_core.qa.engine`).
    questions : mapping
        Question text by record id.
    n : int
        How many (records with an empty answer or without a question are skipped).
    """
    out = []
    for r in records:
        if len(out) >= n:
            break
        if r["id"] not in questions or not r["generation"]["answer_ids"]:
            continue
        g = with_prompt_ids(loaded, r, questions[r["id"]])["generation"]
        out.append({"id": r["id"], "prompt_ids": list(g["prompt_ids"]), "answer_ids": list(g["answer_ids"]),
                    "stored_grad_sq": r.get("grad_sq"), "stored_log_p": r.get("log_p")})
    return out


def autograd_pass(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int]) -> tuple[float, float]:
    """``(log p, ‖∇θ log p‖²)`` over all parameters by plain autograd (``.grad`` restored after)."""
    import torch

    params = list(model.parameters())
    saved = [(p.requires_grad, p.grad) for p in params]
    try:
        for p in params:
            p.requires_grad_(True)
            p.grad = None
        dev = params[0].device
        ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=dev)
        n_p = len(prompt_ids)
        with torch.enable_grad():
            logits = model(input_ids=ids, use_cache=False).logits[0, n_p - 1:-1]
            if logits.dtype not in (torch.float32, torch.float64):
                logits = logits.float()  # half-precision logits: softmax in float32
            lp = torch.log_softmax(logits, -1).gather(1, ids[0, n_p:, None])[:, 0].sum()
            lp.backward()
        sq = math.fsum(float((p.grad.double() ** 2).sum()) for p in params if p.grad is not None)
        return float(lp.detach()), sq
    finally:
        for p, (rg, g) in zip(params, saved):
            p.grad = g
            p.requires_grad_(rg)


def compare_answers(model: Any, answers: Sequence[Mapping[str, Any]], *, label: str = "") -> Any:
    """Agreement rows: engine vs autograd (log p and ‖∇θ log p‖²), and stored records vs autograd.

    Parameters
    ----------
    model : transformers causal LM
        In eval mode, float32 or float64.
    answers : sequence of dict
        ``prompt_ids``, ``answer_ids`` and optionally ``stored_grad_sq`` / ``stored_log_p``
        (:func:`record_answers`, :func:`fixed_answers`).
    label : str
        The model's name, added as a column.

    Returns
    -------
    pandas.DataFrame
    """
    if not answers:
        raise ValueError(f"{label or 'model'}: no answers to compare; pass fixed_answers(loaded) when there are no records")
    eng_lp, eng_sq, ref_lp, ref_sq, st_sq, st_ref = [], [], [], [], [], []
    for a in answers:
        gp = forward_backward(model, a["prompt_ids"], a["answer_ids"], groups="all")
        lp, sq = autograd_pass(model, a["prompt_ids"], a["answer_ids"])
        eng_lp.append(math.fsum(gp.token_log_probs))
        eng_sq.append(gp.grad_sq)
        ref_lp.append(lp)
        ref_sq.append(sq)
        if a.get("stored_grad_sq") is not None:
            st_sq.append(float(a["stored_grad_sq"]))
            st_ref.append(sq)
    extra = {"case": label, "answers": len(answers)}
    rows = [
        compare("log p of the answer", eng_lp, ref_lp, TOL_LOGP, floor=1.0, ours_by="engine (forward_backward)",
                theirs_by="model(...).logits + log_softmax", **extra),
        compare("‖∇θ log p‖², all parameters", eng_sq, ref_sq, TOL_GRAD, ours_by="engine (forward_backward)",
                theirs_by="autograd: Σ ‖p.grad‖²", **extra),
    ]
    if st_sq:
        rows.append(compare("‖∇θ log p‖², all parameters", st_sq, st_ref, TOL_STORED,
                            ours_by="stored QA record (campaign)", theirs_by="autograd: Σ ‖p.grad‖²", **extra))
    df = frame(rows)
    df["median_grad_sq"] = float(np.median(ref_sq))
    return df
