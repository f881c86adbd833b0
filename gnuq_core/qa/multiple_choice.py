"""TruthfulQA multiple choice (MC1 / MC2) by answer likelihood: a model-quality reference.

``mc_task.json`` (see the data README) lists, per question, MC1 choices (exactly one
true) and MC2 choices (one or more true). Each choice is scored by its total log
probability as the answer to the question, in the model's own prompt format
(`gnuq_core.lm.prompts`), as lm-evaluation-harness does:

* **MC1** = 1 if the true choice has the highest log-likelihood among the MC1 choices;
* **MC2** = the normalised probability mass on the true choices among the MC2 choices.

Random guessing gives MC1 ≈ 1/(number of choices) (about 0.2 on average) and a MC2 that
depends on the share of true choices.

`stored_mc_scores` keeps the per-question scores in the results store (``results/qa_mc/``):
scoring every choice of 817 questions takes minutes per model, too long for the book's budget.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnuq_core.lm.gradient import answer_log_probs
from gnuq_core.lm.prompts import encode_answer, encode_prompt, format_prompt
from gnuq_core.qa.data import DataNotFound, find_data_dir
from gnuq_core.repro.files import DamagedFile, json_type, read_text

__all__ = ["MCItem", "load_mc", "score_choices", "mc_scores", "stored_mc_scores"]


@dataclass(frozen=True)
class MCItem:
    """One multiple-choice question: ``mc1`` and ``mc2`` map choice text to 1 (true) / 0;
    ``id`` is ``mc_<index in mc_task.json>``."""

    question: str
    mc1: dict[str, int]
    mc2: dict[str, int]
    id: str = ""


def load_mc(data_dir: str | Path | None = None) -> list[MCItem]:
    """Load ``truthfulqa/mc_task.json`` from the data folder (`gnuq_core.qa.data.find_data_dir`).

    Raises
    ------
    gnuq_core.qa.data.DataNotFound
        If no data folder holds the file.
    ValueError
        If an item is malformed (names its index).
    """
    folder = find_data_dir("truthfulqa", data_dir)
    path = (folder / "truthfulqa" / "mc_task.json") if folder is not None else None
    if path is None or not path.is_file():
        raise DataNotFound("truthfulqa/mc_task.json not found: set GNUQ_DATA_DIR to the folder holding "
                           "truthfulqa/TruthfulQA.csv and truthfulqa/mc_task.json")

    try:
        raw = json.loads(read_text(path))
    except DamagedFile:
        raise
    except ValueError as err:
        raise DamagedFile(f"{path}: not valid JSON ({getattr(err, 'msg', err)}, line {getattr(err, 'lineno', '?')}): "
                          "restore it from the source named in the data README") from None
    if not isinstance(raw, list):
        raise DamagedFile(f"{path}: {json_type(raw)}, expected an array of questions: restore it from the source "
                          "named in the data README")
    items = []
    for i, r in enumerate(raw):
        ok = (isinstance(r, dict) and isinstance(r.get("question"), str) and isinstance(r.get("mc1_targets"), dict)
              and isinstance(r.get("mc2_targets"), dict) and sum(r["mc1_targets"].values()) == 1
              and sum(r["mc2_targets"].values()) >= 1)
        if not ok:
            raise ValueError(f"{path}, item {i}: expected question, mc1_targets (one true), mc2_targets")
        items.append(MCItem(r["question"].strip(), dict(r["mc1_targets"]), dict(r["mc2_targets"]), f"mc_{i}"))
    return items


def score_choices(model: Any, tokenizer: Any, question: str, choices: Sequence[str], *, style: str
                  ) -> list[float]:
    """Total log p of each choice as the answer to ``question`` (forward passes only)."""
    prompt_ids = encode_prompt(tokenizer, format_prompt(tokenizer, question, style), style)
    return [math.fsum(answer_log_probs(model, prompt_ids, encode_answer(tokenizer, c, style))) for c in choices]


def mc_scores(model: Any, tokenizer: Any, item: MCItem, *, style: str) -> dict[str, float]:
    """``{"mc1": 0/1, "mc2": mass on true choices}`` for one question."""
    choices = list(dict.fromkeys(list(item.mc1) + list(item.mc2)))
    lp = dict(zip(choices, score_choices(model, tokenizer, item.question, choices, style=style)))
    best = max(item.mc1, key=lambda c: lp[c])
    m2 = [lp[c] for c in item.mc2]
    top = max(m2)
    w = [math.exp(v - top) for v in m2]
    true_mass = sum(wi for wi, c in zip(w, item.mc2) if item.mc2[c] == 1) / sum(w)
    return {"mc1": float(item.mc1[best] == 1), "mc2": float(true_mass)}


def stored_mc_scores(loaded: Any, name: str, items: Sequence[MCItem], *, store: Any,
                     verify: int = 1) -> list[dict[str, Any]]:
    """`mc_scores` of ``items`` for the model ``loaded`` (alias ``name``) through ``store`` (kind ``qa_mc``).

    Stored questions are reused, missing ones computed and appended, and ``verify`` stored
    ones recomputed and compared under the kind's contract (exact: forward passes only).
    Returns one record ``{"id", "mc1", "mc2"}`` per item, in order.
    """
    if any(not it.id for it in items):
        raise ValueError("MC items need their ids (load them with load_mc)")
    by_id = {it.id: it for it in items}
    config = {"model": name, "style": loaded.prompt_style}
    return store.items("qa_mc", config, list(by_id),
                       lambda i: mc_scores(loaded.model, loaded.tokenizer, by_id[i], style=loaded.prompt_style),
                       verify=verify)
