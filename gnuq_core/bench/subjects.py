"""Models under test: real models by alias or path, and random models of real sizes.

Model specs (`load_subject`):

- an alias or path for `gnuq_core.lm.models.load_model` (e.g. ``smollm2-135m-instruct``);
- ``tiny-llama``: a 2-layer random Llama with a byte tokenizer (real questions, fast; the
  smoke profile and the tests);
- ``random:<arch>`` with arch in `RANDOM_ARCHS`: random weights at a real architecture's
  size, with synthetic token-id questions of realistic length (for machines without the
  weights, e.g. ``scripts/gpu_bench.sh``; timing does not depend on the weights' values);
- ``ladder:<hidden>x<layers>``: a random Llama of that size (the size ladder).

`worker_spec` gives what a separate worker process loads for the records/hour runs: the
alias itself, or a folder the model was saved to.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["IdTokenizer", "RANDOM_ARCHS", "Subject", "load_subject", "worker_spec", "num_parameters",
           "gradient_bytes"]


def num_parameters(model: Any) -> int:
    """Number of distinct parameter elements (tied matrices counted once)."""
    seen: dict[int, int] = {}
    for p in model.parameters():
        seen[id(p)] = p.numel()
    return int(sum(seen.values()))


def gradient_bytes(model: Any, bytes_per_element: int = 4) -> int:
    """Size of one full gradient of ``model`` in float32 (tied matrices once), in bytes."""
    return num_parameters(model) * bytes_per_element


class IdTokenizer:
    """Tokenizer stand-in for random models: token ids are their own text (``"w17 w4"``)."""

    chat_template = None
    unk_token_id = None

    def __init__(self, eos_token_id: int) -> None:
        self.eos_token_id = eos_token_id

    def get_vocab(self) -> dict[str, int]:
        return {}

    def convert_tokens_to_ids(self, token: str) -> None:
        return None

    def convert_ids_to_tokens(self, i: int) -> str:
        return f"w{int(i)}"

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return " ".join(f"w{int(i)}" for i in ids)


def _byte_tokenizer() -> Any:
    """Byte-level tokenizer with a chat template, built in memory (ids 0-4 special)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<bos>", "<eos>", "<|im_start|>", "<|im_end|>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                                   additional_special_tokens=specials[3:])
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return fast


def _llama_config(hidden: int, layers: int, vocab: int = 49152, **kw: Any) -> Any:
    from transformers import LlamaConfig

    heads = max(1, hidden // 64)
    return LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=int(hidden * 8 / 3) // 8 * 8,
                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=max(1, heads // 3),
                       head_dim=hidden // heads, max_position_embeddings=kw.pop("ctx", 8192), tie_word_embeddings=True,
                       pad_token_id=kw.pop("pad", 2), bos_token_id=1, eos_token_id=2, **kw)


def _smollm2_config() -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                       num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=8192,
                       rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True, pad_token_id=2,
                       bos_token_id=1, eos_token_id=2)


def _gemma3_config() -> Any:
    from transformers import Gemma3TextConfig

    return Gemma3TextConfig(vocab_size=262144, hidden_size=640, intermediate_size=2048, num_hidden_layers=18,
                            num_attention_heads=4, num_key_value_heads=1, head_dim=256, query_pre_attn_scalar=256,
                            max_position_embeddings=32768, sliding_window=512, rms_norm_eps=1e-6,
                            tie_word_embeddings=True, pad_token_id=0, bos_token_id=2, eos_token_id=1)


def _llama1b_config() -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=8192,
                       rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True, pad_token_id=128004,
                       bos_token_id=128000, eos_token_id=128001)


def _llama8b_4layers_config() -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=4,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=8192,
                       rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False, pad_token_id=128004,
                       bos_token_id=128000, eos_token_id=128001)


RANDOM_ARCHS: dict[str, Callable[[], Any]] = {
    "smollm2-135m": _smollm2_config,  # SmolLM2-135M-Instruct's config (Llama)
    "gemma3-270m": _gemma3_config,  # Gemma-3-270M's config
    "llama-1b": _llama1b_config,  # Llama-3.2-1B's config
    "llama-8b-4l": _llama8b_4layers_config,  # Llama-3-8B's layer and vocabulary sizes, 4 of its 32 layers
    "tiny": lambda: _llama_config(32, 2, vocab=512, ctx=2048, pad=0),
}


@dataclass
class Subject:
    """A model under test.

    Attributes
    ----------
    spec : str
        What was asked for.
    model, tokenizer
    style : str
        Prompt style (``"chat"``/``"fewshot"``) for text models, ``"ids"`` for synthetic.
    synthetic : bool
        Questions are random token ids (random-weight models of real architectures).
    params : int
        Distinct parameter elements.
    device : str
    load_seconds : float
    """

    spec: str
    model: Any
    tokenizer: Any
    style: str
    synthetic: bool
    params: int
    device: str
    load_seconds: float = 0.0

    @property
    def vocab(self) -> int:
        return int(self.model.get_input_embeddings().weight.shape[0])


def _random_model(config: Any, device: str, dtype: str, seed: int) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    return model.eval()


def load_subject(spec: str, device: str = "cpu", dtype: str = "float32", seed: int = 0) -> Subject:
    """Load a model spec (alias/path, ``tiny-llama``, ``random:<arch>``, ``ladder:<hidden>x<layers>``)."""
    started = time.perf_counter()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if spec == "tiny-llama":
        tok = _byte_tokenizer()
        cfg = _llama_config(32, 2, vocab=len(tok), ctx=4096, pad=0)
        model = _random_model(cfg, device, dtype, seed)
        style, synthetic = "chat", False
    elif spec.startswith("random:"):
        arch = spec.split(":", 1)[1]
        if arch not in RANDOM_ARCHS:
            raise ValueError(f"unknown random architecture {arch!r}; use one of {', '.join(RANDOM_ARCHS)}")
        model = _random_model(RANDOM_ARCHS[arch](), device, dtype, seed)
        tok, style, synthetic = IdTokenizer(int(model.config.eos_token_id)), "ids", True
    elif spec.startswith("ladder:"):
        hidden, layers = (int(x) for x in spec.split(":", 1)[1].split("x"))
        model = _random_model(_llama_config(hidden, layers), device, dtype, seed)
        tok, style, synthetic = IdTokenizer(2), "ids", True
    else:
        from gnuq_core.lm.models import load_model  # here: `gnuq bench`'s start-up imports this module, not torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lm = load_model(spec, device=device, dtype=dtype)
        model, tok, style, synthetic = lm.model, lm.tokenizer, lm.prompt_style, False
    return Subject(spec, model, tok, style, synthetic, num_parameters(model), device,
                   time.perf_counter() - started)


def worker_spec(subject: Subject, folder: str | None = None) -> str | None:
    """What a separate worker process should load to run the same model (None: it cannot).

    Real models: their alias or path. ``tiny-llama``: the model and its tokenizer saved
    to ``folder`` (a new temporary folder by default), which `gnuq_core.lm.models.load_model`
    reads like any saved Hugging Face model. Synthetic-question models (``random:``,
    ``ladder:``) have no text tokenizer, so the QA pipeline cannot run on them.
    """
    if subject.synthetic:
        return None
    if subject.spec != "tiny-llama":
        return subject.spec
    target = folder or tempfile.mkdtemp(prefix="gnuq-bench-model-")
    subject.model.save_pretrained(target)
    subject.tokenizer.save_pretrained(target)
    return target
