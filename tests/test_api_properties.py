"""Property-based tests of the library's public API (issue 43): families of inputs, not examples.

Generated prompts and answers of every shape (empty, whitespace-only, control and zero-width
characters, NUL, lone surrogates, very long, not text at all, mixed lists, lists of
different lengths, a bare ``str`` where a list belongs), models of other kinds (a masked LM,
a seq2seq model, a plain ``nn.Module``, weights on the meta device), dtypes, and the
estimators' and the LM-Polygraph integration's inputs. The promise, for every case:

- either a correct result: one per row, equal to the one-at-a-time reference (`score` per
  pair, the formula for the estimators);
- or one clear error: a `ValueError` (`PromptError`, `OptionError`, …), an `InputTypeError`
  (gnuq's own `TypeError`) or a `FloatingPointError`, on one line;
- never another exception from inside the library (``IndexError``, ``KeyError``, a bare
  ``TypeError``), never a silently wrong number (a ``str`` scored one character per row, a
  masked LM scored as a causal one).

One tiny model per module, few examples per property (derandomised): the whole file runs in
well under a minute.
"""

from __future__ import annotations

import argparse
import math

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import torch  # noqa: E402

from gnuq_core.estimators import from_log_p_and_grad_sq, sequence_and_normalized  # noqa: E402
from gnuq_core.lm.scoring import ScoreResult, score, score_many, to_frame  # noqa: E402
from gnuq_core.options import OPTIONS, InputTypeError, flag  # noqa: E402
from tests.tiny_models import VOCAB, byte_tokenizer, tiny_gpt2, tiny_llama  # noqa: E402

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
CLEAR = (ValueError, InputTypeError, FloatingPointError)
"""The errors the promise allows (the command line prints each as one line, exit 2)."""

ODD_TEXTS = ["", " ", "\t\n ", "\u200b", "\u200b\u200c\ufeff", "\x00", "Who\x00?", "\x01\x02\x7f", "\x1b\x07",
             "caf\udce9?", "Q?", "Who wrote Hamlet?", "  Paris  ", "x" * 3000, "é", "\u202eQ?"]


GOOD_TEXTS = st.one_of(st.sampled_from(["Q?", "Who wrote Hamlet?", "  Paris  ", "é", "\u202eQ?", "Q?\u200b", "1"]),
                       st.text(st.characters(categories=["L", "N", "P", "S"]), min_size=1, max_size=8))
"""Texts that can be scored (invisible characters inside readable text included)."""


def _texts() -> st.SearchStrategy:
    """One item where a text belongs: mostly texts that can be scored, then odd texts, any short
    text, and things that are not text."""
    return st.one_of(GOOD_TEXTS, st.one_of(st.sampled_from(ODD_TEXTS), st.text(max_size=12), st.none(),
                                           st.integers(-3, 300), st.floats(allow_nan=True), st.binary(max_size=4),
                                           st.lists(st.sampled_from(["a", "Q?"]), max_size=2)))


def _sequences(item: st.SearchStrategy, size: int | None = None, good: st.SearchStrategy = GOOD_TEXTS
               ) -> st.SearchStrategy:
    """Where a list of texts belongs: lists and tuples of ``good`` items (of ``size``, or up to 3),
    lists of any ``item``, then a bare ``str``, None, a number, a mapping, a set."""
    lo, hi = (0, 3) if size is None else (size, size)
    return st.one_of(st.lists(good, min_size=lo, max_size=hi), st.lists(good, min_size=lo, max_size=hi),
                     st.lists(good, min_size=lo, max_size=hi).map(tuple), st.lists(item, min_size=lo, max_size=hi),
                     st.lists(item, max_size=3),
                     st.sampled_from(ODD_TEXTS[:12]), st.text(max_size=6), st.none(), st.integers(0, 5),
                     st.dictionaries(st.sampled_from(["a", "b"]), st.just("Q?"), max_size=2),
                     st.sets(st.sampled_from(["Q?", "A?"]), max_size=2))


