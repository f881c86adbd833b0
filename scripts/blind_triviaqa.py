"""Choose and blind the TriviaQA answers that get careful labels: those the graders disagree on.

Every stored TriviaQA answer of both models on which any two of the graders (exact match,
containment, the primary rule `triviaqa_contains_no_echo`) disagree gets a careful label;
where all three agree, the graders' shared label stands. ``--keys`` writes, once, the
committed ``audit/triviaqa/keys.jsonl``: an opaque key per chosen answer (``t0001`` …, in a
seeded random order, ``random.Random(20261205)``), its model, question id and
``answer_sha1``. Without it the script writes, outside git (``audit/triviaqa/work/``,
ignored), ``items.jsonl``: per key the question, its reference aliases and the stored answer,
and nothing else (no model, no grader label, no score). The labellers read only that file.

::

    python scripts/blind_triviaqa.py [--keys] [--out audit/triviaqa/work]

Exit code 0 when written, 2 on bad input (missing data or store, keys already written).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from gnuq_core.qa import grading
from gnuq_core.qa.audit import answer_digest, stored_answers
from gnuq_core.qa.data import load_qa
from gnuq_core.repro.paths import REPO_ROOT

__all__ = ["disputed", "main"]

AUDIT = REPO_ROOT / "audit" / "triviaqa"
SEED = 20261205


def disputed(answer: str, aliases: list[str], question: str) -> bool:
    """Whether any two TriviaQA graders disagree on ``answer``."""
    return len({grading.triviaqa_exact_match(answer, aliases), grading.triviaqa_contains(answer, aliases),
                grading.triviaqa_contains_no_echo(answer, aliases, question)}) > 1


def main(args: argparse.Namespace) -> int:
    items = {it.id: it for it in load_qa("triviaqa", data_dir=args.data_dir)}
    answers = stored_answers(args.results, "triviaqa")
    keys_path = AUDIT / "keys.jsonl"
    if args.keys:
        if keys_path.exists():
            raise FileExistsError(f"{keys_path} exists: the keys are written once (delete it only to start over)")
        chosen = sorted((model, qid) for (model, qid), a in answers.items()
                        if disputed(a, list(items[qid].correct_answers), items[qid].question))
        random.Random(SEED).shuffle(chosen)
        AUDIT.mkdir(parents=True, exist_ok=True)
        keys_path.write_text("".join(json.dumps({"key": f"t{n:04d}", "model": model, "id": qid,
                                                 "answer_sha1": answer_digest(answers[model, qid])}) + "\n"
                                     for n, (model, qid) in enumerate(chosen, 1)), encoding="utf-8")
        print(f"wrote {keys_path}: {len(chosen)} disputed answers of {len(answers)}")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "items.jsonl").open("w", encoding="utf-8") as f:
        for line in keys_path.read_text(encoding="utf-8").splitlines():
            key = json.loads(line)
            it, answer = items[key["id"]], answers[key["model"], key["id"]]
            f.write(json.dumps({"key": key["key"], "question": it.question, "aliases": list(it.correct_answers),
                                "answer": answer}, ensure_ascii=False) + "\n")
    print(f"wrote {out / 'items.jsonl'}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", action="store_true", help="choose the disputed answers and write keys.jsonl")
    parser.add_argument("--out", default=str(AUDIT / "work"))
    parser.add_argument("--results", default=str(REPO_ROOT / "results"))
    parser.add_argument("--data-dir", default=None, help="dataset folder (else GNUQ_DATA_DIR)")
    try:
        sys.exit(main(parser.parse_args()))
    except FileExistsError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except (KeyError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}: run it on a checkout with the results store and the TriviaQA data", file=sys.stderr)
        sys.exit(2)
