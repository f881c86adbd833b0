"""A non-editable install ships every subpackage (an editable install would hide a missing one)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gnuq_core.repro.paths import REPO_ROOT


@pytest.mark.subprocess
def test_wheel_contains_and_imports_every_subpackage(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, src / name)
    shutil.copytree(REPO_ROOT / "gnuq_core", src / "gnuq_core", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(tmp_path / "dist"), str(src)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("gnuq-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    sources = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "gnuq_core").rglob("*.py")}
    assert not sources - shipped, f"missing from the wheel: {sorted(sources - shipped)}"
    times = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "gnuq_core" / "profiles").glob("times.json")}
    assert times <= shipped, "the chapters' run times must travel with the package (their pages state them)"
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    packages = sorted({str(Path(s).parent).replace("/", ".") for s in sources if s.endswith("__init__.py")})
    code = ("import importlib, sys\n"
            f"for p in {packages!r}:\n"
            "    m = importlib.import_module(p)\n"
            f"    assert m.__file__.startswith({str(site)!r}), m.__file__\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    # the chapter sources travel too: an installed gnuq lists its chapters and writes a runnable one
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    listed = subprocess.run([sys.executable, "-m", "gnuq_core.book.runner", "list"], cwd=tmp_path,
                            capture_output=True, text=True, env=env)
    assert listed.returncode == 0 and "01_derivation" in listed.stdout and "90_claims_ledger" in listed.stdout
    wrote = subprocess.run([sys.executable, "-m", "gnuq_core.book.runner", "runnable", "01", "--out",
                            str(tmp_path / "nb")], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert wrote.returncode == 0 and (tmp_path / "nb" / "01_derivation.ipynb").exists(), wrote.stderr


def test_the_citation_file_names_this_version_and_the_paper() -> None:
    import tomllib

    import yaml

    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert cff["cff-version"] == "1.2.0" and cff["version"] == project["version"]  # bump both together
    bib = (REPO_ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    arxiv = cff["preferred-citation"]["identifiers"][0]["value"]
    assert arxiv in bib and cff["preferred-citation"]["title"] in bib  # the same paper the book cites


@pytest.mark.subprocess
def test_the_front_door_names_the_public_functions_without_importing_torch() -> None:
    code = ("import sys, gnuq_core; assert 'torch' not in sys.modules; "
            "from gnuq_core import score, score_many, torch_uncertainty, load_model, ScoreResult; "
            "from gnuq_core.lm.scoring import score as s; assert score is s; "
            "assert set(gnuq_core.__all__) <= set(dir(gnuq_core))")
    subprocess.run([sys.executable, "-c", code], check=True)
    import gnuq_core

    with pytest.raises(AttributeError, match="scores_many"):  # a misspelt name, as for any module
        gnuq_core.scores_many


def test_the_api_reference_page_documents_every_name_of_the_front_door() -> None:
    import gnuq_core

    page = (REPO_ROOT / "book" / "api.md").read_text()
    assert "book/api" in (REPO_ROOT / "_toc.yml").read_text()
    missing = [f"{module}.{name}" for name, module in gnuq_core._FRONT_DOOR.items() if f"{module}.{name}" not in page]
    assert not missing, f"book/api.md does not document {missing}"
