"""gnuq_core.repro.repository: a published copy names its repository; a mistyped one stops the build."""

from __future__ import annotations

import importlib.util
import os
import stat
import tomllib
from pathlib import Path

import pytest
import yaml

from gnuq_core.book import runner as chapters
from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.repository import (
    BRANCH_ENV,
    REPOSITORY_ENV,
    RUNNABLE_FOLDER,
    Repository,
    RepositoryError,
    main,
    published_repository,
    theme_options,
)


def test_no_repository_is_named_by_default() -> None:
    assert published_repository({}) is None and published_repository({REPOSITORY_ENV: "  "}) is None
    assert theme_options(None) == {}


@pytest.mark.parametrize("url", ["https://github.com/acme/gnuq", "https://github.com/acme/gnuq.git",
                                 "https://github.com/acme/gnuq/"])
def test_a_github_address_is_read_with_its_branch(url: str) -> None:
    repo = published_repository({REPOSITORY_ENV: url})
    assert repo == Repository("github.com", "acme", "gnuq", "main") and repo.url == "https://github.com/acme/gnuq"
    assert published_repository({REPOSITORY_ENV: url, BRANCH_ENV: "v1.0"}).branch == "v1.0"


def test_the_links_it_gives() -> None:
    repo = Repository("github.com", "acme", "gnuq", "feat/x")
    assert repo.binder_link("01_derivation") == ("https://mybinder.org/v2/gh/acme/gnuq/feat%2Fx"
                                                 f"?urlpath=lab%2Ftree%2F{RUNNABLE_FOLDER}%2F01_derivation.ipynb")
    assert Repository("gitlab.com", "a", "b").binder_link("07").startswith("https://mybinder.org/v2/gl/a/b/main?")
    assert repo.install_line() == '%pip install "gnuq[book] @ git+https://github.com/acme/gnuq@feat/x"'
    options = theme_options(repo)
    assert options["repository_url"] == repo.url and options["use_repository_button"] is True
    assert options["use_issues_button"] is True and options["repository_branch"] == "feat/x"


@pytest.mark.parametrize("url", ["http://github.com/acme/gnuq", "github.com/acme/gnuq", "https://github.com/acme",
                                 "https://github.com/acme/gnuq/tree/main", "https://example.org/acme/gnuq",
                                 "https://github.com/ac me/gnuq", "<repository URL>"])
def test_an_address_that_is_not_a_repository_is_refused(url: str) -> None:
    with pytest.raises(RepositoryError, match=f"{REPOSITORY_ENV}=.*https://github.com/<owner>/<name>"):
        published_repository({REPOSITORY_ENV: url})


@pytest.mark.parametrize("branch", ["-x", "/main", "a..b", "a b", "main;rm"])
def test_a_branch_that_is_not_a_branch_name_is_refused(branch: str) -> None:
    with pytest.raises(RepositoryError, match=BRANCH_ENV):
        published_repository({REPOSITORY_ENV: "https://github.com/acme/gnuq", BRANCH_ENV: branch})


def test_the_check_make_book_runs_first(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(REPOSITORY_ENV, raising=False)
    assert main() == 0 and "no repository named" in capsys.readouterr().out
    monkeypatch.setenv(REPOSITORY_ENV, "https://github.com/acme/gnuq")
    assert main() == 0 and "https://github.com/acme/gnuq (branch main)" in capsys.readouterr().out
    monkeypatch.setenv(REPOSITORY_ENV, "http://x")
    assert main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: GNUQ_REPOSITORY_URL='http://x'") and err.count("\n") == 1
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "-m gnuq_core.repro.repository" in makefile
    assert "chapters: setup repository" in makefile and "html: setup repository" in makefile


def test_the_book_extension_turns_the_buttons_on_and_a_bad_address_is_a_config_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from sphinx.errors import ConfigError

    spec = importlib.util.spec_from_file_location("book_pages", REPO_ROOT / "book" / "_ext" / "book_pages.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    config = type("Config", (), {"html_theme_options": {"home_page_in_toc": True}})()
    monkeypatch.delenv(REPOSITORY_ENV, raising=False)
    ext._repository_buttons(None, config)
    assert config.html_theme_options == {"home_page_in_toc": True}, "the offline build names no repository"
    monkeypatch.setenv(REPOSITORY_ENV, "https://github.com/acme/gnuq")
    ext._repository_buttons(None, config)
    assert config.html_theme_options["home_page_in_toc"] is True
    assert config.html_theme_options["repository_url"] == "https://github.com/acme/gnuq"
    monkeypatch.setenv(REPOSITORY_ENV, "https://github.com/acme")
    with pytest.raises(ConfigError, match=REPOSITORY_ENV):
        ext._repository_buttons(None, config)


def test_the_publishing_workflow_names_its_own_repository() -> None:
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "book.yml").read_text())
    build = next(s for s in workflow["jobs"]["build"]["steps"] if s.get("name") == "Build the book")
    assert build["env"][REPOSITORY_ENV] == "${{ github.server_url }}/${{ github.repository }}"
    assert build["env"][BRANCH_ENV] == "${{ github.ref_name }}"


