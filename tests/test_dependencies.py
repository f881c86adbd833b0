"""pyproject.toml's dependencies by role, and environment.yml as their union."""

from __future__ import annotations

import tomllib

import yaml

from gnuq_core.repro.paths import REPO_ROOT

PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
TOOLING = {"jupyter-book", "sphinx-exercise", "jupytext", "papermill", "ipykernel", "pytest", "hypothesis",
           "playwright", "pyflakes", "laplace-torch", "matplotlib"}


def _name(requirement: str) -> str:
    return requirement.split("==")[0].split(">")[0].split("<")[0].split("[")[0].strip()


def test_environment_yml_is_the_union_of_the_runtime_and_the_extras() -> None:
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip_deps = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    extras = PROJECT["optional-dependencies"]
    union = PROJECT["dependencies"] + [r for name in ("book", "test", "crosscheck") for r in extras[name]]
    assert sorted(pip_deps) == sorted(union)
    assert extras["dev"] == ["gnuq[book,test,crosscheck]"]
    assert "torch==2.13.0" in PROJECT["dependencies"], "torch must stay pinned (an unpinned one pulls CUDA)"


def test_pip_install_dot_pulls_no_book_test_or_browser_tooling() -> None:
    assert not {_name(r) for r in PROJECT["dependencies"]} & TOOLING


def test_the_library_imports_without_the_extras() -> None:
    """What `pip install .` gives is enough to import the scoring, QA, Bayesian, isotropy, store and
    benchmark code and the command line (the extras' modules are made unimportable here)."""
    import subprocess
    import sys

    blocked = ["matplotlib", "IPython", "myst_nb", "papermill", "jupytext", "ipykernel", "pytest", "hypothesis",
               "playwright", "pyflakes", "laplace", "curvlinops"]
    code = ("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked) +
            "import gnuq_core.lm.scoring, gnuq_core.qa.study, gnuq_core.qa.engine, gnuq_core.estimators\n"
            "import gnuq_core.bayes.validation, gnuq_core.isotropy.spectra, gnuq_core.store, gnuq_core.bench.run\n"
            "from gnuq_core.cli import main\n"
            "sys.exit(main(['models']))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
