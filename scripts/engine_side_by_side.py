"""The gradient-norm engine of this checkout against another revision's, timed side by side in one run.

A change to the engine (`gnuq_core.estimators.norm_rules`, `gnuq_core.lm.gradient`,
`gnuq_core.lm.batched`) must keep its numbers and its speed. This script exports ``REV``'s
``gnuq_core`` into a temporary folder as the package ``gnuq_rev`` and runs, on the real models and
the QA study's own questions and stored greedy answers (TruthfulQA, the first ``--answers``
records of each model's store file), in every round and in a fresh random order:

* ``single``: `forward_backward` of each answer, one after the other (the QA study's pass);
* ``batched``: `batched_forward_backward` of all of them in one pass (``score_many``'s);

for both revisions, after one untimed warm-up each. It prints, per model and pass, the median
seconds of each revision, the median of the per-round ratios (this checkout ÷ ``REV``) with
their range, and the largest relative difference of the two revisions' ‖∇ log p‖².

    python scripts/engine_side_by_side.py HEAD~3 --rounds 7 --threads 2
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]


def export_revision(rev: str, folder: Path) -> str:
    """``rev``'s ``gnuq_core`` as the importable package ``gnuq_rev`` under ``folder``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "gnuq_core"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    (folder / "gnuq_core").rename(folder / "gnuq_rev")
    for path in (folder / "gnuq_rev").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(re.sub(r"\bgnuq_core\b", "gnuq_rev", text), encoding="utf-8")
    sys.path.insert(0, str(folder))
    return "gnuq_rev"


def stored_pairs(loaded: Any, model: str, n: int) -> list[tuple[list[int], list[int]]]:
    """The first ``n`` stored TruthfulQA records of ``model``: (prompt ids, greedy answer ids)."""
    from gnuq_core.lm.prompts import encode_prompt, format_prompt
    from gnuq_core.qa.data import load_qa

    questions = {q.id: q.question for q in load_qa("truthfulqa")}
    for path in sorted((ROOT / "results" / "qa").glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            head = json.loads(f.readline())["config"]
            if head.get("model") != model or head.get("dataset") != "truthfulqa":
                continue
            out = []
            for line in f:
                r = json.loads(line)
                if r.get("type") != "record" or not r["generation"]["answer_ids"]:
                    continue
                text = format_prompt(loaded.tokenizer, questions[r["id"]], r["style"])
                out.append((encode_prompt(loaded.tokenizer, text, r["style"]), r["generation"]["answer_ids"]))
                if len(out) == n:
                    return out
    raise SystemExit(f"engine_side_by_side: no stored TruthfulQA records of {model} under results/qa")


def main(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    from gnuq_core.lm.models import load_model

    with tempfile.TemporaryDirectory() as tmp:
        old = export_revision(args.rev, Path(tmp))
        engines = {"this checkout": "gnuq_core", args.rev: old}
        passes = {name: (importlib.import_module(f"{pkg}.lm.gradient").forward_backward,
                         importlib.import_module(f"{pkg}.lm.batched").batched_forward_backward)
                  for name, pkg in engines.items()}
        rng = random.Random(0)
        for model_name in args.models:
            loaded = load_model(model_name)
            pairs = stored_pairs(loaded, model_name, args.answers)
            prompts, answers = [p for p, _ in pairs], [a for _, a in pairs]

            def run(engine: str, kind: str) -> list[float]:
                single, batched = passes[engine]
                if kind == "single":
                    return [single(loaded.model, p, a).grad_sq for p, a in pairs]
                return [r.grad_sq for r in batched(loaded.model, prompts, answers)]

            jobs = [(e, k) for e in engines for k in ("single", "batched")]
            values = {job: run(*job) for job in jobs}  # the warm-up, and the numbers compared
            times: dict[tuple[str, str], list[float]] = {job: [] for job in jobs}
            for _ in range(args.rounds):
                rng.shuffle(jobs)
                for job in jobs:
                    start = time.perf_counter()
                    run(*job)
                    times[job].append(time.perf_counter() - start)
            lengths = [len(p) + len(a) for p, a in pairs]
            print(f"\n{model_name}: {len(pairs)} answers, {min(lengths)}–{max(lengths)} tokens, "
                  f"{args.rounds} rounds, {args.threads} threads")
            print("| pass | this checkout s | " + args.rev + " s | ratio (median [range]) | largest rel. diff |")
            print("| --- | --- | --- | --- | --- |")
            for kind in ("single", "batched"):
                new, ref = times["this checkout", kind], times[args.rev, kind]
                ratios = sorted(a / b for a, b in zip(new, ref))
                diff = max(abs(a - b) / abs(b) for a, b in zip(values["this checkout", kind], values[args.rev, kind]))
                print(f"| {kind} | {statistics.median(new):.3f} | {statistics.median(ref):.3f} | "
                      f"{statistics.median(ratios):.3f} [{ratios[0]:.3f}, {ratios[-1]:.3f}] | {diff:.1e} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the git revision to compare with (e.g. HEAD~1, main)")
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "gemma3-270m"])
    parser.add_argument("--answers", type=int, default=16, help="stored answers per model (default 16)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    main(parser.parse_args())
