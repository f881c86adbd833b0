"""Every user-facing bad input in one place: each gets an error that names the problem and the fix.

The README's troubleshooting table lists the same messages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gnuq_core.book import runner as chapters
from gnuq_core.repro.profiles import ChapterError


def test_unknown_profile() -> None:
    with pytest.raises(ChapterError, match=r"unknown profile 'fast'; available profiles: .*quick"):
        chapters.check_profile("fast")


def test_unknown_notebook_parameter() -> None:
    with pytest.raises(ChapterError, match=r"unknown parameter\(s\) n_mcc; the chapter declares: .*n_mc"):
        chapters.chapter_parameters("01", "quick", {"n_mcc": 5})


def test_wrong_parameter_type() -> None:
    with pytest.raises(ChapterError, match=r"n_mc='many' is text, but its default 20000 is a whole number"):
        chapters.chapter_parameters("01", "quick", {"n_mc": "many"})


def test_missing_data_directory(tmp_path: Path) -> None:
    from gnuq_core.qa.data import DataNotFound, load_qa

    with pytest.raises(DataNotFound, match=r"does not exist: point data_dir / GNUQ_DATA_DIR at a folder"):
        load_qa("truthfulqa", data_dir=tmp_path / "nowhere")


def test_corrupt_data_file_names_the_row(tmp_path: Path) -> None:
    from gnuq_core.qa.data import load_qa

    (tmp_path / "triviaqa").mkdir()
    (tmp_path / "triviaqa" / "validation.jsonl").write_text(
        '{"id": "tqa_1", "question": "Q?", "answers": ["A"]}\n{"id": "tqa_2", "question": \n')
    with pytest.raises(ValueError, match=r"validation.jsonl, line 2: not valid JSON"):
        load_qa("triviaqa", data_dir=tmp_path)


def test_unknown_model_alias_lists_the_known_ones() -> None:
    from gnuq_core.lm.models import ModelNotFound, resolve_source

    with pytest.raises(ModelNotFound, match=r"unknown model 'smollm3'.*smollm2-135m-instruct.*gemma3-270m.*\.gguf"):
        resolve_source("smollm3")


@pytest.mark.parametrize("prompt", ["", "   \n\t"])
def test_empty_prompt(prompt: str) -> None:
    from gnuq_core.lm.prompts import PromptError, format_prompt

    with pytest.raises(PromptError, match="the prompt is empty or whitespace only: pass the question text"):
        format_prompt(None, prompt, "fewshot")


def test_missing_chromium_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import test_browser

    monkeypatch.setattr(test_browser, "CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(pytest.fail.Exception, match=r"Chromium not found.*apt-get install chromium"):
        test_browser.chromium_or_fail()


def test_output_file_of_another_configuration(tmp_path: Path) -> None:
    from gnuq_core.repro.records import ConfigMismatch, RecordFile

    out = tmp_path / "run.jsonl"
    RecordFile(out, {"model": "gemma3-270m", "limit": 10}).append("q1", {"score": 1.0})
    with pytest.raises(ConfigMismatch, match=r"different configuration \(model: file has 'gemma3-270m', this run "
                                             r"'smollm2-135m-instruct'\): use a different --out file"):
        RecordFile(out, {"model": "smollm2-135m-instruct", "limit": 10})


def test_stale_stored_result_names_the_file_item_and_fix(tmp_path: Path) -> None:
    from gnuq_core.store import ResultsDisagree, Store
    from tests.store.conftest import demo_kind

    kind, store = demo_kind(), Store(tmp_path / "results", label="the test store")
    store.items(kind, {"n": 1}, ["a"], lambda i: {"v": 1.0})
    with pytest.raises(ResultsDisagree, match=r"demo/.*\.jsonl: item a recomputed differently.*\.v: stored 1\.0, "
                                              r"recomputed 2\.0.*bump its version in gnuq_core/store/kinds\.py"):
        store.items(kind, {"n": 1}, ["a"], lambda i: {"v": 2.0}, verify=1)


def test_records_graded_without_their_questions() -> None:
    from gnuq_core.qa.study import score_table

    with pytest.raises(KeyError, match=r"1 records have no question in `items` \(first: 'q1'\): load the dataset"):
        score_table([{"id": "q1", "dataset": "triviaqa", "answer": "x"}], {})


def test_parameter_line_papermill_cannot_read(tmp_path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell("n = 3\nwidths = []  # used at depth >= 2 (empty: all of `widths`); slow",
                                              metadata={"tags": ["parameters"]}))
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(ChapterError, match=r"papermill cannot read the parameter line\(s\) of widths"):
        chapters.declared_parameters(path)


@pytest.mark.parametrize("dataset", ["triviaqa", "truthfulqa"])
def test_non_utf8_data_file_names_the_file_and_line(tmp_path: Path, dataset: str) -> None:
    from gnuq_core.qa.data import DATASETS, TRUTHFULQA_HEADER, load_qa

    path = tmp_path / DATASETS[dataset]
    path.parent.mkdir(parents=True)
    if dataset == "triviaqa":
        good = '{"id": "tqa_1", "question": "Q?", "answers": ["A"]}\n'
        path.write_bytes(good.encode() + '{"id": "tqa_2", "question": "Où?", "answers": ["A"]}\n'.encode("latin-1"))
    else:
        path.write_bytes((",".join(TRUTHFULQA_HEADER) + "\nA,B,Où?,D,E,F,G\n").encode("latin-1"))
    with pytest.raises(ValueError, match=rf"{path.name}, line 2: not UTF-8 text \(byte 0xf9 at column \d+\): re-save"):
        load_qa(dataset, data_dir=tmp_path)


def test_out_of_range_chapter_parameter() -> None:
    with pytest.raises(ChapterError, match=r"^01_derivation: parameter n_mc=-5 must be ≥ 1$"):
        chapters.chapter_parameters("01", "quick", {"n_mc": -5})


def test_non_utf8_prompt() -> None:
    from gnuq_core.lm.prompts import PromptError, format_prompt

    with pytest.raises(PromptError, match=r"the prompt is not valid UTF-8 text \(byte 0xe9 at character 3\)"):
        format_prompt(None, "caf\udce9", "fewshot")
