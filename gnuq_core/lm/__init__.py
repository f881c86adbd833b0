"""Causal language models: everything that touches a Hugging Face causal LM.

- `models`: load by alias, GGUF file, folder or hub id (fp32 weights cached);
- `prompts`: chat and few-shot prompt formats, token encodings;
- `scoring`: the front door: generate, sample, the forward–backward pass, `score`;
- `baselines`: the expensive baseline passes (P(True), token entropies) and their cheap scores;
- `clustering`: grouping sampled answers by meaning (for semantic entropy).
"""
