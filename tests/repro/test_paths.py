"""gnuq_core.repro.paths: folders named by the environment; an empty or blank name is no name."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnuq_core.qa.data import DataNotFound, find_data_dir
from gnuq_core.repro import paths


@pytest.mark.parametrize("value", ["", " ", "\t"])
def test_an_empty_or_blank_variable_counts_as_unset(value: str, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("GNUQ_CACHE_DIR", "XDG_CACHE_HOME", "GNUQ_OUTPUT_DIR", "GNUQ_RESULTS_DIR", "GNUQ_DATA_DIR"):
        monkeypatch.setenv(name, value)
        assert paths.env_path(name) is None
    assert paths.cache_dir() == tmp_path / "home" / ".cache" / "gnuq"
    assert paths.generated_dir() == paths.REPO_ROOT / "book" / "_generated"
    assert list(tmp_path.iterdir()) == [tmp_path / "home"]  # nothing made in the current folder


def test_a_named_folder_is_expanded_and_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GNUQ_CACHE_DIR", "~/c")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()
    monkeypatch.setenv("GNUQ_CACHE_DIR", " ")
    assert paths.cache_dir() == tmp_path / "xdg" / "gnuq"
    monkeypatch.setenv("GNUQ_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(DataNotFound, match="nowhere/truthfulqa/TruthfulQA.csv does not exist"):
        find_data_dir("truthfulqa")