def _is_text_list(value) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _one_line(err: BaseException) -> None:
    event(f"refused: {type(err).__name__}")
    assert str(err).strip(), f"{type(err).__name__} without a message"
    assert "\n" not in str(err).strip(), f"a message on several lines: {err}"


@pytest.fixture(scope="module")
def lm():
    return tiny_llama(), byte_tokenizer()


def _same(got: ScoreResult, want: ScoreResult) -> None:
    assert got.answer == want.answer and got.answer_ids == want.answer_ids
    assert got.sequence.log_p == pytest.approx(want.sequence.log_p, rel=1e-9, abs=1e-12)
    assert got.sequence.log10_grad_log_p_sq == pytest.approx(want.sequence.log10_grad_log_p_sq, abs=1e-6)


@SETTINGS
@given(data=st.data(), batch_size=st.integers(1, 3))
def test_score_many_scores_each_row_or_refuses_in_one_clear_error(lm, data, batch_size) -> None:
    model, tok = lm
    prompts = data.draw(_sequences(_texts()), "prompts")
    n = len(prompts) if isinstance(prompts, (list, tuple)) else None
    answers = data.draw(st.one_of(st.none(), _sequences(st.one_of(st.none(), _texts()), n,
                                                        st.one_of(st.none(), GOOD_TEXTS))), "answers")
    try:
        got = score_many(model, tok, prompts, answers, batch_size=batch_size, max_new_tokens=2, progress=False)
    except CLEAR as err:
        _one_line(err)
        return
    # a result: only for a list of prompts, answers None or a list of the same length, one row each
    assert _is_text_list(prompts), f"scored prompts={prompts!r}, which is not a list of str"
    rows = [None] * len(prompts) if answers is None else answers
    assert isinstance(rows, (list, tuple)) and len(rows) == len(prompts), (prompts, answers)
    assert all(a is None or isinstance(a, str) for a in rows)
    assert len(got) == len(prompts)
    event("scored")
    for p, a, r in zip(prompts, rows, got):
        _same(r, score(model, tok, p, a, max_new_tokens=2))


@SETTINGS
@given(prompt=_texts(), answer=st.one_of(st.none(), GOOD_TEXTS, _texts()))
def test_score_scores_one_text_or_refuses_in_one_clear_error(lm, prompt, answer) -> None:
    model, tok = lm
    try:
        r = score(model, tok, prompt, answer, max_new_tokens=2)
    except CLEAR as err:
        _one_line(err)
        return
    assert isinstance(prompt, str) and prompt.strip() and "\x00" not in prompt
    assert answer is None or (isinstance(answer, str) and r.answer == answer.strip())
    assert r.sequence.log_p <= 0 and math.isfinite(r.sequence.log_p)
    event("scored")


def _bert() -> torch.nn.Module:
    from transformers import BertConfig, BertForMaskedLM

    return BertForMaskedLM(BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=16)).eval()


def _t5() -> torch.nn.Module:
    from transformers import T5Config, T5ForConditionalGeneration

    return T5ForConditionalGeneration(T5Config(vocab_size=VOCAB, d_model=16, d_ff=16, num_layers=1, num_heads=2,
                                               d_kv=8)).eval()


@pytest.fixture(scope="module")
def models() -> dict:
    """Models of every kind, by whether gnuq can score them."""
    return {
        "llama float64": (tiny_llama(), True),
        "llama float32": (tiny_llama(dtype=torch.float32), True),
        "llama bfloat16": (tiny_llama(dtype=torch.bfloat16), True),
        "gpt2": (tiny_gpt2(), True),
        "bert masked LM": (_bert(), False),
        "t5 seq2seq": (_t5(), False),
        "plain module": (torch.nn.Sequential(torch.nn.Embedding(VOCAB, 4), torch.nn.Linear(4, VOCAB)), False),
        "meta device": (tiny_llama().to("meta"), False),
        "a model name": ("smollm2-135m-instruct", False),
        "None": (None, False),
    }


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["llama float64", "llama float32", "llama bfloat16", "gpt2", "bert masked LM",
                             "t5 seq2seq", "plain module", "meta device", "a model name", "None"]),
       many=st.booleans(), answer=st.sampled_from(["Paris", None]), groups=st.sampled_from([None, "last_block"]))
