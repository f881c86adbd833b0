"""Provenance of a chapter run: commit, profile, parameters, versions, machine, wall time.

Every chapter starts a :class:`Provenance` clock in its first cells and ends with
``prov.show()``, which shows one table (the page's footer) and writes
``<chapter>.provenance.json`` beside the executed notebook. The book reads that file back
to put a profile banner at the top of the page (:func:`banner_markdown`): the edition,
seeds, sample sizes and run time, and, for anything but the paper edition, that the
verdicts are a preview.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import os
import platform
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnuq_core.repro.display import key_value_table
from gnuq_core.repro.files import write_atomic
from gnuq_core.repro.paths import REPO_ROOT, chapter_name, generated_dir

PAPER_PROFILE = "full"
"""The profile of the paper edition; every other profile's verdicts are a preview."""

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


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; elsewhere what `platform` knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, str]:
    """CPU, core count and GPU (if torch sees one) of this machine."""
    info = {"platform": platform.platform(), "cpu": cpu_model(), "cores": str(os.cpu_count())}
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return info
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
        write_atomic(out / f"{self.chapter}.provenance.json", json.dumps(rec, indent=2, default=str))
        return rec

    def rows(self) -> list[tuple[str, str]]:
        """The provenance as (label, value) rows; saves the record first."""
        rec = self.save()
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(rec["parameters"].items()))
        pkgs = ", ".join(f"{k} {v}" for k, v in rec["packages"].items())
        dirty = {True: " (working tree had uncommitted changes)", False: "", None: ""}[rec["dirty"]]
        return [
            ("git commit", f"{rec['commit'][:12]}{dirty}"),
            ("profile", f"{rec['profile']}{'' if is_paper_edition(rec['profile']) else ' (preview)'}"),
            ("seed", f"{rec['seed']}"),
            ("parameters", params or "(defaults)"),
            ("Python", rec["python"]),
            ("packages", pkgs),
            ("machine", ", ".join(f"{k}: {v}" for k, v in rec["machine"].items())),
            ("built at", rec["built_at"]),
            ("wall time", duration_text(rec["wall_time_s"])),
        ]

    def markdown(self) -> str:
        """The provenance as a Markdown table (for terminals and Markdown readers)."""
        cells = [(k, v.replace("|", "\\|")) for k, v in self.rows()]
        return "| | |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in cells)

    def show(self) -> None:
        """Display the provenance as an HTML table (the page's footer; plain text outside Jupyter)."""
        tbl = key_value_table(self.rows(), caption="Provenance of this page")
        try:
            from IPython.display import display

            display(tbl)
        except ImportError:  # pragma: no cover - IPython is a dependency of the book
            print(tbl.plain)


def is_paper_edition(profile: str | None) -> bool:
    """Whether ``profile`` builds the paper edition (:data:`PAPER_PROFILE`)."""
    return profile == PAPER_PROFILE


def duration_text(seconds: float | None) -> str:
    """``152.3`` -> ``"2 min 32 s"``; ``None`` -> ``"unknown"``."""
    if seconds is None:
        return "unknown"
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def load_record(path: Path) -> dict[str, Any] | None:
    """The provenance record stored at ``path``, or ``None`` if the chapter left none."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else None


def seeds_and_sizes(parameters: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The seed parameters (names containing ``seed``) and sample-size parameters
    (``n_*``, ``num_*``, ``*repeats``) of a run, each sorted by name."""
    seeds = {k: v for k, v in sorted(parameters.items()) if "seed" in k}
    sizes = {k: v for k, v in sorted(parameters.items())
             if k not in seeds and (k.startswith(("n_", "num_")) or k.endswith("repeats"))}
    return seeds, sizes


def _when(iso: str | None) -> str:
    """``"2026-12-01T01:38:41+00:00"`` -> ``"2026-12-01 01:38 UTC"`` (other text unchanged)."""
    try:
        stamp = _dt.datetime.fromisoformat(str(iso)).astimezone(_dt.timezone.utc)
    except ValueError:
        return str(iso or "unknown")
    return stamp.strftime("%Y-%m-%d %H:%M UTC")


