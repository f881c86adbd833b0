"""Hessian-vector products of a causal LM's next-token NLL w.r.t. one transformer block.

The input to the chosen block is computed once (a forward pre-hook captures the
arguments the model passes to it); each Hessian-vector product then re-runs only that
block, the final norm and the LM head. The curvature is that of the mean next-token NLL
of the given text at the pretrained weights, restricted to the block's parameters.
"""

from __future__ import annotations

from typing import Any, Callable

from gnuq_core.isotropy.spectra import MatVec, torch_hvp
from gnuq_core.lm.models import load_model
from gnuq_core.qa.data import load_qa

__all__ = ["tiny_random_llama", "load_smollm2", "text_token_ids", "block_inputs", "block_hvp", "block_operator", "SOURCES"]

# Models the chapter's LM block can come from: source -> name shown in the book.
SOURCES = {"smollm2": "SmolLM2-135M-Instruct", "tiny-random": "tiny random Llama (smoke test)"}


def tiny_random_llama(seed: int = 0, vocab: int = 128) -> Any:
    """A 2-layer, 32-wide random Llama (tests and the smoke profile; no download)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    return LlamaForCausalLM(cfg).eval()


def load_smollm2() -> tuple[Any, Any]:
    """``(model, tokenizer)`` of SmolLM2-135M-Instruct in float32 (via ``gnuq_core.lm.models``)."""
    lm = load_model("smollm2-135m-instruct")
    return lm.model, lm.tokenizer


def text_token_ids(tokenizer: Any, texts: list[str], n_tokens: int) -> list[int]:
    """The first ``n_tokens`` token ids of ``texts`` joined by blank lines."""
    ids: list[int] = []
    for t in texts:
        ids.extend(tokenizer(t + "\n\n", add_special_tokens=False)["input_ids"])
        if len(ids) >= n_tokens:
            break
    if len(ids) < n_tokens:
        raise ValueError(f"the texts give only {len(ids)} tokens, {n_tokens} requested")
    return ids[:n_tokens]


def block_inputs(model: Any, input_ids: list[int], layer: int = -1) -> tuple[tuple, dict[str, Any]]:
    """The positional and keyword inputs decoder block ``layer`` receives for ``input_ids``.

    One no-grad forward pass with a pre-hook on the block; tensors are detached and the KV
    cache arguments dropped, so the block can be called again on exactly these inputs
    (``block(*args, **kwargs)``) as a function of its own parameters only.
    """
    import torch

    block = model.model.layers[layer]
    captured: dict[str, Any] = {}

    def hook(_module: Any, args: tuple, kwargs: dict) -> None:
        captured["args"], captured["kwargs"] = args, kwargs

    handle = block.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor([input_ids]), use_cache=False)
    finally:
        handle.remove()
    args = tuple(a.detach() if torch.is_tensor(a) else a for a in captured["args"])
    kwargs = {k: (v.detach() if torch.is_tensor(v) else v) for k, v in captured["kwargs"].items()
              if k not in ("past_key_values", "past_key_value")}
    return args, kwargs


def block_hvp(model: Any, input_ids: list[int], layer: int = -1) -> tuple[MatVec, int, Callable[[], float]]:
    """Hessian-vector product of the mean next-token NLL w.r.t. block ``layer``'s parameters.

    Parameters
    ----------
    model : transformers causal LM with ``model.model.layers``, ``model.model.norm`` and
        ``model.lm_head`` (Llama-style).
    input_ids : list of int
        One sequence.
    layer : int
        Which block (``-1``: the last).

    Returns
    -------
    matvec, dim, loss
        Flat float64 HVP, number of block parameters, and a function returning the NLL.
    """
    import torch

    # SDPA's fused CPU kernels have no double backward: switch to eager attention before
    # the capture pass, so the causal mask is built for (and passed to) the eager kernel.
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    else:  # pragma: no cover - older transformers
        model.config._attn_implementation = "eager"
    block = model.model.layers[layer]
    args, kwargs = block_inputs(model, input_ids, layer)
    ids = torch.tensor([input_ids])
    for p in model.parameters():
        p.requires_grad_(False)
    params = [p for p in block.parameters()]
    for p in params:
        p.requires_grad_(True)
    targets = ids[0, 1:]

    def loss_fn() -> Any:
        out = block(*args, **kwargs)
        h = out[0] if isinstance(out, tuple) else out
        logits = model.lm_head(model.model.norm(h))[0, :-1]
        if logits.dtype not in (torch.float32, torch.float64):
            logits = logits.float()
        return torch.nn.functional.cross_entropy(logits, targets)

    matvec, dim = torch_hvp(loss_fn, params)

    def loss_value() -> float:
        with torch.no_grad():
            return float(loss_fn())

    return matvec, dim, loss_value


def block_operator(source: str, n_tokens: int, seed: int = 0, layer: int = -1) -> dict[str, Any]:
    """The Hessian operator of block ``layer`` of a model on ``n_tokens`` tokens of local text.

    Parameters
    ----------
    source : {"smollm2", "tiny-random"}
        SmolLM2-135M-Instruct on TruthfulQA questions (joined by blank lines, file order), or
        a tiny random Llama on random token ids drawn with ``seed`` (tests, smoke profile).
    n_tokens : int
        Length of the text.
    seed, layer : int
        Seed of the random model and text; which block (``-1``: the last).

    Returns
    -------
    dict
        ``matvec``, ``dim``, ``loss`` (see :func:`block_hvp`), ``name`` and ``n_layers``.
    """
    import numpy as np

    if source == "smollm2":
        model, tok = load_smollm2()
        ids = text_token_ids(tok, [item.question for item in load_qa("truthfulqa")], n_tokens)
    elif source == "tiny-random":
        model = tiny_random_llama(seed)
        ids = list(np.random.default_rng(seed).integers(0, model.config.vocab_size, n_tokens))
    else:
        raise ValueError(f"source must be one of {', '.join(map(repr, SOURCES))}, not {source!r}")
    matvec, dim, loss = block_hvp(model, ids, layer=layer)
    return {"matvec": matvec, "dim": dim, "loss": loss, "name": SOURCES[source], "n_layers": len(model.model.layers)}
