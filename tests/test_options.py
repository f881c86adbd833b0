"""gnuq_core.options: one rule per option, checked as the command line is parsed."""

from __future__ import annotations

import argparse
import math

import pytest

from gnuq_core import options
from gnuq_core.options import OPTIONS, OptionError, Rule, finite_problem, flag, group_list, groups_value, one_group


def test_the_sampling_limits_are_the_decoders() -> None:
    """The decoder refuses the same values the command line does (one bound, two places until
    the decoder imports it: both are checked here)."""
    from gnuq_core.lm import decoding

    assert options.MAX_SAMPLES == decoding.MAX_SAMPLES and options.TEMPERATURE_RANGE == decoding.TEMPERATURE_RANGE
    assert OPTIONS["n_samples"].maximum == decoding.MAX_SAMPLES


@pytest.mark.parametrize("value, why", [
    (float("inf"), "must be a finite number"), (float("nan"), "must be a finite number"), (0, "must be ≥ 1"),
    (2.5, "must be a whole number"), (10**30, "must be ≤ 8192"), ("many", "must be a number, not str"),
])
def test_a_count_refuses_what_is_not_one(value: object, why: str) -> None:
    assert why in OPTIONS["max_new_tokens"].problem(value)
    with pytest.raises(OptionError, match=r"^max_new_tokens .* \(got "):
        OPTIONS["max_new_tokens"].check("max_new_tokens", value)


def test_lists_nested_values_and_choices() -> None:
    assert Rule(minimum=1, nonempty=True).problem([]) == "must not be empty"
    assert Rule(minimum=1).problem([1, 0]) == "element 0 must be ≥ 1"
    assert Rule(choices=("a", "b")).problem("c") == "must be one of 'a', 'b'"
    assert finite_problem({"x": [1.0, math.inf]}) == "element inf must be a finite number"
    assert finite_problem([True, 3, 2.5, "s"]) is None
    assert "too large" in finite_problem(2**60)


def test_flag_parses_text_and_says_what_is_wrong() -> None:
    samples = flag("n_samples")
    assert samples("10") == 10 and flag("temperature")("0.7") == 0.7
    for text, says in (("1e3", "expected a whole number"), ("2000", "must be ≤ 1024"), ("-1", "must be ≥ 0")):
        with pytest.raises(argparse.ArgumentTypeError, match=says):
            samples(text)
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be a finite number \(got inf\)"):
        flag("temperature")("inf")


def test_groups_are_parsed_and_checked_one_by_one() -> None:
    assert group_list("last_block, lm_head,last_block") == "last_block,lm_head"
    assert groups_value("all") is None and groups_value("lm_head") == "lm_head"
    assert groups_value("last_block,lm_head") == ["last_block", "lm_head"]
    for text, says in (("", "names no group"), ("lm_head,,x", "names no group"), ("heads", "unknown group 'heads'")):
        with pytest.raises(argparse.ArgumentTypeError, match=says):
            group_list(text)
    with pytest.raises(argparse.ArgumentTypeError, match="give one group here"):
        one_group("last_block,lm_head")


def test_paths_expand_the_home_folder(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert options.output_path("~/x.jsonl") == tmp_path / "x.jsonl"
    with pytest.raises(argparse.ArgumentTypeError, match="is empty"):
        options.output_path(" ")


def test_the_one_line_parser_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    parser = options.OneLineParser(prog="tool")
    parser.add_argument("--n", type=flag("count"))
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--n", "0"])
    assert stop.value.code == 2
    assert capsys.readouterr().err == "error: argument --n: must be ≥ 1 (got 0) (see tool --help)\n"
