"""gnuq_core.lm.prompts: chat and few-shot formats, and their errors."""

from __future__ import annotations


import pytest

from gnuq_core.lm.prompts import (FEWSHOT_EXAMPLES, PromptError, check_style, encode_answer, encode_prompt,
                               format_prompt, p_true_question)
from tests.tiny_models import byte_tokenizer


def test_chat_prompt_uses_template():
    tok = byte_tokenizer()
    text = format_prompt(tok, "  Who wrote Hamlet? ", "chat")
    assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")
    assert "Who wrote Hamlet?<|im_end|>" in text and "few words" in text
    assert "few words" not in format_prompt(tok, "Q?", "chat", brief=False)
    ids = encode_prompt(tok, text, "chat")
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>")


def test_fewshot_prompt():
    tok = byte_tokenizer(chat=False)
    text = format_prompt(tok, "Who wrote Hamlet?", "fewshot")
    assert text.endswith("Q: Who wrote Hamlet?\nA:")
    assert text.count("Q: ") == len(FEWSHOT_EXAMPLES) + 1
    assert encode_answer(tok, "Shakespeare", "fewshot") == tok(" Shakespeare", add_special_tokens=False)["input_ids"]
    assert encode_answer(tok, " Shakespeare ", "chat") == tok("Shakespeare", add_special_tokens=False)["input_ids"]


def test_errors_say_what_to_do():
    tok = byte_tokenizer(chat=False)
    with pytest.raises(PromptError, match="no chat template.*fewshot"):
        format_prompt(tok, "Q?", "chat")
    with pytest.raises(PromptError, match="unknown prompt style"):
        check_style(tok, "json")
    for bad in ["", "  \t\n"]:
        with pytest.raises(PromptError, match="empty or whitespace"):
            format_prompt(tok, bad, "fewshot")
        with pytest.raises(PromptError, match="answer=None"):
            encode_answer(tok, bad, "fewshot")

    class ZeroTok:
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": []}

    with pytest.raises(PromptError, match="zero tokens"):
        encode_answer(ZeroTok(), "\u200b", "chat")


def test_p_true_question():
    q = p_true_question(" Who? ", " Me ")
    assert q.startswith("Question: Who?\nProposed answer: Me\n") and "True or False" in q
