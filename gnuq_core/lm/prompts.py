"""Prompt formats: chat (for models with a chat template) and few-shot (for base models).

A **chat** prompt is the tokenizer's chat template applied to one user turn, with the
generation prompt appended; the answer is what the assistant turn says, and generation
stops at an end-of-sequence / end-of-turn token.

A **few-shot** prompt is a fixed list of ``Q: ... / A: ...`` pairs followed by
``Q: <question>\\nA:``; the answer follows after a space and generation stops at the
first newline (or EOS).

The P(True) prompt (Kadavath et al. 2022) asks the model whether a proposed answer is
true, in the same format.
"""

from __future__ import annotations

import unicodedata
from typing import Any

__all__ = ["STYLES", "FEWSHOT_EXAMPLES", "PromptError", "format_prompt", "encode_prompt", "encode_answer",
           "p_true_question", "check_style", "check_text"]

STYLES = ("chat", "fewshot")

FEWSHOT_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("What is the capital of France?", "Paris"),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci"),
    ("How many legs does a spider have?", "Eight"),
    ("What is the chemical symbol for gold?", "Au"),
)

CHAT_INSTRUCTION = "Answer the following question in a few words.\n"


class PromptError(ValueError):
    """A prompt or answer that cannot be scored, with a message that says what to do."""


def check_text(text: str, what: str) -> None:
    """Raise `PromptError` unless ``text`` is valid Unicode text with something to read.

    Bytes that are not UTF-8 reach Python as lone surrogates (``"\\udce9"``, from a
    command-line argument or a file read with ``errors="surrogateescape"``); tokenizers
    reject them with an obscure ``TypeError``. A NUL character (a binary file, a C string's
    end) and a text made only of control, format and zero-width characters (U+200B) are
    refused too: a model would be asked a question nobody can see.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raw = text[err.start].encode("utf-8", "surrogateescape")
        raise PromptError(f"the {what} is not valid UTF-8 text (byte 0x{raw.hex()} at character {err.start}): "
                          "save or type it as UTF-8") from None
    nul = text.find("\x00")
    if nul >= 0:
        raise PromptError(f"the {what} contains a NUL character (U+0000) at character {nul}: remove it (is it a "
                          "binary file?)")
    if not any(_visible(ch) for ch in text):
        raise PromptError(f"the {what} has no visible character (only control, format or zero-width characters "
                          f"such as U+200B): pass the {what} as readable text")


def _visible(ch: str) -> bool:
    """A character that shows: not whitespace, a control, format (zero-width), unassigned or
    private-use character."""
    return not ch.isspace() and unicodedata.category(ch)[0] not in "CZ"


def check_style(tokenizer: Any, style: str) -> None:
    """Raise `PromptError` if ``style`` is unknown or ``"chat"`` without a chat template."""
    if style not in STYLES:
        raise PromptError(f"unknown prompt style {style!r}; use one of {', '.join(STYLES)}")
    if style == "chat" and not getattr(tokenizer, "chat_template", None):
        raise PromptError("this model's tokenizer has no chat template, so chat mode cannot be used: "
                          "use the few-shot style (style='fewshot', CLI --style fewshot), or set "
                          "tokenizer.chat_template to a Jinja template for the model")


def format_prompt(tokenizer: Any, question: str, style: str, *, brief: bool = True) -> str:
    """The prompt text for ``question`` in ``style`` (``"chat"`` or ``"fewshot"``).

    ``brief`` adds a one-line "answer in a few words" instruction in chat mode (the
    few-shot examples already show short answers).
    """
    if not isinstance(question, str):
        raise PromptError(f"the prompt is a {type(question).__name__}, not text: pass the question as a str")
    if not question.strip():
        raise PromptError("the prompt is empty or whitespace only: pass the question text to score")
    check_text(question, "prompt")
    check_style(tokenizer, style)
    q = question.strip()
    if style == "chat":
        content = (CHAT_INSTRUCTION + q) if brief else q
        return _apply_chat_template(tokenizer, content)
    shots = "".join(f"Q: {sq}\nA: {sa}\n\n" for sq, sa in FEWSHOT_EXAMPLES)
    return f"{shots}Q: {q}\nA:"


def _apply_chat_template(tokenizer: Any, content: str) -> str:
    """One user turn through the tokenizer's chat template; a template that jinja2 refuses (its
    sandbox stops one that reaches for Python internals: template injection) or that raises is a
    `PromptError` naming the fix, not a traceback from inside jinja2."""
    from jinja2.exceptions import SecurityError, TemplateError

    try:
        return tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                             add_generation_prompt=True)
    except SecurityError as err:
        raise PromptError(f"the model's chat template tried something jinja2's sandbox forbids ({err}): it may be "
                          "malicious (template injection); do not use this model's template: use the few-shot style "
                          "(style='fewshot', CLI --style fewshot) or set tokenizer.chat_template to a trusted "
                          "template") from None
    except TemplateError as err:
        raise PromptError(f"the model's chat template failed: {err}; use the few-shot style (style='fewshot', CLI "
                          "--style fewshot) or fix tokenizer.chat_template") from None


def encode_prompt(tokenizer: Any, text: str, style: str) -> list[int]:
    """Token ids of a formatted prompt (chat templates carry their own special tokens)."""
    ids = tokenizer(text, add_special_tokens=(style != "chat"))["input_ids"]
    return list(ids)


def encode_answer(tokenizer: Any, answer: str, style: str) -> list[int]:
    """Token ids of an answer continuing a prompt of ``style``.

    Few-shot prompts end with ``"A:"``, so the answer gets a leading space.

    Raises
    ------
    PromptError
        If the answer is empty or tokenises to zero tokens.
    """
    if not isinstance(answer, str):
        raise PromptError(f"the answer is a {type(answer).__name__}, not text: pass a str, or answer=None to let "
                          "the model generate one")
    if not answer.strip():
        raise PromptError("the answer is empty or whitespace only: pass answer=None to let the model "
                          "generate one, or give a non-empty answer")
    check_text(answer, "answer")
    text = (" " + answer.strip()) if style == "fewshot" else answer.strip()
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if not ids:
        raise PromptError(f"the answer {answer!r} tokenises to zero tokens with this tokenizer: give an "
                          "answer with visible text")
    return ids


def p_true_question(question: str, answer: str) -> str:
    """The P(True) self-evaluation question of Kadavath et al. (2022), adapted to one line."""
    return (f"Question: {question.strip()}\nProposed answer: {answer.strip()}\n"
            "Is the proposed answer True or False? Reply with one word, True or False.")
