"""QA benchmark loaders: TruthfulQA (generation) and TriviaQA (unfiltered dev subset).

Where the data comes from, in this order:

1. an explicit ``data_dir`` argument;
2. the ``GNUQ_DATA_DIR`` environment variable;
3. ``../shared/data`` next to the repository (this project's machines);
4. the Hugging Face hub through the ``datasets`` package, if it is installed and the
   hub is reachable (``truthful_qa``/``generation`` and ``trivia_qa``/
   ``unfiltered.nocontext``, split ``validation``);
5. otherwise a `DataNotFound` error that says what to do.

Files expected in a data folder (see its README): ``truthfulqa/TruthfulQA.csv`` and
``triviaqa/validation.jsonl``. Files are validated on load; a malformed row is an error
naming the file and line. Data is never copied into the repository.

Question ids: TruthfulQA ``tfqa_<row>`` (0-based data row of the CSV, same order as the
hub copy); TriviaQA the file's ``id`` (``tqa_`` + sha1 of the normalised question, which
is recomputed for hub rows, so both sources give the same ids).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from gnuq_core.repro.files import decode_text
from gnuq_core.repro.paths import REPO_ROOT, env_path

__all__ = ["QAItem", "DataNotFound", "DATASETS", "find_data_dir", "load_qa", "triviaqa_id"]

DATASETS = {"truthfulqa": Path("truthfulqa/TruthfulQA.csv"), "triviaqa": Path("triviaqa/validation.jsonl")}
TRUTHFULQA_HEADER = ["Type", "Category", "Question", "Best Answer", "Correct Answers", "Incorrect Answers", "Source"]


class DataNotFound(FileNotFoundError):
    """No local copy and no hub access for a dataset."""


@dataclass(frozen=True)
class QAItem:
    """One question with what is needed to judge an answer.

    Attributes
    ----------
    id : str
    question : str
    correct_answers : tuple[str, ...]
        Acceptable answers (TriviaQA aliases; TruthfulQA correct answers, best first).
    incorrect_answers : tuple[str, ...]
        TruthfulQA's listed false answers (empty for TriviaQA).
    dataset : str
    extra : dict
        Dataset-specific fields (TruthfulQA type and category).
    """

    id: str
    question: str
    correct_answers: tuple[str, ...]
    incorrect_answers: tuple[str, ...] = ()
    dataset: str = ""
    extra: dict = field(default_factory=dict, compare=False)


def triviaqa_id(question: str) -> str:
    """``tqa_`` + sha1 of the question lower-cased with non-alphanumeric runs as one space."""
    key = " ".join(re.sub(r"[^0-9a-z]+", " ", question.lower()).split())
    return "tqa_" + hashlib.sha1(key.encode()).hexdigest()[:16]


def find_data_dir(dataset: str, data_dir: str | Path | None = None) -> Path | None:
    """The folder holding ``dataset``: ``data_dir`` if given, else ``GNUQ_DATA_DIR`` (blank counts as unset),
    else ``../shared/data`` beside the repository; None where none is named and the default lacks it,
    `DataNotFound` where the named one lacks it."""
    rel = DATASETS[dataset]
    named = Path(data_dir).expanduser() if data_dir is not None else env_path("GNUQ_DATA_DIR")
    candidate = named or REPO_ROOT.parent / "shared" / "data"
    if (candidate / rel).is_file():
        return candidate
    if named is not None:
        raise DataNotFound(f"{candidate / rel} does not exist: point data_dir / GNUQ_DATA_DIR at a folder "
                           f"that contains {rel}")
    return None


def _split(cell: str) -> tuple[str, ...]:
    return tuple(a.strip() for a in cell.split(";") if a.strip())


def _read_text(path: Path) -> str:
    """The file's text (a byte-order mark and Windows line ends accepted); bytes that are not
    UTF-8 are an error naming the file, line and byte (`gnuq_core.repro.files.decode_text`)."""
    return decode_text(path.read_bytes(), path, "re-save the file as UTF-8 or restore it from the source named in "
                                                "the data README")


def _load_truthfulqa_csv(path: Path) -> list[QAItem]:
    items = []
    with io.StringIO(_read_text(path), newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header != TRUTHFULQA_HEADER:
            raise ValueError(f"{path}: header is {header}, expected {TRUTHFULQA_HEADER}: is this TruthfulQA.csv "
                             "(the original 2021 release)?")
        for i, row in enumerate(reader):
            if len(row) != 7 or not all(c.strip() for c in row[:6]):
                raise ValueError(f"{path}, data row {i} (line {i + 2}): expected 7 non-empty fields, got {row!r}")
            correct = tuple(dict.fromkeys((row[3].strip(),) + _split(row[4])))
            items.append(QAItem(f"tfqa_{i}", row[2].strip(), correct, _split(row[5]), "truthfulqa",
                                {"type": row[0], "category": row[1]}))
    if not items:
        raise ValueError(f"{path} has no data rows")
    return items


def _load_triviaqa_jsonl(path: Path) -> list[QAItem]:
    items = []
    seen: dict[str, int] = {}
    # one decoded text, so a byte that is not UTF-8 is reported with its line
    for n, line in enumerate(_read_text(path).split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}, line {n}: not valid JSON ({err})") from err
        ok = (isinstance(row, dict) and isinstance(row.get("id"), str) and isinstance(row.get("question"), str)
              and row["question"].strip() and isinstance(row.get("answers"), list) and row["answers"]
              and all(isinstance(a, str) for a in row["answers"]))
        if not ok:
            raise ValueError(f"{path}, line {n}: expected {{'id': str, 'question': str, 'answers': [str, ...]}}")
        if row["id"] in seen:
            raise ValueError(f"{path}, line {n}: id {row['id']!r} is already used on line {seen[row['id']]}: each "
                             "question needs its own id (remove the duplicate or restore the file from its source)")
        seen[row["id"]] = n
        items.append(QAItem(row["id"], row["question"].strip(), tuple(row["answers"]), (), "triviaqa"))
    if not items:
        raise ValueError(f"{path} has no rows")
    return items


def _load_hub(dataset: str) -> list[QAItem]:
    import datasets  # noqa: F401  (ImportError handled by the caller)
    from datasets import load_dataset

    if dataset == "truthfulqa":
        rows = load_dataset("truthful_qa", "generation", split="validation")
        return [QAItem(f"tfqa_{i}", r["question"].strip(),
                       tuple(dict.fromkeys([r["best_answer"].strip()] + [a.strip() for a in r["correct_answers"]])),
                       tuple(a.strip() for a in r["incorrect_answers"]), "truthfulqa",
                       {"type": r["type"], "category": r["category"]}) for i, r in enumerate(rows)]
    rows = load_dataset("trivia_qa", "unfiltered.nocontext", split="validation")
    return [QAItem(triviaqa_id(r["question"]), r["question"].strip(),
                   tuple(dict.fromkeys([r["answer"]["value"]] + list(r["answer"]["aliases"]))), (), "triviaqa")
            for r in rows]


def load_qa(dataset: str, *, data_dir: str | Path | None = None, limit: int | None = None) -> list[QAItem]:
    """Load ``"truthfulqa"`` or ``"triviaqa"`` (see the module docstring for the search order).

    Parameters
    ----------
    dataset : {"truthfulqa", "triviaqa"}
    data_dir : path, optional
        Folder containing the files listed in `DATASETS`.
    limit : int, optional
        Keep the first ``limit`` questions (file order).

    Raises
    ------
    DataNotFound
        If no local copy is found and the hub cannot be used.
    ValueError
        If the dataset name is unknown or a file is malformed.
    """
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; use one of {', '.join(DATASETS)}")
    folder = find_data_dir(dataset, data_dir)
    if folder is not None:
        path = folder / DATASETS[dataset]
        items = _load_truthfulqa_csv(path) if dataset == "truthfulqa" else _load_triviaqa_jsonl(path)
    else:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1"
        try:
            if offline:
                raise ConnectionError("HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set")
            items = _load_hub(dataset)
        except Exception as err:  # noqa: BLE001 - any failure ends in the same advice
            raise DataNotFound(
                f"no local copy of {dataset} ({DATASETS[dataset]}) and the Hugging Face hub could not be used "
                f"({type(err).__name__}: {err}). Either set GNUQ_DATA_DIR (or pass data_dir / --data-dir) to a "
                f"folder containing {DATASETS[dataset]}, or `pip install datasets` and run with network access."
            ) from err
    return items[:limit] if limit is not None else items
