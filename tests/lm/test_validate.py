"""gnuq_core.lm.validate: the public boundary refuses what it cannot score, in one clear error.

The issue's reproducers (issue 43) are here as tests: a ``str`` given where a list belongs,
lists of different lengths, a masked LM, a seq2seq model, a plain ``nn.Module``, invisible
prompts; each is refused before any pass.
"""

from __future__ import annotations

import pytest
import torch

from gnuq_core.lm import validate
from gnuq_core.lm.prompts import PromptError
from gnuq_core.lm.scoring import score, score_many
from gnuq_core.options import InputTypeError
from tests.tiny_models import VOCAB, byte_tokenizer, tiny_gpt2, tiny_llama


@pytest.fixture(scope="module")
def lm():
    return tiny_llama(), byte_tokenizer()


def bert_masked_lm() -> torch.nn.Module:
    from transformers import BertConfig, BertForMaskedLM

    return BertForMaskedLM(BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=16)).eval()


def bert_lm_head(is_decoder: bool) -> torch.nn.Module:
    from transformers import BertConfig, BertLMHeadModel

    return BertLMHeadModel(BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=16, is_decoder=is_decoder)).eval()


def t5() -> torch.nn.Module:
    from transformers import T5Config, T5ForConditionalGeneration

    return T5ForConditionalGeneration(T5Config(vocab_size=VOCAB, d_model=16, d_ff=16, num_layers=1, num_heads=2,
                                               d_kv=8)).eval()


def test_a_str_where_a_list_belongs_is_refused(lm) -> None:
    model, tok = lm
    with pytest.raises(InputTypeError, match=r"answers is a single str \('Paris'\), not a list: pass a list of "
                                             r"answers, e.g. \['Paris'\]"):
        score_many(model, tok, ["a?", "b?", "c?", "d?", "e?"], "Paris")
    with pytest.raises(InputTypeError, match="prompts is a single str .* pass a list of prompts"):
        score_many(model, tok, "Who?", None)
    with pytest.raises(InputTypeError, match="prompts is None: pass a list of prompts"):
        score_many(model, tok, None)
    with pytest.raises(InputTypeError, match="prompt is a list, not text: pass the prompt as a str; for several, "
                                             "use score_many"):
        score(model, tok, ["Who?"], "x")


def test_lists_must_line_up(lm) -> None:
    model, tok = lm
    with pytest.raises(ValueError, match="2 prompts but 1 answers: pass one of each per row"):
        score_many(model, tok, ["a?", "b?"], ["x"])
    with pytest.raises(InputTypeError, match=r"prompts\[1\] is an int, not text"):
        score_many(model, tok, ["a?", 3], ["x", "y"])
    with pytest.raises(PromptError, match=r"answers\[0\]: the answer is empty .* pass None to let the model"):
        score_many(model, tok, ["a?"], [" "])
    with pytest.raises(PromptError, match=r"prompts\[2\]: the prompt has no visible character"):
        score_many(model, tok, ["a?", "b?", "\u200b"], None)


@pytest.mark.parametrize("make, words", [
    (bert_masked_lm, "BertForMaskedLM is a masked or sequence-to-sequence LM, not a causal LM"),
    (lambda: bert_lm_head(False), "config.is_decoder=False, so it attends in both directions"),
    (t5, "encoder-decoder"),
    (lambda: torch.nn.Linear(2, 2), "Linear, not a transformers causal LM"),
    (lambda: "gpt2", "model is a str, not a torch model"),
])
def test_a_model_of_another_kind_is_refused(lm, make, words: str) -> None:
    _, tok = lm
    model = make()
    for call in (lambda: score(model, tok, "Q?", "x"), lambda: score_many(model, tok, ["Q?"], ["x"])):
        with pytest.raises(InputTypeError, match=words) as err:
            call()
        assert "AutoModelForCausalLM" in str(err.value)


def test_a_causal_model_of_an_encoder_family_is_accepted(lm) -> None:
    _, tok = lm
    r = score(bert_lm_head(True).double(), tok, "Q?", "x")
    assert r.sequence.log_p < 0


def test_a_model_without_numbers_or_floats_is_refused(lm) -> None:
    _, tok = lm
    with pytest.raises(ValueError, match="meta device"):
        score(tiny_llama().to("meta"), tok, "Q?", "x")
    model = tiny_llama()
    model.lm_head.weight = torch.nn.Parameter(torch.zeros(VOCAB, 16, dtype=torch.int8), requires_grad=False)
    with pytest.raises(ValueError, match="torch.int8 .* floating-point"):
        score(model, tok, "Q?", "x")


def test_other_arguments_are_checked_by_type(lm) -> None:
    model, tok = lm
    with pytest.raises(InputTypeError, match="tokenizer is None, not a tokenizer"):
        score(model, None, "Q?", "x")
    with pytest.raises(InputTypeError, match="per_group='yes' is a str: pass True or False"):
        score(model, tok, "Q?", "x", per_group="yes")
    with pytest.raises(InputTypeError, match="groups=3 is an int"):
        score(model, tok, "Q?", "x", groups=3)
    with pytest.raises(ValueError, match="unknown style 'json'"):
        score(model, tok, "Q?", "x", style="json")
    with pytest.raises(ValueError, match="max_new_tokens must be ≥ 1"):
        score(model, tok, "Q?", max_new_tokens=0)


def test_the_helpers() -> None:
    assert validate.text_list(("a", None), "answers", optional=True) == ["a", None]
    assert validate.same_length(a=[1, 2], b="xy") == 2
    assert validate.real_list([1, 2.5], "x") == [1.0, 2.5]
    assert validate.real(torch.tensor(2.0), "x") == 2.0
    for bad in ("1", True, None, [1.0]):
        with pytest.raises(InputTypeError, match="^x.* (pass a number|not a number)"):
            validate.real(bad, "x")
    with pytest.raises(InputTypeError, match="pass a list of numbers"):
        validate.real_list("-1.0", "x")
    with pytest.raises(InputTypeError, match="prompts is a set"):
        validate.text_list({"a"}, "prompts")
    assert validate.model_kind(tiny_gpt2()) is None