def _inline(values: dict[str, Any], words: Mapping[str, str]) -> str:
    return ", ".join(f"`{k}` = {words.get(k, _plain(v))}" for k, v in values.items()) or "none"


def _plain(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_plain(v) for v in value) + "]"
    return str(value).replace("`", "'").replace("|", "/")


def banner_markdown(record: dict[str, Any] | None, *, source_link: str | None = None,
                    runnable_link: str | None = None, launch_link: str | None = None,
                    words: Mapping[str, str] | None = None, course: str | None = None) -> str:
    """The profile banner at the top of a chapter page (MyST Markdown; its ``{term}`` links
    need the book's glossary, ``book/glossary.md``).

    Parameters
    ----------
    record : dict or None
        The chapter's provenance record (:func:`load_record`); ``None`` says no record exists.
    source_link : str, optional
        Path (relative to the page) of the chapter's Jupytext source, offered for download.
    runnable_link : str, optional
        Path of the chapter as a notebook that runs outside a checkout (`gnuq_core.book.runnable`).
    launch_link : str, optional
        Address that opens that notebook online (Binder), where the book names its repository
        (`gnuq_core.repro.repository`).
    course : str, optional
        Reading time and the quick profile's run time (`gnuq_core.book.pages.course_facts`).
    words : mapping, optional
        How to show some parameters' values (``{"n_triviaqa": "all (2,933)"}``: the chapter's
        `gnuq_core.chapters.base.ChapterParams.value_words`).
    """
    words = words or {}
    if record is None:
        return (":::{admonition} No provenance for this page\n:class: error gnuq-banner\n\n"
                "The chapter did not finish writing its provenance record: its numbers cannot be "
                "traced to a profile, commit or run time.\n:::\n")
    profile = str(record.get("profile", "unknown"))
    seeds, sizes = seeds_and_sizes(record.get("parameters", {}))
    commit = str(record.get("commit", "unknown"))[:12]
    cores, cpu = record.get("machine", {}).get("cores"), record.get("machine", {}).get("cpu", "")
    run = duration_text(record.get("wall_time_s")) + (f" on {cores} cores" if cores else "") + (
        f" ({cpu})" if cpu and cpu not in ("x86_64", "aarch64", "arm64") else "")
    if is_paper_edition(profile):
        title, cls = f"Paper edition (profile `{profile}`)", "note"
        lead = "The numbers and verdicts on this page come from the paper-grade settings ({term}`paper edition`)."
    else:
        title, cls = f"Preview (profile `{profile}`): the verdicts on this page are a preview", "warning"
        lead = (f"This page was computed with the `{profile}` {{term}}`profile`, with smaller samples than the "
                f"{{term}}`paper edition` (profile `{PAPER_PROFILE}`). Its numbers and verdicts are a "
                "{term}`preview`, not the reproduction's findings.")
    facts = [f"**Seeds:** {_inline(seeds, words)}"] if seeds else []
    facts += [f"**Sample sizes:** {_inline(sizes, words)}"] if sizes else []
    facts.append(f"**Run time:** {run} · **commit** `{commit}`{' (uncommitted changes)' if record.get('dirty') else ''}"
                 f" · **built** {_when(record.get('built_at'))}")
    if source_link:
        facts.append(f"**Source:** {{download}}`{Path(source_link).name} <{source_link}>` (Jupytext)")
    if course:
        facts.append(f"**Time:** {course}")
    if runnable_link:
        online = f", or [open it in Binder]({launch_link}) (a few minutes to start)" if launch_link else ""
        facts.append(f"**Run it yourself:** {{download}}`a notebook in the quick profile <{runnable_link}>` "
                     f"for your own Jupyter or Colab (its first cell says what it needs){online}")
    params = sorted(record.get("parameters", {}).items())
    rows = "\n".join(f"| `{k}` | {words.get(k, _plain(v))} |" for k, v in params)
    table = (":::{admonition} This build's parameters\n:class: dropdown gnuq-parameters\n\n"
             "| parameter | value |\n| --- | --- |\n" + rows + "\n:::\n") if params else ""
    return (f"::::{{admonition}} {title}\n:class: {cls} gnuq-banner\n\n{lead}\n\n"
            + "".join(f"- {fact}\n" for fact in facts) + "\n" + table + "::::\n")
