"""gnuq_core.cli on a tiny model saved to a folder (no download, no real model)."""

from __future__ import annotations


import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
from pathlib import Path

import pytest
import torch

from gnuq_core.cli import main
from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_llama


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    tiny_llama(dtype=torch.float32).save_pretrained(root / "chat")
    byte_tokenizer().save_pretrained(root / "chat")
    tiny_gemma(dtype=torch.float32).save_pretrained(root / "base")
    byte_tokenizer(chat=False).save_pretrained(root / "base")
    return root


def test_score_table_and_json(folders, capsys):
    assert main(["score", "--model", str(folders / "chat"), "Who wrote Hamlet?", "--max-new-tokens", "3",
                 "--p-true"]) == 0
    out = capsys.readouterr().out
    assert "answer:" in out and "log10 epistemic" in out and "p_true" in out and "(chat prompt)" in out
    assert main(["score", "--model", str(folders / "base"), "Q?", "--answer", "yes", "--json",
                 "--groups", "lm_head,last_block", "--prediction", "normalized"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["answer"] == "yes" and d["style"] == "fewshot" and d["prediction"] == "normalized"
    assert set(d["normalized"]["group_sq_norms"]) == {"lm_head", "last_block"}


def test_bad_input_exits_2_with_advice(folders, capsys):
    assert main(["score", "--model", "nope-model", "Q?"]) == 2
    assert "Known aliases: smollm2-135m-instruct" in capsys.readouterr().err
    assert main(["score", "--model", str(folders / "chat"), "   "]) == 2
    assert "empty" in capsys.readouterr().err
    assert main(["score", "--model", str(folders / "base"), "Q?", "--style", "chat"]) == 2
    assert "no chat template" in capsys.readouterr().err
    assert main(["models"]) == 0
    assert "gemma3-270m" in capsys.readouterr().out


def test_qa_resumable_and_config_mismatch(folders, tmp_path, capsys):
    data = tmp_path / "data" / "triviaqa"
    data.mkdir(parents=True)
    data.joinpath("validation.jsonl").write_text("".join(
        json.dumps({"id": f"tqa_{i}", "question": f"Question {i}?", "answers": ["x"]}) + "\n" for i in range(3)))
    out = tmp_path / "run.jsonl"
    args = ["qa", "--model", str(folders / "chat"), "--dataset", "triviaqa", "--data-dir", str(tmp_path / "data"),
            "--out", str(out), "--samples", "2", "--clusterer", "exact", "--max-new-tokens", "2", "--no-progress"]
    assert main(args + ["--limit", "2"]) == 0  # --limit selects the slice; it is not part of the config
    capsys.readouterr()
    assert main(args + ["--limit", "3"]) == 0
    assert "wrote 1 new records" in capsys.readouterr().out
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x.get("id") for x in lines[1:]] == ["tqa_0", "tqa_1", "tqa_2"]
    assert main(args + ["--temperature", "0.5"]) == 2
    assert "different configuration" in capsys.readouterr().err


def _data(root, questions):
    data = root / "data" / "triviaqa"
    data.mkdir(parents=True, exist_ok=True)
    data.joinpath("validation.jsonl").write_text("".join(
        json.dumps({"id": f"tqa_{i}", "question": q, "answers": ["x"]}) + "\n" for i, q in enumerate(questions)))
    return root / "data"


def _qa_args(model, data, out):
    return ["qa", "--model", str(model), "--dataset", "triviaqa", "--data-dir", str(data), "--out", str(out),
            "--samples", "0", "--no-p-true", "--max-new-tokens", "2", "--no-progress"]


def _no_model(monkeypatch):
    import gnuq_core.cli as cli

    def refuse(args):
        raise AssertionError("the model must not be loaded")

    monkeypatch.setattr(cli, "_load", refuse)


def test_limit_negative_is_refused_and_zero_loads_no_model(folders, tmp_path, capsys, monkeypatch):
    _no_model(monkeypatch)
    args = _qa_args(folders / "chat", _data(tmp_path, ["Q?"]), tmp_path / "run.jsonl")
    assert main(args + ["--limit", "-1"]) == 2
    assert capsys.readouterr().err.strip() == "error: argument --limit: must be ≥ 0 (got -1) (see gnuq qa --help)"
    assert main(args + ["--limit", "0"]) == 0
    assert "--limit 0 selects no questions" in capsys.readouterr().out
    assert not (tmp_path / "run.jsonl").exists()


@pytest.mark.parametrize("case", ["directory", "parent_is_file"])
def test_unusable_out_is_one_line_before_the_model_loads(folders, tmp_path, capsys, monkeypatch, case):
    _no_model(monkeypatch)
    (tmp_path / "f").write_text("x")
    out, want = (tmp_path, "is a directory") if case == "directory" else (tmp_path / "f" / "r.jsonl", "is a file")
    assert main(_qa_args(folders / "chat", _data(tmp_path, ["Q?"]), out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and want in err and str(out) in err


def test_prompt_file_and_standard_input(folders, tmp_path, capsys, monkeypatch):
    import io
    import sys

    q = tmp_path / "q.txt"
    q.write_text("Who wrote Hamlet?\n")
    assert main(["score", "--model", str(folders / "chat"), "--prompt-file", str(q), "--answer", "x", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["prompt"] == "Who wrote Hamlet?\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("Qui a écrit Hamlet ?".encode())))
    assert main(["score", "--model", str(folders / "chat"), "--prompt-file", "-", "--answer", "x", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["prompt"] == "Qui a écrit Hamlet ?"
    # a prompt too long for any command line gets through, and is refused by the model's context
    q.write_text("word " * 40_000)
    assert main(["score", "--model", str(folders / "chat"), "--prompt-file", str(q), "--max-new-tokens", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the prompt has" in err and "max-new-tokens" not in err  # fewer cannot help
    q.write_text("word " * 50)  # fits the 512-token context, but not with 300 new tokens
    assert main(["score", "--model", str(folders / "chat"), "--prompt-file", str(q), "--max-new-tokens", "300"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "or lower --max-new-tokens to at most" in err


def test_non_utf8_prompt_bytes_are_a_clear_error(folders, tmp_path, capsys):
    assert main(["score", "--model", str(folders / "chat"), "caf\udce9?"]) == 2  # argv bytes b"caf\xe9?"
    assert capsys.readouterr().err.strip() == ("error: the prompt is not valid UTF-8 text (byte 0xe9 at character 3): "
                                               "save or type it as UTF-8")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("first line\ncafé?".encode("latin-1"))
    assert main(["score", "--model", str(folders / "chat"), "--prompt-file", str(bad)]) == 2
    assert f"--prompt-file {bad}, line 2: not UTF-8 text (byte 0xe9)" in capsys.readouterr().err


def test_cuda_without_cuda_names_the_fix(folders, capsys, monkeypatch):
    _no_model(monkeypatch)
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: False)
    assert main(["score", "--model", str(folders / "chat"), "Q?", "--device", "cuda"]) == 2
    assert capsys.readouterr().err == "error: CUDA is not available in this torch build; use --device cpu\n"


def test_messages_speak_in_cli_flags(folders, capsys, monkeypatch):
    _no_model(monkeypatch)
    assert main(["score", "--model", str(folders / "chat"), "Q?", "--answer", "  "]) == 2
    err = capsys.readouterr().err
    assert "leave out --answer" in err and "answer=None" not in err
    assert main(["score", "--model", str(folders / "chat"), "Q?", "--groups", "lm_head,nope"]) == 2
    err = capsys.readouterr().err
    assert "argument --groups: unknown group 'nope'" in err and "mapping" not in err


def test_a_question_too_long_stops_the_run_naming_it_and_keeps_the_rest(folders, tmp_path, capsys):
    out = tmp_path / "run.jsonl"
    data = _data(tmp_path, ["Question 0?", "Question 1?", "x" * 200_000, "Question 3?"])
    assert main(_qa_args(folders / "chat", data, out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: question tqa_2: the prompt has")
    assert f"2 records kept in {out}, and a rerun stops at this question again: remove it from the data file, or " \
           "stop before it with --limit" in err and "resume" not in err
    assert [x.get("id") for x in map(json.loads, out.read_text().splitlines())] == [None, "tqa_0", "tqa_1"]


SLOW_QA = """
import sys, time
import gnuq_core.qa.engine as engine
real = engine.question_record
def slow(*args, **kwargs):
    time.sleep(0.2)  # a real model takes seconds per question; keep the run alive while the test acts
    return real(*args, **kwargs)
engine.question_record = slow
from gnuq_core.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.subprocess
def test_two_qa_runs_on_one_out_and_ctrl_c(folders, tmp_path):
    """Two real processes on one --out: the second is refused naming the first; Ctrl-C keeps what was written."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    out = tmp_path / "run.jsonl"
    args = _qa_args(folders / "chat", _data(tmp_path, [f"Question {i}?" for i in range(300)]), out)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1"}
    def as_from_a_terminal() -> None:
        """SIGINT's default action, unblocked, even where this test process ignores or blocks it
        (children inherit both; under make test's workers an earlier test can leave it ignored,
        and the run then went on to the end and exited 0)."""
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    first = subprocess.Popen([sys.executable, "-c", SLOW_QA, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, preexec_fn=as_from_a_terminal)
    try:
        deadline = time.time() + 120
        while not (out.exists() and out.read_text().count("\n") >= 2) and time.time() < deadline:
            time.sleep(0.2)
        assert first.poll() is None, first.communicate()
        second = subprocess.run([sys.executable, "-m", "gnuq_core.cli", *args], capture_output=True, text=True,
                                env=env, timeout=300)
        assert second.returncode == 2
        assert second.stderr == (f"error: {out} is being written by another process (pid {first.pid}): wait for it "
                                 "to finish, or choose another --out\n")
        assert first.poll() is None, "the first run must still be running"
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    finally:
        first.kill()
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    ids = [x["id"] for x in lines[1:]]
    assert first.returncode == 130
    assert err == f"interrupted: {len(ids)} record{'s' if len(ids) != 1 else ''} kept in {out}; rerun the same command to resume\n"
    assert [x["type"] for x in lines].count("header") == 1 and ids == [f"tqa_{i}" for i in range(len(ids))]
    assert main(args + ["--limit", str(len(ids) + 2)]) == 0  # resumes: two new records, no duplicates
    assert [json.loads(x).get("id") for x in out.read_text().splitlines()[1:]] == [f"tqa_{i}" for i in range(len(ids) + 2)]


def test_every_rewritten_library_phrase_is_still_what_the_library_says(tmp_path):
    """`cli._CLI_WORDS` rewrites library advice in CLI words: each phrase must still occur in the
    library's real message, or the rewrite silently stops working."""
    from gnuq_core import cli
    from gnuq_core.lm.anatomy import resolve_groups
    from gnuq_core.lm.decoding import check_length
    from gnuq_core.lm.models import load_model
    from gnuq_core.lm.prompts import check_style, encode_answer
    from gnuq_core.qa.data import find_data_dir

    messages = []
    for call in (lambda: encode_answer(byte_tokenizer(), " ", "chat"),
                 lambda: check_style(byte_tokenizer(chat=False), "chat"),
                 lambda: resolve_groups(tiny_llama(), "nope"),
                 lambda: check_length(tiny_llama(), 510, 10),
                 lambda: find_data_dir("triviaqa", tmp_path / "nowhere"),
                 lambda: load_model(str(_custom_code_model(tmp_path / "custom")))):
        with pytest.raises((ValueError, OSError)) as err:
            call()
        messages.append(str(err.value))
    for library, _ in cli._CLI_WORDS:
        assert any(library in m for m in messages), f"no library message says {library!r} any more"


def test_a_nul_byte_or_an_invisible_prompt_is_one_line(folders, tmp_path, capsys, monkeypatch):
    import io
    import sys

    _no_model(monkeypatch)
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"Who wrote\nHam\x00let?")
    assert main(["score", "--model", str(folders / "chat"), "--prompt-file", str(nul)]) == 2
    assert capsys.readouterr().err == (f"error: --prompt-file {nul}, line 2: contains a NUL byte (a binary file, or "
                                       "UTF-16?): save the prompt as UTF-8 text\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("Q?".encode("utf-16"))))
    assert main(["score", "--model", str(folders / "chat"), "--prompt-file", "-"]) == 2
    assert "--prompt-file - (standard input), line 1: contains a NUL byte" in capsys.readouterr().err
    for prompt in ("\u200b", "\x01\x02"):
        assert main(["score", "--model", str(folders / "chat"), prompt]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "the prompt has no visible character" in err


def test_a_chat_template_the_sandbox_stops_is_one_line(tmp_path, capsys):
    folder = tmp_path / "evil"
    tiny_llama(dtype=torch.float32).save_pretrained(folder)
    tok = byte_tokenizer()
    tok.chat_template = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    tok.save_pretrained(folder)
    assert main(["score", "--model", str(folder), "Who?", "--answer", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: the model's chat template tried something jinja2's sandbox")
    assert "--style fewshot" in err and "Traceback" not in err


def test_limit_zero_checks_the_data_and_the_out_file_too(folders, tmp_path, capsys, monkeypatch):
    """--limit 0 says "valid" only after the data and --out are checked (never for a missing folder)."""
    _no_model(monkeypatch)
    out = tmp_path / "run.jsonl"
    assert main(_qa_args(folders / "chat", tmp_path / "nowhere", out) + ["--limit", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere" in err and "--data-dir" in err and not out.exists()
    data = _data(tmp_path, ["Q?"])
    out.write_text(json.dumps({"type": "header", "config": {"model": "other"}}) + "\n")
    assert main(_qa_args(folders / "chat", data, out) + ["--limit", "0"]) == 2
    assert "belongs to a run with a different configuration" in capsys.readouterr().err
    out.write_text("not a result file\n")
    assert main(_qa_args(folders / "chat", data, out) + ["--limit", "0"]) == 2
    assert "has no gnuq header line" in capsys.readouterr().err
    assert out.read_text() == "not a result file\n"


@pytest.mark.parametrize("value, says", [("-inf", "must be a finite number (got -inf)"),
                                         ("-1e-3", "must be ≥ 0.0001 (got -1e-3)"),
                                         ("-NaN", "must be a finite number (got -NaN)")])
def test_a_negative_value_is_read_as_a_value_not_a_flag(folders, tmp_path, capsys, monkeypatch, value, says):
    _no_model(monkeypatch)
    args = _qa_args(folders / "chat", _data(tmp_path, ["Q?"]), tmp_path / "run.jsonl")
    assert main(args + ["--temperature", value]) == 2
    assert capsys.readouterr().err == f"error: argument --temperature: {says} (see gnuq qa --help)\n"


@pytest.mark.parametrize("case", ["file", "read_only"])
def test_an_unusable_cache_folder_is_one_line_naming_the_variable(tmp_path, capsys, monkeypatch, case):
    import os

    from gnuq_core.repro import paths

    target = tmp_path / "cache"
    if case == "file":
        target.write_text("x")
    else:  # tests may run as root, for whom no folder is read-only: the check asks os.access
        real = os.access
        monkeypatch.setattr(paths.os, "access", lambda p, mode: False if Path(p) == target else real(p, mode))
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(target))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert main(["score", "--model", str(gguf), "Q?"]) == 2
    err = capsys.readouterr().err
    want = ("is a file, not a folder: point GNUQ_CACHE_DIR to a folder" if case == "file"
            else "is read-only: point GNUQ_CACHE_DIR to a writable folder")
    assert err == f"error: GNUQ_CACHE_DIR={target} {want}\n"


def _custom_code_model(folder: Path) -> Path:
    """A saved tiny model whose config.json asks for its own code (which must never run)."""
    tiny_llama(dtype=torch.float32).save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="custom_x", auto_map={"AutoConfig": "configuration_x.XConfig",
                                                  "AutoModelForCausalLM": "modeling_x.XForCausalLM"})
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "configuration_x.py").write_text("raise SystemExit('custom code ran')\n")
    return folder


def test_a_model_with_its_own_code_names_the_cli_flag(tmp_path, capsys):
    assert main(["score", "--model", str(_custom_code_model(tmp_path / "custom")), "Q?"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rerun with --trust-remote-code if you trust its source" in err
    assert "trust_remote_code=True" not in err and "hf.co" not in err


@pytest.mark.subprocess
def test_an_output_encoding_without_the_characters_falls_back_to_escapes(folders):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    run = subprocess.run([sys.executable, "-m", "gnuq_core.cli", "score", "--model", str(folders / "chat"),
                          "Qui a écrit ‖Hamlet‖ ?", "--answer", "x"], capture_output=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    out = run.stdout.decode("ascii")
    assert "Qui a \\xe9crit \\u2016Hamlet\\u2016 ?" in out and "epistemic" in out


def test_version_names_the_installed_package(capsys):
    import importlib.metadata

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"gnuq {importlib.metadata.version('gnuq')}"
