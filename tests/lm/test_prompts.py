"""gnuq_core.lm.prompts: chat and few-shot formats, and their errors."""

from __future__ import annotations


import pytest

from gnuq_core.lm.prompts import (FEWSHOT_EXAMPLES, PromptError, check_style, check_text, encode_answer,
                                   encode_prompt, format_prompt, p_true_question)
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
        encode_answer(ZeroTok(), "x", "chat")
    with pytest.raises(PromptError, match="no visible character"):
        encode_answer(ZeroTok(), "\u200b", "chat")


@pytest.mark.parametrize("text", ["\u200b", "\u200b\u200c\u2060\ufeff", "\x01\x02\x7f", "\x1b\x07\t", "\u202e\u200e"])
def test_invisible_text_is_refused(text: str) -> None:
    with pytest.raises(PromptError, match="the prompt has no visible character"):
        format_prompt(byte_tokenizer(), text, "fewshot")
    check_text("Who? \u200b", "prompt")  # an invisible character inside readable text is kept


def test_a_nul_character_is_refused() -> None:
    with pytest.raises(PromptError, match=r"NUL character \(U\+0000\) at character 3"):
        format_prompt(byte_tokenizer(), "Who\x00?", "fewshot")


@pytest.mark.parametrize("template", ["{{ ''.__class__.__mro__[1].__subclasses__() }}",
                                      "{% set x = messages.append(1) %}{{ x }}",
                                      "{{ raise_exception('roles must alternate') }}"])
def test_a_chat_template_jinja_refuses_is_a_prompt_error(template: str) -> None:
    tok = byte_tokenizer()
    tok.chat_template = template
    with pytest.raises(PromptError, match="chat template") as err:
        format_prompt(tok, "Who?", "chat")
    assert "\n" not in str(err.value) and "fewshot" in str(err.value)


def test_p_true_question():
    q = p_true_question(" Who? ", " Me ")
    assert q.startswith("Question: Who?\nProposed answer: Me\n") and "True or False" in q