def test_only_causal_lms_are_scored(models, kind, many, answer, groups) -> None:
    model, scorable = models[kind]
    tok = byte_tokenizer()
    try:
        if many:
            got = score_many(model, tok, ["Capital of France?", "Q?"], [answer, answer], max_new_tokens=2,
                             groups=groups, progress=False)
        else:
            got = [score(model, tok, "Capital of France?", answer, max_new_tokens=2, groups=groups)]
    except CLEAR as err:
        _one_line(err)
        if isinstance(err, FloatingPointError):
            assert kind == "llama bfloat16", err  # a half-precision overflow names the fix; nothing else may
        else:
            assert not scorable, f"{kind} refused: {err}"
        return
    assert scorable, f"{kind} was scored as if it were a causal LM"
    event("scored")
    assert all(math.isfinite(r.sequence.log_p) and r.sequence.log_p <= 0 for r in got)


_NUMBERS = st.one_of(st.floats(-50, 0), st.floats(0, 1e6), st.floats(-50, 0), st.floats(0, 1e6),
                     st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10), st.none(), st.booleans(),
                     st.text(max_size=4), st.lists(st.floats(-5, 0), max_size=2))


@SETTINGS
@given(log_p=_NUMBERS, g=_NUMBERS)
def test_the_estimator_formula_or_one_clear_error(log_p, g) -> None:
    try:
        u = from_log_p_and_grad_sq(log_p, g)
    except CLEAR as err:
        _one_line(err)
        return
    assert not isinstance(log_p, (str, bool, list)) and not isinstance(g, (str, bool, list))
    assert log_p is not None and g is not None
    event("scored")
    if g > 0 and log_p > -math.inf:
        assert u.log10_epistemic == pytest.approx(2 * min(log_p, 0.0) / math.log(10) + math.log10(g))


@SETTINGS
@given(tokens=st.one_of(st.lists(st.floats(-50, 0), max_size=4), st.lists(st.floats(-50, 0), min_size=1, max_size=4),
                        st.text(max_size=4), st.none(), st.integers(),
                        st.lists(st.one_of(st.floats(-5, 0), st.text(max_size=2)), max_size=3)), g=_NUMBERS)
def test_sequence_and_normalized_or_one_clear_error(tokens, g) -> None:
    try:
        seq, norm = sequence_and_normalized(tokens, g)
    except CLEAR as err:
        _one_line(err)
        return
    assert isinstance(tokens, list) and tokens and all(isinstance(t, float) for t in tokens)
    assert seq.log_p == pytest.approx(min(math.fsum(tokens), 0.0))
    assert norm.log_p == pytest.approx(min(math.fsum(tokens) / len(tokens), 0.0))
    event("scored")


@SETTINGS
@given(n_lp=st.integers(0, 4), extra=st.sampled_from([0, 0, 0, 1, -1]),
       n_greedy=st.one_of(st.none(), st.none(), st.integers(0, 4)),
       drop=st.sampled_from([None, None, None, "gnuq_token_log_probs", "gnuq_grad_log_p_sq"]))
def test_polygraph_estimators_keep_rows_or_refuse(n_lp, extra, n_greedy, drop) -> None:
    pg = pytest.importorskip("gnuq_core.integrations.polygraph")
    n_g = max(n_lp + extra, 0)
    stats = {"gnuq_token_log_probs": [[-1.0 - i] for i in range(n_lp)],
             "gnuq_grad_log_p_sq": [float(i + 1) for i in range(n_g)]}
    if n_greedy is not None:
        stats["greedy_tokens"] = [[5]] * n_greedy
    if drop:
        del stats[drop]
    try:
        values = pg.GnuqEpistemic(log10=False)(stats)
    except CLEAR as err:
        _one_line(err)
        return
    assert drop is None and n_lp == n_g and n_greedy in (None, n_lp)
    assert len(values) == n_lp
    event("scored")
    for i, v in enumerate(values):
        assert v == pytest.approx(math.exp(-1.0 - i) ** 2 * (i + 1))


