"""laplace-torch is a pinned dependency of the cross-checks (extra ``crosscheck``) and imports (no broken
torchvision in the way)."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from gnuq_core.repro.paths import REPO_ROOT


def test_laplace_torch_is_pinned() -> None:
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("laplace-torch==0.3") for d in extras["crosscheck"])


@pytest.mark.subprocess
def test_import_laplace_in_a_fresh_interpreter() -> None:
    """A torchvision whose compiled ops do not load (a CUDA build beside a CPU torch) breaks
    `import laplace` (through torchmetrics); `make setup` removes such a torchvision."""
    out = subprocess.run([sys.executable, "-c", "import laplace, curvlinops; from laplace import Laplace"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, ("import laplace failed; if the error names torchvision::nms, run "
                                 "`pip uninstall torchvision` (make setup does):\n" + out.stderr[-2000:])
