"""Write the blinded labelling workspace of the TruthfulQA careful labels.

The committed ``audit/truthfulqa/keys.jsonl`` maps each opaque key (``a0001`` …, a seeded
shuffle of the 2 × 817 stored answers) to its model and question id. This script writes,
outside git (``audit/truthfulqa/work/``, ignored), ``items.jsonl``: per key the question,
its correct and incorrect references (from the data) and the stored answer (from the
results store), and nothing else: no model, no grader label, no score. The labellers read
only that file.

::

    python scripts/blind_truthfulqa.py [--out audit/truthfulqa/work]

Exit code 0 when written, 2 on bad input (missing data or store).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gnuq_core.qa.audit import stored_answers
from gnuq_core.qa.data import load_qa
from gnuq_core.repro.paths import REPO_ROOT

__all__ = ["main"]

AUDIT = REPO_ROOT / "audit" / "truthfulqa"


def main(args: argparse.Namespace) -> int:
    items = {it.id: it for it in load_qa("truthfulqa", data_dir=args.data_dir)}
    answers = stored_answers(args.results, "truthfulqa")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "items.jsonl").open("w", encoding="utf-8") as f:
        for line in (AUDIT / "keys.jsonl").read_text(encoding="utf-8").splitlines():
            key = json.loads(line)
            it, answer = items[key["id"]], answers[key["model"], key["id"]]
            f.write(json.dumps({"key": key["key"], "question": it.question, "correct_references":
                                list(it.correct_answers), "incorrect_references": list(it.incorrect_answers),
                                "answer": answer}, ensure_ascii=False) + "\n")
    print(f"wrote {out / 'items.jsonl'}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(AUDIT / "work"))
    parser.add_argument("--results", default=str(REPO_ROOT / "results"))
    parser.add_argument("--data-dir", default=None, help="dataset folder (else GNUQ_DATA_DIR)")
    try:
        sys.exit(main(parser.parse_args()))
    except (KeyError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}: run it on a checkout with the results store and the TruthfulQA data", file=sys.stderr)
        sys.exit(2)