@pytest.fixture(scope="module")
def whitebox():
    pytest.importorskip("lm_polygraph")
    from lm_polygraph import WhiteboxModel

    tok = byte_tokenizer(chat=False)
    tok.padding_side = "left"
    return WhiteboxModel(tiny_llama(dtype=torch.float32), tok, model_path="tiny-llama")


@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_polygraph_calculator_keeps_rows_or_refuses(whitebox, data) -> None:
    from gnuq_core.integrations.polygraph import GradientNormCalculator

    texts = data.draw(_sequences(st.sampled_from(["Hi", "Q?", "Hi", "Q?", "", "\u200b", 3])), "texts")
    n = data.draw(st.sampled_from([len(texts), len(texts), 0, 1, 2, 3]) if hasattr(texts, "__len__")
                  else st.integers(0, 3), "answers")
    answers = data.draw(st.one_of(st.lists(st.lists(st.integers(5, 200), min_size=1, max_size=3), min_size=n,
                                           max_size=n),
                                  st.lists(st.sampled_from(["ab", 5, None]), max_size=2), st.none()), "greedy")

    deps = {} if answers is None else {"greedy_tokens": answers}
    try:
        out = GradientNormCalculator()(deps, texts, whitebox)
    except CLEAR as err:
        _one_line(err)
        return
    assert _is_text_list(texts) and isinstance(answers, list) and len(answers) == len(texts)
    assert all(len(v) == len(texts) for v in out.values())
    event("scored")


# --- the command line's options ---------------------------------------------------------------

NUMBER_TEXTS = st.one_of(
    st.sampled_from(["0", "1", "2", "-1", "-0", "0.5", "1.0", "1e3", "1e400", "-1e-3", "inf", "-inf", "nan", "-NaN",
                     "1_000", " 7 ", "0x10", "", " ", "٣", "1,5", "10" * 12, "--", "\x00", "1\x00", "ⅷ", "+3",
                     "3.", ".5", "1e-400", "9" * 30]),
    st.integers(-5, 10**7).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=5))
"""What a user may type after a numeric flag."""


def _reference_accepts(text: str, rule) -> bool:
    """Whether ``text`` is a number ``rule`` allows, decided from Python's own number syntax."""
    try:
        x = float(text.strip())
    except ValueError:
        return False
    if not math.isfinite(x) or (rule.integer and not x.is_integer()):
        return False
    if rule.integer:
        try:
            int(text.strip(), 10)
        except ValueError:
            return False
    return ((rule.minimum is None or x >= rule.minimum) and (rule.maximum is None or x <= rule.maximum)
            and (rule.above is None or x > rule.above) and (rule.below is None or x < rule.below))


@settings(SETTINGS, max_examples=300)
@given(name=st.sampled_from(sorted(OPTIONS)), text=NUMBER_TEXTS)
def test_every_numeric_flag_takes_exactly_the_numbers_its_rule_allows(name, text) -> None:
    """Every ``type=flag(...)`` of every command: a value the rule allows comes back equal to the
    typed number; anything else is one line naming the rule's reason and what was typed."""
    rule = OPTIONS[name]
    if rule.choices or not (rule.integer or rule.minimum is not None or rule.maximum is not None):
        return
    try:
        value = flag(name)(text)
    except argparse.ArgumentTypeError as err:
        _one_line(err)
        assert not _reference_accepts(text, rule), f"{name}: {text!r} refused: {err}"
        return
    assert _reference_accepts(text, rule), f"{name}: {text!r} accepted as {value!r}"
    assert value == float(text.strip()) and isinstance(value, int) == rule.integer
    event("accepted")


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    tiny_llama(dtype=torch.float32).save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return folder


