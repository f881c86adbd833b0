"""What the library's public entry points accept, checked once at the boundary.

Every public function of `gnuq_core.lm.scoring`, `gnuq_core.estimators` and
`gnuq_core.integrations.polygraph` checks its arguments here before any pass, by type and
by meaning, and refuses what it cannot score with one `ValueError` (content: an empty or
invisible prompt, lists of different lengths, a model of another kind) or `InputTypeError`
(a `TypeError`: a bare ``str`` where a list of prompts belongs, a number given as text). Each
message names the argument and the fix; the command line prints it as one ``error:`` line
with exit status 2 (`gnuq_core.options.run_command`).

The checks are cheap (one look at each item, a dictionary lookup for the model's class):
no forward pass, so scoring is as fast as before.

The model must be a causal LM with a language-model head, judged by its architecture (its
class among transformers' causal-LM classes, ``config.is_encoder_decoder``,
``config.is_decoder`` for the encoder families whose causal class only attends one way when
told to, ``get_output_embeddings()``), not by its name; its weights must hold numbers (not
the meta device) in a floating-point dtype.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from gnuq_core.arguments import choice, flag, real, real_list
from gnuq_core.arguments import kind_of as _kind, short_repr as _short
from gnuq_core.options import InputTypeError
from gnuq_core.lm.prompts import PromptError, check_text

__all__ = ["InputTypeError", "text_list", "one_text", "same_length", "causal_lm", "tokenizer", "real",
           "real_list", "flag", "choice", "group_spec", "model_kind"]

_CAUSAL_FIX = ("load a causal (decoder-only) LM with transformers.AutoModelForCausalLM.from_pretrained(...) or "
               "gnuq_core.lm.models.load_model(...); for another kind of torch model use "
               "gnuq_core.estimators.torch_uncertainty with your own log_prob_fn")


def text_list(value: Any, argument: str, *, what: str = "prompt", optional: bool = False) -> list[str | None]:
    """``value`` as a list of texts, each checked as `one_text` checks it.

    Parameters
    ----------
    value
        A list or tuple of ``str`` (a bare ``str`` is refused: iterating it would score one
        text per character).
    argument : str
        The argument's name in messages (``"prompts"``).
    what : str
        What one item is (``"prompt"``, ``"answer"``).
    optional : bool
        Items may be None (``answers``: None lets the model generate one).

    Raises
    ------
    InputTypeError
        For a ``str``, None, a mapping, a set or another non-sequence, or an item of another type.
    PromptError
        For an empty, whitespace-only or invisible item, or one with a NUL character; the
        message names its index.
    """
    if isinstance(value, (str, bytes)):
        raise InputTypeError(f"{argument} is a single {type(value).__name__} ({_short(value)}), not a list: pass a "
                             f"list of {what}s, e.g. [{_short(value)}]")
    if value is None or isinstance(value, (Mapping, set, frozenset)) or not isinstance(value, Sequence):
        raise InputTypeError(f"{argument} is {_kind(value)}: pass a list of {what}s (str)")
    items = list(value)
    for i, item in enumerate(items):
        if item is None and optional:
            continue
        one_text(item, f"{argument}[{i}]", what=what, optional=optional)
    return items


def one_text(value: Any, argument: str, *, what: str = "prompt", optional: bool = False) -> str | None:
    """``value`` if it is text that can be scored: a ``str`` with a visible character, no NUL
    and valid Unicode (`gnuq_core.lm.prompts.check_text`); None when ``optional``."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        several = isinstance(value, (list, tuple))
        raise InputTypeError(f"{argument} is {_kind(value)}, not text: pass the {what} as a str"
                             + ("; for several, use score_many" if several else "")
                             + (", or None to let the model generate one" if optional else ""))
    if not value.strip():
        fix = "pass None to let the model generate one, or give a non-empty answer" if optional else \
            f"pass the {what} text"
        raise PromptError(f"{_where(argument, what)}the {what} is empty or whitespace only: {fix}")
    try:
        check_text(value, what)
    except PromptError as err:
        raise PromptError(f"{_where(argument, what)}{err}") from None
    return value


def _where(argument: str, what: str) -> str:
    """``"prompts[3]: "`` before a message about one item of a list (nothing for the argument itself)."""
    return "" if argument == what else f"{argument}: "


def same_length(**named: Sequence[Any]) -> int:
    """The common length of the named sequences; `ValueError` naming each length otherwise."""
    lengths = {k: len(v) for k, v in named.items()}
    if len(set(lengths.values())) > 1:
        said = " but ".join(f"{n} {k}" for k, n in lengths.items())
        raise ValueError(f"{said}: pass one of each per row, in the same order")
    return next(iter(lengths.values()), 0)


def group_spec(groups: Any, argument: str = "groups") -> Any:
    """``groups`` if it is what `gnuq_core.lm.anatomy.resolve_groups` takes: None, a preset name,
    a list of names, or a mapping ``{name: prefixes or predicate}``."""
    if groups is None or isinstance(groups, (str, Mapping)):
        return groups
    if isinstance(groups, (list, tuple)) and groups and all(isinstance(g, str) for g in groups):
        return groups
    raise InputTypeError(f"{argument}={_short(groups)} is {_kind(groups)}: pass a preset name (all, no_embeddings, "
                         "last_block, lm_head, embeddings, per_block), a non-empty list of them, or a mapping "
                         "{name: [parameter-name prefixes]}")


