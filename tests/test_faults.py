"""The fault battery: bad inputs to the command line (``gnuq``) and the chapter runner.

Every case must end the same way: exit status 2, exactly one line on stderr that names
the bad input, no traceback, and no change to the files already in the output folder
(nothing added, nothing rewritten). The cases run in this process against tiny random
models saved to a temporary folder (nothing is downloaded); a few also run through the
real entry points as subprocesses, to check what a user's shell sees.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_llama  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
UNWRITABLE = "/sys/gnuq-fault/run.jsonl"  # refused even to root; for other users a read-only folder is used


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Models, data, prompts and an output folder with files that must survive every case."""
    root = tmp_path_factory.mktemp("faults")
    tiny_llama(dtype=torch.float32).save_pretrained(root / "chat")
    byte_tokenizer().save_pretrained(root / "chat")
    tiny_gemma(dtype=torch.float32).save_pretrained(root / "base")
    byte_tokenizer(chat=False).save_pretrained(root / "base")
    rows = [{"id": f"tqa_{i}", "question": f"Question {i}?", "answers": ["x"]} for i in range(3)]
    for name, body in {"data": "".join(json.dumps(r) + "\n" for r in rows).encode(),
                       "latin1": (json.dumps(rows[0]) + "\n").encode() + '{"id": "tqa_9", "question": "Où?", '
                                                                          '"answers": ["x"]}\n'.encode("latin-1"),
                       "broken": (json.dumps(rows[0]) + '\n{"id": "tqa_9", "question": \n').encode()}.items():
        (root / name / "triviaqa").mkdir(parents=True)
        (root / name / "triviaqa" / "validation.jsonl").write_bytes(body)
    (root / "latin1.txt").write_bytes("Qui a écrit Hamlet ?".encode("latin-1"))
    out = root / "outputs"
    (out / "book").mkdir(parents=True)
    (out / "book" / "01_derivation.ipynb").write_text('{"executed": "before"}')
    (out / "run.jsonl").write_text(json.dumps({"type": "header", "config": {"model": "another run"}}) + "\n"
                                   + json.dumps({"type": "record", "id": "tqa_0", "x": 1}) + "\n")
    (out / "notes.txt").write_text("not a result file\n")
    (out / "afile").write_text("a file, not a folder\n")
    (out / "nullconfig.jsonl").write_text(json.dumps({"type": "header", "config": None}) + "\n")
    (out / "noid.jsonl").write_text(json.dumps({"type": "header", "config": {"model": "x"}}) + "\n"
                                    + json.dumps({"type": "record", "x": 1}) + "\n")
    (root / "dupdata" / "triviaqa").mkdir(parents=True)
    (root / "dupdata" / "triviaqa" / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [rows[0]] * 2))
    from gnuq_core.chapters import campaign as study
    from gnuq_core.repro.shards import shard_path

    params = study.chapter_parameters("full", {"n_triviaqa": 2})
    store = study.open_store("full", root=root / "badstore")
    for model in params["models"]:  # a store record without an id, where `study where` looks
        damaged = study.store_file(study._config(model, params), "triviaqa", store)
        damaged.parent.mkdir(parents=True, exist_ok=True)
        damaged.write_text(json.dumps({"type": "header", "config": {"model": model}}) + "\n"
                           + json.dumps({"type": "record", "x": 1}) + "\n")
        # a killed run's shard whose record has no id, and no main file yet: `merge` must not create one
        shard = shard_path(study.store_file(study._config(model, params), "triviaqa",
                                            study.open_store("full", root=out / "shardstore")), 0, 2)
        shard.parent.mkdir(parents=True, exist_ok=True)
        shard.write_text(json.dumps({"type": "header", "config": {"model": model}}) + "\n"
                         + json.dumps({"type": "record", "x": 1}) + "\n")
    os.mkfifo(out / "fifo")
    (root / "truncated.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(1016))  # a header cut short: 1 KB
    unwritable = UNWRITABLE
    if os.geteuid() != 0:
        (root / "readonly").mkdir()
        (root / "readonly").chmod(0o500)
        unwritable = str(root / "readonly" / "run.jsonl")
    return {"chat": str(root / "chat"), "base": str(root / "base"), "data": str(root / "data"),
            "latin1": str(root / "latin1"), "broken": str(root / "broken"), "latin1_prompt": str(root / "latin1.txt"),
            "outputs": str(out), "out": str(out / "new.jsonl"), "run": str(out / "run.jsonl"),
            "notes": str(out / "notes.txt"), "afile": str(out / "afile"), "book": str(out / "book"),
            "unwritable": unwritable, "root": str(root), "nullconfig": str(out / "nullconfig.jsonl"),
            "noid": str(out / "noid.jsonl"), "dupdata": str(root / "dupdata"), "badstore": str(root / "badstore"),
            "fifo": str(out / "fifo"), "shardstore": str(out / "shardstore"), "truncated": str(root / "truncated.gguf")}


QA = "qa --model {chat} --dataset triviaqa --data-dir {data} --samples 0 --no-p-true --no-progress"
SCORE = "score --model {chat}"
# (id, program, arguments, what the one stderr line must say, as a regular expression)
CASES = [
    ("qa-limit-negative", "gnuq", QA + " --out {out} --limit -1", r"argument --limit: must be ≥ 0 \(got -1\)"),
    ("qa-limit-not-int", "gnuq", QA + " --out {out} --limit ten", r"argument --limit: expected a whole number, got 'ten'"),
    ("qa-samples-negative", "gnuq", QA + " --out {out} --samples -2", r"argument --samples: must be ≥ 0 \(got -2\)"),
    ("qa-max-new-tokens-zero", "gnuq", QA + " --out {out} --max-new-tokens 0", r"--max-new-tokens: must be ≥ 1"),
    ("qa-temperature-zero", "gnuq", QA + " --out {out} --samples 2 --temperature 0",
     r"argument --temperature: must be ≥ 0.0001 \(got 0\)"),
    ("qa-threshold", "gnuq", QA + " --out {out} --threshold 2", r"argument --threshold: must be ≤ 1 \(got 2\)"),
    ("qa-threads-zero", "gnuq", QA + " --out {out} --threads 0", r"argument --threads: must be ≥ 1"),
    ("qa-groups-unknown", "gnuq", QA + " --out {out} --groups heads", r"argument --groups: unknown group 'heads'"),
    # issue 27: checked as the options are parsed, before data or model are loaded
    ("qa-groups-several", "gnuq", QA + " --out {out} --groups last_block,lm_head",
     r"argument --groups: 'last_block,lm_head': give one group here"),
    ("score-groups-empty-element", "gnuq", SCORE + " Q? --groups last_block,", r"argument --groups: .* names no group"),
    ("qa-threads-huge", "gnuq", QA + " --out {out} --threads 100000000", r"argument --threads: must be ≤ \d+ \(4 per core"),
    ("qa-samples-huge", "gnuq", QA + " --out {out} --samples 1000000000", r"argument --samples: must be ≤ 1024"),
    ("qa-samples-overflow", "gnuq", QA + " --out {out} --samples 99999999999999999999", r"--samples: must be ≤ 1024"),
    ("qa-temperature-inf", "gnuq", QA + " --out {out} --samples 2 --temperature inf", r"must be a finite number"),
    ("qa-temperature-tiny", "gnuq", QA + " --out {out} --samples 2 --temperature 1e-45", r"must be ≥ 0.0001 \(got 1e-45\)"),
    ("qa-seed-negative", "gnuq", QA + " --out {out} --seed -1", r"argument --seed: must be ≥ 0"),
    ("qa-max-new-tokens-huge", "gnuq", QA + " --out {out} --max-new-tokens 1000000000", r"must be ≤ 8192"),
    ("qa-out-dev-null", "gnuq", QA + " --out /dev/null", r"/dev/null is a character device, not a regular file"),
    ("qa-out-null-config", "gnuq", QA + " --out {nullconfig}", r"nullconfig.jsonl, line 1: the header's config is null"),
    ("qa-out-record-without-id", "gnuq", QA + " --out {noid}", r"noid.jsonl, line 2: a record without an id"),
    ("qa-data-duplicate-id", "gnuq", QA.replace("{data}", "{dupdata}") + " --out {out}",
     r"line 2: id 'tqa_0' is already used on line 1"),
    ("bench-ladder-not-a-pair", "bench", "--tiny --ladder 64", r"argument --ladder: '64': write it as AxB"),
    ("bench-out-under-a-file", "bench", "--tiny --out {afile}/bench.json", r"afile is a file, not a folder"),
    ("study-threads-huge", "study", "fill --dataset triviaqa --threads 100000000", r"argument --threads: must be ≤"),
    ("study-where-damaged-store", "study", "where --dataset triviaqa --store-root {badstore} --set n_triviaqa=2",
     r"line 2: a record without an id"),
    ("study-merge-damaged-shard", "study", "merge --dataset triviaqa --store-root {shardstore} --set n_triviaqa=2",
     r"rank0of2.jsonl, line 2: a record without an id"),
    ("chapter-value-infinite", "chapters", "run 04 --out {book} --set alpha=1e999",
     r"^error: 04_mcmc_validation: parameter alpha=inf must be a finite number$"),
    ("chapter-value-nan-word", "chapters", "run 04 --out {book} --set alpha=nan", r"alpha=nan must be a finite number"),
    ("chapter-list-infinite", "chapters", "run 02 --out {book} --set deltas=[0.0,1e999]", r"element inf must be a finite"),
    ("chapter-threads-huge", "chapters", "run 07 --out {book} --set threads=100000", r"threads=100000 must be ≤"),
    ("chapter-list-inf-words", "chapters", "run 02 --out {book} --set deltas=[inf,-inf]",
     r"^error: 02_proxy_bias: parameter deltas=\[inf, -inf\] element inf must be a finite number$"),
    ("chapter-list-yaml-nan", "chapters", "run 02 --out {book} --set deltas=[.nan]", r"element nan must be a finite"),
    ("chapter-size-huge", "chapters", "run 02 --out {book} --set n_seeds=1000000000",
     r"n_seeds=1000000000 must be ≤ 1,000,000 \(more exhausts memory"),
    ("chapter-list-size-huge", "chapters", "run 03 --out {book} --set widths=[8,100000000]",
     r"element 100000000 must be ≤ 1,000,000"),
    ("chapter-size-huge-07", "chapters", "run 07 --out {book} --set repeats=10000000000",
     r"repeats=10000000000 must be ≤ 1,000,000"),
    ("bench-device-meta", "bench", "--tiny --device meta", r"^error: device 'meta' holds no numbers"),
    ("bench-device-xpu", "bench", "--tiny --device xpu", r"^error: device 'xpu' is not available"),
    ("bench-dtype-int8", "bench", "--tiny --dtype int8", r"^error: unknown dtype 'int8'"),
    ("bench-ladder-huge", "bench", "--tiny --ladder 100000000x100000000", r"'100000000x100000000': must be ≤ 65536"),
    ("bench-ladder-too-big-for-memory", "bench", "--tiny --ladder 32768x1024",
     r"'32768x1024': a model of that size needs about .* GiB for its gradient pass, more than half"),
    ("bench-layouts-huge", "bench", "--tiny --layouts 2x100000", r"'2x100000': must be ≤ \d+ \(4 per core"),
    ("bench-repeats-huge", "bench", "--tiny --repeats 1000000000", r"argument --repeats: must be ≤ 1,000,000"),
    ("qa-device-meta", "gnuq", QA + " --out {out} --device meta", r"^error: device 'meta' holds no numbers"),
    ("qa-device-xpu", "gnuq", QA + " --out {out} --device xpu", r"^error: device 'xpu' is not available"),
    ("qa-out-fifo", "gnuq", QA + " --out {fifo}", r"fifo is a named pipe \(FIFO\), not a regular file"),
    ("qa-out-dev-full", "gnuq", QA + " --out /dev/full", r"/dev/full is a character device, not a regular file"),
    ("qa-model-gguf-truncated", "gnuq", QA.replace("{chat}", "{truncated}") + " --out {out}",
     r"^error: .*truncated.gguf \(1,024 bytes\) cannot be read as a GGUF model"),
    ("qa-dtype-unknown", "gnuq", QA + " --out {out} --dtype int8", r"unknown dtype 'int8'"),
    ("qa-device-unknown", "gnuq", QA + " --out {out} --device gpu", r"unknown device 'gpu'"),
    ("qa-device-cuda", "gnuq", QA + " --out {out} --device cuda",
     r"^error: CUDA is not available in this torch build; use --device cpu$"),
    ("qa-dataset-unknown", "gnuq", QA.replace("triviaqa", "squad") + " --out {out}", r"invalid choice: 'squad'"),
    ("qa-out-missing", "gnuq", QA, r"the following arguments are required: --out"),
    ("qa-out-is-directory", "gnuq", QA + " --out {outputs}", r"outputs is a directory: --out needs a file path"),
    ("qa-out-parent-is-file", "gnuq", QA + " --out {afile}/run.jsonl", r"afile/run.jsonl: .*afile is a file, not a folder"),
    ("qa-out-unwritable", "gnuq", QA + " --out {unwritable}", r"run.jsonl: (no permission|cannot create)"),
    ("qa-out-other-run", "gnuq", QA + " --out {run}", r"run.jsonl belongs to a run with a different configuration"),
    ("qa-out-not-gnuq", "gnuq", QA + " --out {notes}", r"notes.txt exists but has no gnuq header line"),
    ("qa-model-gguf-missing", "gnuq", QA.replace("{chat}", "{root}/nope.gguf") + " --out {out}",
     r"^error: file not found: .*nope\.gguf$"),
    ("qa-model-relative-gguf", "gnuq", QA.replace("{chat}", "models/nope.gguf") + " --out {out}",
     r"^error: file not found: models/nope\.gguf"),
    ("score-model-folder-missing", "gnuq", "score --model ./nope Q?", r"^error: file not found: \./nope \(relative to "),
    ("score-hub-unreachable", "gnuq", "score --model nobody/nothing Q?",
     r"cannot load 'nobody/nothing' from the Hugging Face hub .*give a local path"),
    ("qa-model-unknown", "gnuq", QA.replace("{chat}", "smollm3") + " --out {out}", r"unknown model 'smollm3'"),
    ("qa-data-dir-missing", "gnuq", QA.replace("{data}", "{root}/nowhere") + " --out {out}",
     r"nowhere/triviaqa/validation.jsonl does not exist: point --data-dir / GNUQ_DATA_DIR"),
    ("qa-data-not-utf8", "gnuq", QA.replace("{data}", "{latin1}") + " --out {out}",
     r"validation.jsonl, line 2: not UTF-8 text \(byte 0xf9"),
    ("qa-data-broken-json", "gnuq", QA.replace("{data}", "{broken}") + " --out {out}",
     r"validation.jsonl, line 2: not valid JSON"),
    ("score-empty-prompt", "gnuq", SCORE + " ' '", r"the prompt is empty"),
    ("score-no-prompt", "gnuq", SCORE, r"give the prompt either as an argument or with --prompt-file"),
    ("score-prompt-twice", "gnuq", SCORE + " Q? --prompt-file {latin1_prompt}", r"either as an argument or"),
    ("score-prompt-not-utf8", "gnuq", SCORE + " caf\udce9?", r"prompt is not valid UTF-8 text \(byte 0xe9"),
    ("score-prompt-file-missing", "gnuq", SCORE + " --prompt-file {root}/nope.txt", r"--prompt-file .*nope.txt: file not found"),
    ("score-prompt-file-not-utf8", "gnuq", SCORE + " --prompt-file {latin1_prompt}",
     r"--prompt-file .*latin1.txt, line 1: not UTF-8 text \(byte 0xe9\)"),
    ("score-answer-empty", "gnuq", SCORE + " Q? --answer ' '", r"--answer is empty: leave out --answer"),
    ("score-chat-on-base-model", "gnuq", "score --model {base} Q? --style chat", r"no chat template.*--style fewshot"),
    ("score-prediction-unknown", "gnuq", SCORE + " Q? --prediction mean", r"argument --prediction: invalid choice"),
    ("command-unknown", "gnuq", "scroe", r"invalid choice: 'scroe'"),
    ("chapter-value-out-of-range", "chapters", "run 01 --out {book} --set n_mc=-5",
     r"^error: 01_derivation: parameter n_mc=-5 must be ≥ 1$"),
    ("chapter-value-not-a-choice", "chapters", "run 03 --out {book} --set lm_source=gpt2",
     r"lm_source='gpt2' must be one of"),
    ("chapter-empty-list", "chapters", "run 05 --out {book} --set widths=[]", r"widths=\[\] must not be empty"),
    ("chapter-wrong-type", "chapters", "run 01 --out {book} --set n_mc=many", r"n_mc='many' is text"),
    ("chapter-unknown-parameter", "chapters", "run 01 --out {book} --set n_mcc=5", r"unknown parameter\(s\) n_mcc"),
    ("chapter-malformed-set", "chapters", "run 01 --out {book} --set n_mc", r"--set 'n_mc': expected NAME=VALUE"),
    ("chapter-unknown", "chapters", "run 77 --out {book}", r"no chapter '77'"),
    ("chapter-unknown-profile", "chapters", "run 01 --out {book} --profile fast", r"unknown profile 'fast'"),
    ("chapter-out-is-file", "chapters", "run 01 --out {afile}", r"--out .*afile is a file"),
    ("chapter-command-unknown", "chapters", "runn 01", r"invalid choice: 'runn'"),
]


def _argv(arguments: str, place: dict[str, str]) -> list[str]:
    import shlex

    return [a.format(**place) for a in shlex.split(arguments)]


def _snapshot(folder: str) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def _call(program: str, argv: list[str]) -> int:
    from gnuq_core.cli import main as gnuq
    from gnuq_core.book.runner import main as chapters

    from gnuq_core.bench.__main__ import main as bench
    from gnuq_core.chapters.campaign import main as study

    try:
        return {"gnuq": gnuq, "chapters": chapters, "bench": bench, "study": study}[program](argv)
    except SystemExit as stop:  # argparse usage errors
        return int(stop.code)


@pytest.mark.parametrize("name, program, arguments, says", CASES, ids=[c[0] for c in CASES])
def test_bad_input(name: str, program: str, arguments: str, says: str, place: dict[str, str],
                   capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import re

    if name == "qa-device-cuda" and torch.backends.cuda.is_built():
        pytest.skip("this torch build has CUDA")
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    before = _snapshot(place["outputs"])
    code = _call(program, _argv(arguments, place))
    out, err = capfd.readouterr()
    assert code == 2, f"exit status {code}; stderr: {err!r}"
    assert "Traceback" not in err and "Traceback" not in out
    assert len(err.splitlines()) == 1 and err.endswith("\n"), f"expected one line on stderr, got {err!r}"
    assert re.search(says, err.strip()), f"{err.strip()!r} does not match {says!r}"
    assert not re.search(r"=None|mapping \{|data_dir /|style='", err), f"library wording in {err!r}"
    assert _snapshot(place["outputs"]) == before, "an existing output file changed"


# What the user's shell sees: the real entry points as processes, started together.
SHELL = [
    ("qa-limit-negative", [sys.executable, "-m", "gnuq_core.cli", "qa", "--model", "{chat}", "--dataset", "triviaqa",
                           "--data-dir", "{data}", "--out", "{out}", "--limit", "-1"], r"--limit: must be ≥ 0"),
    ("score-prompt-bytes", [sys.executable, "-m", "gnuq_core.cli", "score", "--model", "{chat}", b"caf\xe9?"],
     r"prompt is not valid UTF-8 text \(byte 0xe9"),
    ("chapter-out-of-range", [sys.executable, "-m", "gnuq_core.book.runner", "run", "01", "--out", "{book}",
                              "--set", "n_mc=-5"], r"n_mc=-5 must be ≥ 1"),
    ("usage", [sys.executable, "-m", "gnuq_core.cli", "qa", "--model", "{chat}"],
     r"^error: the following arguments are required: --dataset, --out \(see gnuq qa --help\)$"),
]


@pytest.mark.subprocess
def test_bad_input_through_the_entry_points(place: dict[str, str], tmp_path: Path) -> None:
    import re

    env = {**os.environ, "PYTHONPATH": str(ROOT), "GNUQ_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    before = _snapshot(place["outputs"])
    procs = [(name, subprocess.Popen([a.format(**place) if isinstance(a, str) else a for a in argv], cwd=tmp_path,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE), says)
             for name, argv, says in SHELL]
    for name, proc, says in procs:
        out, err = proc.communicate(timeout=300)
        text = err.decode(errors="replace")
        assert proc.returncode == 2, (name, proc.returncode, text)
        assert "Traceback" not in text and len(text.splitlines()) == 1, (name, text)
        assert re.search(says, text.strip()), (name, text)
    assert _snapshot(place["outputs"]) == before