CLI_VALUES = {
    "--max-new-tokens": NUMBER_TEXTS, "--samples": NUMBER_TEXTS, "--temperature": NUMBER_TEXTS,
    "--threshold": NUMBER_TEXTS, "--seed": NUMBER_TEXTS, "--threads": NUMBER_TEXTS,
    "--dtype": st.sampled_from(["float32", "float64", "bfloat16", "float16", "float8", "int8", "", "FLOAT32"]),
    "--groups": st.sampled_from(["all", "lm_head", "last_block", "lm_head,last_block", "", ",", "nope", "all,all"]),
    "--clusterer": st.sampled_from(["embedding", "exact", "nli", "", "EXACT"]),
    "--style": st.sampled_from(["auto", "chat", "fewshot", "other"]),
    "--device": st.sampled_from(["cpu", "CPU", "cuda:0", "meta", "", "cpu:0", "tpu"]),
}
"""The options of ``gnuq qa`` and what a user may pass to each (valid and not)."""


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_the_qa_command_line_is_valid_or_one_line_exit_2(model_folder, tmp_path_factory, monkeypatch, capsys,
                                                         data) -> None:
    """``gnuq qa … --limit 0`` with any mix of option values: either "valid" (status 0, every
    numeric option within its rule) or one ``error:`` line and status 2, never a traceback; the
    model is never loaded and --out never written."""
    import gnuq_core.cli as cli

    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("--limit 0 loaded the model"))
    root = tmp_path_factory.mktemp("qa")
    (root / "triviaqa").mkdir()
    (root / "triviaqa" / "validation.jsonl").write_text('{"id": "tqa_0", "question": "Q?", "answers": ["x"]}\n')
    chosen = data.draw(st.dictionaries(st.sampled_from(sorted(CLI_VALUES)), st.just(None), max_size=4), "flags")
    argv = ["qa", "--model", str(model_folder), "--dataset", "triviaqa", "--data-dir", str(root),
            "--out", str(root / "run.jsonl"), "--limit", data.draw(st.sampled_from(["0", "0", "-0", " 0"]), "limit")]
    for option in chosen:
        argv += [option, data.draw(CLI_VALUES[option], option)]
    capsys.readouterr()
    status = cli.main(argv)
    out, err = capsys.readouterr()
    assert not (root / "run.jsonl").exists()
    if status == 2:
        assert out == "" and err.startswith("error: ") and err.count("\n") == 1, (argv, err)
        event("refused")
        return
    assert status == 0 and "the options, the data and --out are valid" in out, (argv, status, out, err)
    rules = {"--max-new-tokens": "max_new_tokens", "--samples": "n_samples", "--temperature": "temperature",
             "--threshold": "threshold", "--seed": "seed", "--threads": "threads"}
    for option, name in rules.items():
        if option in chosen:
            assert _reference_accepts(argv[argv.index(option) + 1], OPTIONS[name]), argv
    if "--dtype" in chosen:
        assert argv[argv.index("--dtype") + 1] in ("float32", "float64", "bfloat16", "float16"), argv
    if "--groups" in chosen:
        assert argv[argv.index("--groups") + 1] in ("all", "lm_head", "last_block", "all,all"), argv
    event("valid")


@settings(SETTINGS, max_examples=60)
@given(results=st.one_of(st.none(), st.text(max_size=5), st.integers(),
                         st.dictionaries(st.text(max_size=3), st.integers()),
                         st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=3)), min_size=1, max_size=3)))
def test_to_frame_refuses_anything_but_results_in_one_line(results) -> None:
    """`to_frame` takes a list of ScoreResult; anything else is one TypeError naming the fix."""
    with pytest.raises(TypeError, match=r"pass a list of ScoreResult") as err:
        to_frame(results)
    _one_line(err.value)