def tokenizer(value: Any, argument: str = "tokenizer") -> Any:
    """``value`` if it looks like a Hugging Face tokenizer (callable, with ``decode``)."""
    if not callable(value) or not callable(getattr(value, "decode", None)):
        raise InputTypeError(f"{argument} is {_kind(value)}, not a tokenizer: pass the model's own tokenizer "
                             "(transformers.AutoTokenizer.from_pretrained(...), or load_model(...).tokenizer)")
    return value


# --------------------------------------------------------------------------- the model


def _names(mapping: Mapping[str, Any]) -> frozenset[str]:
    out: set[str] = set()
    for v in mapping.values():
        out |= set(v) if isinstance(v, (list, tuple)) else {v}
    return frozenset(out)


@functools.lru_cache(maxsize=1)
def _classes() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
    """transformers' causal-LM class names, the non-causal LM-head class names (masked LM,
    pre-training, seq2seq), the model types with a masked LM, and the causal model types."""
    from transformers.models.auto import modeling_auto as ma

    causal = _names(ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    other = (_names(ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES) | _names(ma.MODEL_FOR_PRETRAINING_MAPPING_NAMES)
             | _names(ma.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)) - causal
    return causal, other, frozenset(ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES), frozenset(ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def model_kind(model: Any) -> str | None:
    """None if ``model``'s architecture is a causal LM (or one transformers does not know, such
    as custom code), else why not, in words."""
    config = getattr(model, "config", None)
    cls = type(model).__name__
    if getattr(config, "is_encoder_decoder", False):
        return f"{cls} is an encoder-decoder (seq2seq) model"
    causal, other, bidirectional, _ = _classes()
    mro = [c.__name__ for c in type(model).__mro__]
    if any(n in causal for n in mro):
        if getattr(config, "model_type", None) in bidirectional and not getattr(config, "is_decoder", False):
            return (f"{cls} has config.is_decoder=False, so it attends in both directions (a masked LM's "
                    "attention): p(answer | prompt) is not a product of next-token probabilities")
        return None
    hit = next((n for n in mro if n in other), None)
    if hit is not None:
        named = cls if hit == cls else f"{cls} (a {hit})"
        return (f"{named} is a masked or sequence-to-sequence LM, not a causal LM: it reads the text in both "
                "directions, so p(answer | prompt) is not a product of next-token probabilities")
    return None


def causal_lm(model: Any, argument: str = "model") -> Any:
    """``model`` if gnuq can score it: a torch causal LM with an LM head, its weights on a real
    device in a floating-point dtype.

    Raises
    ------
    InputTypeError
        For anything else than a transformers-style torch model, a masked or seq2seq LM, a
        model without an LM head.
    ValueError
        For weights on the meta device (not loaded) or in an integer (quantised) dtype.
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise InputTypeError(f"{argument} is {_kind(model)}, not a torch model: {_CAUSAL_FIX}")
    cls = type(model).__name__
    get_head, get_emb = getattr(model, "get_output_embeddings", None), getattr(model, "get_input_embeddings", None)
    if getattr(model, "config", None) is None or not callable(get_head) or not callable(get_emb):
        raise InputTypeError(f"{argument} is a {cls}, not a transformers causal LM (no config and embeddings): "
                             f"{_CAUSAL_FIX}")
    why = model_kind(model)
    if why is not None:
        raise InputTypeError(f"{argument}: {why}; {_CAUSAL_FIX}")
    try:
        head, emb = get_head(), get_emb()
    except (NotImplementedError, AttributeError):
        head = emb = None
    if head is None or not isinstance(getattr(head, "weight", None), torch.Tensor):
        raise InputTypeError(f"{argument} is a {cls} without a language-model head (get_output_embeddings() is "
                             "None): load it with AutoModelForCausalLM, not AutoModel")
    if emb is None or not isinstance(getattr(emb, "weight", None), torch.Tensor):
        raise InputTypeError(f"{argument} is a {cls} without an input embedding: {_CAUSAL_FIX}")
    weight = head.weight
    if weight.is_meta or emb.weight.is_meta:
        raise ValueError(f"{argument}'s weights are on the meta device (shapes only, no numbers): load them, e.g. "
                         "with from_pretrained(...) or model.to_empty(device='cpu') and load_state_dict(...)")
    if not weight.is_floating_point() or not emb.weight.is_floating_point():
        raise ValueError(f"{argument}'s weights are {weight.dtype} (quantised?): gradients need floating-point "
                         "weights; load the model in float32, bfloat16 or float16")
    return model


def finite(value: float, argument: str) -> float:
    """``value`` if it is not NaN (infinities are left to the caller's own rule)."""
    if math.isnan(value):
        raise ValueError(f"{argument} is NaN: pass a number")
    return value
