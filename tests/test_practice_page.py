"""The practitioner's page (book/practice.md): its example runs as printed, on a tiny model."""

from __future__ import annotations

import os
import re
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from tests.tiny_models import byte_tokenizer, tiny_llama

PAGE = Path(__file__).resolve().parents[1] / "book" / "practice.md"
MODEL_ID = '"HuggingFaceTB/SmolLM2-135M-Instruct"'


def python_blocks(text: str) -> list[str]:
    """The page's fenced Python blocks, in order."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_example_runs_as_printed(tmp_path, capsys) -> None:
    folder = tmp_path / "model"
    tiny_llama(dtype=torch.float32).save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    example, _ = python_blocks(PAGE.read_text())
    assert len([line for line in example.splitlines() if line.strip()]) <= 12  # "a 10-line example"
    assert max(len(line) for line in example.splitlines()) <= 76  # no sideways scrolling at 1280 px
    assert MODEL_ID in example  # the page names a real model; the test swaps in the tiny one
    scope: dict = {}
    exec(compile(example.replace(MODEL_ID, repr(str(folder))), str(PAGE), "exec"), scope)
    answer, log10_epistemic, aleatoric = capsys.readouterr().out.rsplit(maxsplit=2)
    assert answer == repr(scope["r"].answer)
    assert float(aleatoric) == scope["u"].p * (1 - scope["u"].p)
    assert float(log10_epistemic) <= scope["u"].log10_grad_log_p_sq  # p² ≤ 1
    cheap = scope["cheap"].uncertainty
    assert cheap.log10_grad_log_p_sq < scope["u"].log10_grad_log_p_sq  # the last block is part of all parameters
    assert cheap.log_p == scope["u"].log_p


def test_the_page_glues_what_the_chapters_compute() -> None:
    text = PAGE.read_text()
    typed = re.findall(r"(?<![\w.`/-])0\.\d{2,}", text)
    assert not typed, f"numbers typed into the page instead of glued: {typed}"
    bare = re.findall(r"\{glue:text\}`[^`]*::\w+`", text)
    assert not bare, f"glue:text from another page needs a format (':s' for text), or myst-nb misreads the key: {bare}"
    for doc, key in re.findall(r"_generated/(\d\d_\w+)\.ipynb::(\w+)", text):
        source = (PAGE.parents[1] / "gnuq_core" / "notebooks" / f"{doc}.py").read_text()
        chapter = (PAGE.parents[1] / "gnuq_core" / "chapters").glob("*.py")
        assert any(key in p.read_text() for p in chapter) or key in source, f"{doc} does not glue {key}"


def test_the_page_quotes_the_instruction_the_prompt_adds() -> None:
    from gnuq_core.lm.prompts import CHAT_INSTRUCTION

    assert f'"{CHAT_INSTRUCTION.strip()}"' in " ".join(PAGE.read_text().split())


def test_the_lm_polygraph_recipe_runs_as_printed(tmp_path, capsys) -> None:
    import pytest

    pytest.importorskip("lm_polygraph")
    folder = tmp_path / "model"
    tiny_llama(dtype=torch.float32).save_pretrained(folder)
    byte_tokenizer(chat=False).save_pretrained(folder)
    _, recipe = python_blocks(PAGE.read_text())
    assert max(len(line) for line in recipe.splitlines()) <= 76 and MODEL_ID in recipe
    scope: dict = {}
    exec(compile(recipe.replace(MODEL_ID, repr(str(folder))), str(PAGE), "exec"), scope)
    text, value = capsys.readouterr().out.strip().rsplit(maxsplit=1)
    assert text == repr(scope["out"].generation_text) and float(value) == scope["out"].uncertainty
    assert scope["out"].estimator == "GnuqEpistemic"
