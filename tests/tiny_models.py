"""Tiny randomly initialised causal LMs and a byte-level tokenizer, built in memory.

Shared by the LLM-engine tests (scoring, baselines, qa, cli, models). Nothing is
downloaded: the tokenizer is a byte-level BPE with no merges (one token per byte), the
models are 2-layer Llama / Gemma-3 configs with a small vocabulary and tied embeddings.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<pad>", "<bos>", "<eos>", "<|im_start|>", "<|im_end|>"]


def byte_tokenizer(chat: bool = True):
    """PreTrainedTokenizerFast with one token per byte; ids 0-4 are special (0 = pad)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {t: i for i, t in enumerate(SPECIALS)}
    for ch in sorted(alphabet):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>",
                                   eos_token="<eos>", additional_special_tokens=SPECIALS[3:])
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    return fast


VOCAB = 5 + 256


def tiny_llama(tied: bool = True, dtype=torch.float64, seed: int = 0, vocab: int = VOCAB):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                      tie_word_embeddings=tied, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(cfg).to(dtype).eval()


def tiny_gemma(dtype=torch.float64, seed: int = 0, softcap: float | None = 30.0, vocab: int = VOCAB):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    cfg = Gemma3TextConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=512,
                           sliding_window=4, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                           final_logit_softcapping=softcap, tie_word_embeddings=True)
    return Gemma3ForCausalLM(cfg).to(dtype).eval()


class ScriptedLM(torch.nn.Module):
    """A fake causal LM whose next-token choice follows a script (for stopping rules).

    ``script[k]`` is the token the model prefers at generation step k (after the prompt);
    its logit is 10, every other logit 0, except ``second`` (logit 5) if given. Accepts the
    ``cache`` / ``logits_to_keep`` keywords like a transformers model.
    """

    def __init__(self, script, vocab: int = VOCAB, second=None, ctx: int = 512):
        super().__init__()
        from types import SimpleNamespace

        self.script, self.vocab, self.second = list(script), vocab, second
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.config = SimpleNamespace(max_position_embeddings=ctx, eos_token_id=2)
        self.generation_config = SimpleNamespace(eos_token_id=2)

    def forward(self, input_ids, cache=None, use_cache=True, logits_to_keep=0, **_):
        from types import SimpleNamespace

        step = 0 if cache is None else cache + 1
        b = input_ids.shape[0]
        logits = torch.zeros(b, 1, self.vocab)
        tok = self.script[min(step, len(self.script) - 1)]
        logits[:, :, tok] = 10.0
        if self.second is not None and step == 0:
            logits[:, :, self.second] = 5.0
        return SimpleNamespace(logits=logits, cache=step)


def tiny_gpt2(dtype=torch.float64, seed: int = 0, vocab: int = VOCAB):
    """GPT-2 layout: LayerNorm, Conv1D, learned positions, tied head."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=vocab, n_embd=16, n_layer=2, n_head=2, n_positions=512, bos_token_id=1,
                     eos_token_id=2, pad_token_id=0)
    return GPT2LMHeadModel(cfg).to(dtype).eval()


def tiny_pythia(dtype=torch.float64, seed: int = 0, vocab: int = VOCAB):
    """Pythia (GPT-NeoX) layout: LayerNorm with biases, fused QKV Linear, rotary, untied head."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(seed)
    cfg = GPTNeoXConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                        num_attention_heads=2, max_position_embeddings=512, bos_token_id=1, eos_token_id=2,
                        pad_token_id=0)
    return GPTNeoXForCausalLM(cfg).to(dtype).eval()


def tiny_opt(dtype=torch.float64, seed: int = 0, vocab: int = VOCAB):
    """OPT layout: LayerNorm, learned positions with an offset, the MLP on flattened positions."""
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(seed)
    cfg = OPTConfig(vocab_size=vocab, hidden_size=16, ffn_dim=32, num_hidden_layers=2, num_attention_heads=2,
                    max_position_embeddings=512, word_embed_proj_dim=16, bos_token_id=1, eos_token_id=2,
                    pad_token_id=0)
    return OPTForCausalLM(cfg).to(dtype).eval()
