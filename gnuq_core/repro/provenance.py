"""Provenance of a chapter run: commit, profile, parameters, versions, machine, wall time.

Every chapter starts a :class:`Provenance` clock in its first cells and ends with
``prov.show()``, which prints one table and writes ``<chapter>.provenance.json`` beside the
executed notebook.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from gnuq_core.repro.paths import REPO_ROOT, chapter_name, generated_dir

KEY_PACKAGES = (
    "numpy", "scipy", "torch", "jax", "numpyro", "arviz", "transformers",
    "scikit-learn", "matplotlib", "papermill", "jupyter-book",
)


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def git_state() -> dict[str, Any]:
    """Commit hash and whether tracked files differ from it (``"unknown"`` outside git)."""
    commit = _git("rev-parse", "HEAD") or "unknown"
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no")) if commit != "unknown" else None
    return {"commit": commit, "dirty": dirty}


def package_versions(names: tuple[str, ...] = KEY_PACKAGES) -> dict[str, str]:
    """Installed versions of ``names``; packages that are absent are omitted."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return versions


def machine() -> dict[str, str]:
    """CPU, core count and GPU (if torch sees one) of this machine."""
    info = {"platform": platform.platform(), "cpu": platform.processor() or platform.machine(),
            "cores": str(os.cpu_count())}
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return info


def run_parameters() -> dict[str, Any]:
    """The resolved parameters the chapter runner passed (``GNUQ_PARAMETERS``), or ``{}``."""
    return json.loads(os.environ.get("GNUQ_PARAMETERS", "{}"))


@dataclass
class Provenance:
    """A running provenance record for one chapter.

    Attributes
    ----------
    chapter : str
        Chapter name (notebook stem), ``"interactive"`` outside the runner.
    parameters : dict
        The parameters the chapter ran with (defaults plus profile overrides).
    started : float
        ``time.time()`` when the clock started.
    """

    chapter: str
    parameters: dict[str, Any]
    started: float = field(default_factory=time.time)

    @classmethod
    def start(cls, **parameters: Any) -> "Provenance":
        """Start the clock; ``parameters`` (e.g. the notebook's) override the runner's."""
        return cls(chapter=chapter_name(), parameters={**run_parameters(), **parameters})

    def record(self) -> dict[str, Any]:
        """The provenance as a JSON-ready dict."""
        return {
            "chapter": self.chapter,
            **git_state(),
            "profile": self.parameters.get("profile", "unknown"),
            "seed": self.parameters.get("seed"),
            "parameters": self.parameters,
            "python": platform.python_version(),
            "packages": package_versions(),
            "machine": machine(),
            "built_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "wall_time_s": round(time.time() - self.started, 1),
        }

    def save(self) -> dict[str, Any]:
        """Write ``<chapter>.provenance.json`` beside the executed notebook and return it."""
        rec = self.record()
        out = generated_dir()
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{self.chapter}.provenance.json").write_text(json.dumps(rec, indent=2, default=str))
        return rec

    def markdown(self) -> str:
        """The provenance as a Markdown table."""
        rec = self.save()
        params = ", ".join(f"`{k}={v!r}`" for k, v in sorted(rec["parameters"].items()))
        pkgs = ", ".join(f"{k} {v}" for k, v in rec["packages"].items())
        dirty = {True: " (working tree had uncommitted changes)", False: "", None: ""}[rec["dirty"]]
        rows = [
            ("git commit", f"`{rec['commit'][:12]}`{dirty}"),
            ("profile", f"`{rec['profile']}`"),
            ("seed", f"`{rec['seed']}`"),
            ("parameters", params or "(defaults)"),
            ("Python", rec["python"]),
            ("packages", pkgs),
            ("machine", ", ".join(f"{k}: {v}" for k, v in rec["machine"].items())),
            ("built at", rec["built_at"]),
            ("wall time", f"{rec['wall_time_s']:.1f} s"),
        ]
        return "| | |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)

    def show(self) -> None:
        """Display the provenance table (Markdown in Jupyter, plain text elsewhere)."""
        text = self.markdown()
        try:
            from IPython.display import Markdown, display

            display(Markdown("**Provenance of this page**\n\n" + text))
        except ImportError:  # pragma: no cover - IPython is a dependency of the book
            print(text)
