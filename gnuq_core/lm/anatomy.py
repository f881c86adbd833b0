"""Where things are in a causal LM: decoder body, blocks, output head, and parameter groups.

One resolver for every caller (the scorer, the QA study's per-block norms, the benchmark):
`resolve_groups` turns a preset name, a list of presets or a mapping into
``{group: [parameter names]}``; `select` turns that into the unique parameter tensors of
each group. Presets: ``"all"``, ``"no_embeddings"``, ``"last_block"``, ``"lm_head"``,
``"embeddings"``, and ``"per_block"`` (one group per decoder block, plus ``"embeddings"``
and ``"other"``: the groups of the per-layer analysis).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import torch

from gnuq_core.options import PRESET_GROUPS

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def eval_mode(model: Any) -> Iterator[Any]:
    """``model`` in eval mode inside the block (dropout off: a pass in train mode gives a
    different number every call), each submodule's own mode restored on exit."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for m, training in modes:
            m.training = training


def in_eval_mode(fn: F) -> F:
    """Decorate a pass whose first argument is the model: it runs under `eval_mode`, so a
    model left in train mode gives the eval-mode number and gets its mode back."""
    @functools.wraps(fn)
    def wrapper(model: Any, *args: Any, **kwargs: Any) -> Any:
        if not getattr(model, "training", False):
            return fn(model, *args, **kwargs)
        with eval_mode(model):
            return fn(model, *args, **kwargs)
    return wrapper  # type: ignore[return-value]


def decoder_of(model: Any) -> torch.nn.Module:
    get = getattr(model, "get_decoder", None)
    dec = get() if callable(get) else None
    if dec is None:
        dec = getattr(model, getattr(model, "base_model_prefix", "model"), None)
    if dec is None or dec is model:
        raise TypeError(f"cannot find the decoder body of {type(model).__name__}: use backend='reference'")
    return dec


def device_of(model: Any) -> torch.device:
    return next(model.parameters()).device


def logit_transform(model: Any, z: torch.Tensor) -> torch.Tensor:
    """Apply the architecture's post-projection logit transforms (softcap, scaling)."""
    cfg = model.config
    scale = getattr(cfg, "logit_scale", None)  # Cohere
    if scale is not None:
        z = z * scale
    div = getattr(cfg, "logits_scaling", None)  # Granite
    if div is not None:
        z = z / div
    cap = getattr(cfg, "final_logit_softcapping", None)  # Gemma 2/3
    if cap is not None:
        z = torch.tanh(z / cap) * cap
    return z


def upcast(x: torch.Tensor) -> torch.Tensor:
    """Half-precision logits to float32 for the softmax; float32/float64 stay as they are."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def decoder_layers(model: Any) -> torch.nn.ModuleList:
    dec = decoder_of(model)
    layers = getattr(dec, "layers", None) or getattr(dec, "h", None)
    if not isinstance(layers, torch.nn.ModuleList):
        lists = [m for m in dec.modules() if isinstance(m, torch.nn.ModuleList)]
        if not lists:
            raise ValueError("cannot find the decoder blocks (no ModuleList): pass explicit groups")
        layers = max(lists, key=len)
    return layers


def per_block_groups(model: Any) -> dict[str, list[str]]:
    """Groups for a per-layer breakdown: ``embeddings`` (in a tied model also the output
    projection), ``block 00``, ``block 01``, … (the decoder blocks, found as `decoder_layers` finds
    them, the same blocks ``"last_block"`` uses) and ``other`` (final norm, an untied head).
    Values are full parameter names; every parameter is in exactly one group."""
    layers = decoder_layers(model)
    block_of = {id(p): i for i, block in enumerate(layers) for p in block.parameters()}
    emb = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    groups: dict[str, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in emb:
            g = "embeddings"
        elif id(p) in block_of:
            g = f"block {block_of[id(p)]:02d}"
        else:
            g = "other"
        groups.setdefault(g, []).append(name)
    order = ["embeddings"] + [f"block {i:02d}" for i in range(len(layers))] + ["other"]
    return {g: groups[g] for g in order if g in groups}


def resolve_groups(model: Any, groups: str | Sequence[str] | Mapping[str, Any] | None
                   ) -> dict[str, list[str]] | Mapping[str, Any] | None:
    """Turn presets into ``{group: [parameter names]}`` (custom mappings pass through).

    Presets: ``"all"`` (every parameter), ``"no_embeddings"`` (all but nn.Embedding
    weights; in a tied model that also drops the output projection, which *is* the
    embedding matrix), ``"last_block"`` (the last decoder layer), ``"per_block"`` (one group
    per decoder block, see `per_block_groups`), ``"lm_head"`` (the output
    projection, plus its bias if any; in a tied model the shared matrix, with both of its
    gradient contributions), ``"embeddings"`` (nn.Embedding weights). A list of presets
    gives one group each. A mapping ``{name: prefixes | predicate}`` is used as in
    `gnuq_core.estimators.torch_uncertainty`.
    """
    if groups is None or isinstance(groups, Mapping):
        return groups
    names_list = [groups] if isinstance(groups, str) else list(groups)
    named = list(model.named_parameters(remove_duplicate=False))
    by_id: dict[int, list[str]] = {}
    for n, p in named:
        by_id.setdefault(id(p), []).append(n)
    emb_ids = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    head = model.get_output_embeddings()
    out: dict[str, list[str]] = {}
    for g in names_list:
        if g == "all":
            ids = list(by_id)
        elif g == "no_embeddings":
            ids = [k for k in by_id if k not in emb_ids]
        elif g == "embeddings":
            ids = [k for k in by_id if k in emb_ids]
        elif g == "lm_head":
            ids = [id(p) for p in head.parameters()]
        elif g == "last_block":
            ids = [id(p) for p in decoder_layers(model)[-1].parameters()]
        elif g == "per_block":
            out.update(per_block_groups(model))
            continue
        else:
            raise ValueError(f"unknown parameter group {g!r}: use one of {', '.join(PRESET_GROUPS)}, or a "
                             "mapping {name: [parameter-name prefixes]}")
        out[g] = [n for k in ids for n in by_id[k]]
        if not out[g]:
            raise ValueError(f"parameter group {g!r} is empty for {type(model).__name__}")
    return out


