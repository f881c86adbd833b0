"""The chapter runner: profiles, parameter validation, conversion."""

from __future__ import annotations

import os
from dataclasses import make_dataclass
from pathlib import Path

import pytest

from gnuq_core.chapters.base import ChapterParams, param
from gnuq_core.options import Rule
from gnuq_core.book import runner as chapters
from gnuq_core.repro.profiles import ChapterError


def test_unknown_profile_names_the_available_ones() -> None:
    with pytest.raises(ChapterError, match=r"unknown profile 'nope'.*quick"):
        chapters.check_profile("nope")


def test_unknown_chapter_lists_known_ones() -> None:
    with pytest.raises(ChapterError, match=r"no chapter '77'.*01_derivation"):
        chapters.find_chapter("77")


def test_find_chapter_by_number_and_stem() -> None:
    assert chapters.find_chapter("01") == chapters.find_chapter("01_derivation")


def test_unknown_parameter_is_refused_with_declared_names() -> None:
    with pytest.raises(ChapterError, match=r"unknown parameter\(s\) typo.*declares: seed, n_mc"):
        chapters.chapter_parameters("01", "quick", {"typo": 1})


@pytest.mark.parametrize("default, value, ok", [
    (1, 2, True), (1.0, 2, True), (1, 2.5, False), (True, 1, False), (1, True, False),
    ("a", "b", True), ("a", 3, False), ([1], [2, 3], True),
])
def test_parameter_types(default: object, value: object, ok: bool) -> None:
    toy = make_dataclass("Toy", [("x", type(default), param(default))], bases=(ChapterParams,), frozen=True)
    toy.CHAPTER = "ch"
    if ok:
        assert toy.resolve(None, {"x": value}).x == value
    else:
        with pytest.raises(ChapterError, match="parameter x="):
            toy.resolve(None, {"x": value})


def test_parameters_cell_is_read_from_jupytext_source(tmp_path: Path) -> None:
    src = tmp_path / "nb.py"
    src.write_text('# %% tags=["parameters"]\nprofile = "quick"\nseed = 3\nsizes = [1, 2]\n\n# %%\nprint(seed)\n')
    nb = chapters.to_ipynb(src, tmp_path / "nb.ipynb")
    assert chapters.declared_parameters(nb) == {"profile": "quick", "seed": 3, "sizes": [1, 2]}


def test_notebook_without_parameters_cell_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "nb.py"
    src.write_text("# %%\nx = 1\n")
    with pytest.raises(ChapterError, match="no cell tagged 'parameters'"):
        chapters.declared_parameters(chapters.to_ipynb(src, tmp_path / "nb.ipynb"))


@pytest.mark.parametrize("profile", chapters.profile_names())
def test_every_profile_fits_every_chapter(profile: str, tmp_path: Path) -> None:
    """Each profile sets only declared parameters of the right type (no execution), and a
    chapter's PREVIEWS name preview profiles only (``full`` is the defaults)."""
    for source in chapters.chapters():
        declared = chapters.declared_parameters(chapters.to_ipynb(source, tmp_path / f"{source.stem}.ipynb"))
        module = chapters.chapter_module(source)
        assert set(declared) == {"profile", "overrides"}, f"{source.stem}: its Params hold the parameters"
        assert "seed" in module.Params.names()
        assert set(module.Params.PREVIEWS) <= set(chapters.profile_names()) - {"full"}, source.stem
        module.Params.for_profile(profile)


def test_cli_reports_errors_without_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert chapters.main(["run", "01", "--profile", "nope"]) == 2
    assert "unknown profile 'nope'" in capsys.readouterr().err


def test_parse_overrides_reads_literals_and_rejects_malformed_pairs():
    from gnuq_core.repro.profiles import ChapterError, parse_overrides

    assert parse_overrides(["n_truthfulqa=100", "models=['a', 'b']", "judge=True", "name=smollm2"]) == {
        "n_truthfulqa": 100, "models": ["a", "b"], "judge": True, "name": "smollm2"}
    with pytest.raises(ChapterError, match="expected NAME=VALUE"):
        parse_overrides(["n_truthfulqa"])


@pytest.mark.parametrize("rule, value, problem", [
    (Rule(minimum=1), 1, None), (Rule(minimum=1), 0, "must be ≥ 1"),
    (Rule(minimum=0), -5, "must be ≥ 0"), (Rule(above=0, below=1), 1.0, "must be < 1"),
    (Rule(above=0), 0.0, "must be > 0"), (Rule(maximum=3), 4, "must be ≤ 3"),
    (Rule(choices=("a", "b")), "c", "must be one of 'a', 'b'"),
    (Rule(minimum=1, nonempty=True), [], "must not be empty"),
    (Rule(minimum=1, nonempty=True), [4, 0], "element 0 must be ≥ 1"),
    (Rule(minimum=1), [], None),
])
def test_rule_problem(rule: Rule, value: object, problem: str | None) -> None:
    assert rule.problem(value) == problem


def test_every_notebook_has_a_chapter_module(tmp_path: Path) -> None:
    for source in chapters.chapters():
        assert chapters.module_for(source.stem) is not None, f"{source.stem}: register its Params and run()"
    src = tmp_path / "99_new.py"
    src.write_text('# %% tags=["parameters"]\nprofile = "quick"\n')
    with pytest.raises(ChapterError, match="99_new.py has no chapter module"):
        chapters.chapter_module(src)


def test_value_out_of_range_is_refused_before_the_output_folder_changes(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "book"
    out.mkdir()
    (out / "01_derivation.ipynb").write_text("executed before")
    assert chapters.main(["run", "01", "--out", str(out), "--set", "n_mc=-5"]) == 2
    assert capsys.readouterr().err == "error: 01_derivation: parameter n_mc=-5 must be ≥ 1\n"
    assert [p.name for p in out.iterdir()] == ["01_derivation.ipynb"]
    assert (out / "01_derivation.ipynb").read_text() == "executed before"
    assert chapters.main(["run", "03", "--out", str(out), "--set", "lm_source=gpt2"]) == 2
    assert "lm_source='gpt2' must be one of 'smollm2', 'tiny-random'" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert chapters.main(["run", "01", "--out", str(tmp_path / "file")]) == 2
    assert "is a file: give a folder" in capsys.readouterr().err


@pytest.mark.parametrize("ename, one_line", [("ResultsDisagree", True), ("StoreDamaged", True),
                                             ("ZeroDivisionError", False)])
def test_a_damaged_store_inside_a_chapter_is_one_line_a_bug_its_traceback(ename: str, one_line: bool, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import papermill

    def fails(*args: object, **kwargs: object) -> None:
        raise papermill.PapermillExecutionError(3, 3, "result = run(params)", ename,
                                                "results/x.jsonl: item width96 ... stored 8.78, recomputed 5.85", [])

    monkeypatch.setattr(papermill, "execute_notebook", fails)
    for name in ("GNUQ_OUTPUT_DIR", "GNUQ_CHAPTER", "GNUQ_PARAMETERS", "MPLBACKEND", "TQDM_DISABLE"):
        monkeypatch.setenv(name, os.environ.get(name, ""))  # the runner sets them for its kernel: restored after
        if not os.environ[name]:
            monkeypatch.delenv(name)
    if not one_line:
        with pytest.raises(papermill.PapermillExecutionError):
            chapters.main(["run", "01", "--profile", "smoke", "--out", str(tmp_path)])
        return
    assert chapters.main(["run", "01", "--profile", "smoke", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: chapter 01_derivation stopped: {ename}: results/x.jsonl: item "
                                               "width96") and str(tmp_path) in err[0]
