"""pyproject.toml and environment.yml list the same dependencies."""

from __future__ import annotations

import tomllib

import yaml

from gnuq_core.repro.paths import REPO_ROOT


def test_environment_yml_matches_pyproject() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())
    pip_deps = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert sorted(pip_deps) == sorted(project["dependencies"])
    assert "torch==2.13.0" in project["dependencies"], "torch must stay pinned (an unpinned one pulls CUDA)"