def test_binder_writes_the_runnable_chapters_where_the_links_point(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    post_build = REPO_ROOT / "binder" / "postBuild"
    assert post_build.stat().st_mode & stat.S_IXUSR, "Binder runs postBuild only if it is executable"
    command = post_build.read_text().strip().splitlines()[-1].split()
    assert command[:3] == ["gnuq", "chapter", "runnable"] and command[command.index("--out") + 1] == RUNNABLE_FOLDER
    runtime = (REPO_ROOT / "binder" / "runtime.txt").read_text().strip()
    requires = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert runtime == "python-3.11" and ">=3.11" in requires
    monkeypatch.chdir(tmp_path)  # the command as Binder runs it, from a folder of its own
    monkeypatch.delenv(REPOSITORY_ENV, raising=False)
    assert chapters.main(command[2:]) == 0
    written = sorted(p.stem for p in (tmp_path / RUNNABLE_FOLDER).glob("*.ipynb"))
    assert written == [p.stem for p in chapters.chapters()]
    assert os.environ.get("GNUQ_OUTPUT_DIR") is None


@pytest.mark.parametrize("url", ["https://github.com/../..", "https://github.com/./.", "https://github.com/a/..",
                                 "https://github.com/../gnuq", "https://github.com/-acme/gnuq",
                                 "https://github.com/ac--me/gnuq", "https://github.com/acme/.git",
                                 "https://gitlab.com/.acme/gnuq", "https://github.com/acme/-gnuq"])
def test_a_path_segment_or_an_impossible_name_is_refused(url: str) -> None:
    """`.` and `..` would make the install line and the Binder link point elsewhere."""
    with pytest.raises(RepositoryError, match=f"^{REPOSITORY_ENV}=.* is not a repository address: the (owner|name)"):
        published_repository({REPOSITORY_ENV: url})


@pytest.mark.parametrize("url", ["https://github.com/a/b", "https://github.com/acme-labs/gnuq.book",
                                 "https://github.com/acme/.github", "https://gitlab.com/acme.labs/gnuq_1"])
def test_real_names_are_kept(url: str) -> None:
    assert published_repository({REPOSITORY_ENV: url}).url == url


@pytest.mark.parametrize("branch", [".hidden", "x.lock", "feat/.x", "feat/x.lock", "a//b", "a/", "a.", "a@{1}",
                                    "a~1", "a^", "a:b", "a?", "a*", "a[b", "a\\b", "a\x01b", "a\x7fb"])
def test_a_branch_git_refuses_is_refused(branch: str) -> None:
    with pytest.raises(RepositoryError, match=f"^{BRANCH_ENV}=.* is not a branch name: .*check-ref-format"):
        published_repository({REPOSITORY_ENV: "https://github.com/acme/gnuq", BRANCH_ENV: branch})
    with pytest.raises(RepositoryError, match="not a repository"):
        Repository("github.com", "acme", "gnuq", branch)


def test_branch_names_agree_with_git() -> None:
    """Every name accepted here is one `git check-ref-format --branch` accepts."""
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    from gnuq_core.repro.repository import branch_problem

    names = ["main", "v1.0", "feat/x", "release-2026.12", "a_b", "x.lock", ".hidden", "a..b", "a//b", "-x", "a/",
             "a.", "feat/.x", "a.lock/b", "a@{1}", "@", "a/b.c/d"]
    for name in names:
        git_ok = subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True).returncode == 0
        if branch_problem(name) is None:
            assert git_ok, f"{name!r} accepted here but refused by git"
