"""Finding English left in a Chinese screen: Latin words that are not technical terms.

The terms the tutorials keep in Latin letters (../shared/GLOSSARY-zh.md), code and hook names,
units, key names, and the run's own text (the prompt, token texts, model names) are allowed; any
other Latin word on a zh screen is an untranslated sentence or label.
"""

from __future__ import annotations

import re

# The glossary's Latin terms, formula and code words, units, key names (lowercase).
ALLOWED = set(
    """
    token tokens bpe logits logit softmax layernorm pre-norm gelu gelu_new mlp ffn kv cache kv-cache
    prefill decode top-k top-p topk topp q k v qk qkv wte wpe c_attn c_proj c_fc ln ln_1 ln_2 ln_f lm head
    lens logit-lens float32 bfloat16 float16 int8 fp32 fp16 bf16 ttft tpot gb mb kb kib mib gib b s ms us µs
    ns gflop flop flops tflop eos endoftext utf id ids gpt gpt2 gpt2viz gpt-2 hook resid attn blocks
    pre mid post z pattern scores x y w h d l t c n nh hd e dk dv max min mean var std sqrt exp log sum eps
    argmax tanh erf gelu cdf ctrl shift esc escape tab enter space home end pgup pgdn pageup pagedown
    alt f1 f2 tiny cpu cuda mps json nan inf n/a textual python pytorch torch huggingface hub transformers
    safetensors config gb/s lm_head ln_final mlp_out attn_out bos unk ok vs a
    trace
    split concat tril diagonal kl
    """.split()
)


def english_words(text: str, also_allowed: set[str] = frozenset()) -> list[str]:
    """The Latin words of `text` that are neither allowed terms nor in `also_allowed` (the run's
    prompt and token texts, lowercased). Words with digits or underscores are code."""
    found = []
    for word in re.findall(r"[A-Za-z][A-Za-z0-9_'\-]*", text):
        w = word.lower().strip("'-")
        if len(w) < 2 or w in ALLOWED or w in also_allowed or "_" in w or any(ch.isdigit() for ch in w):
            continue
        found.append(word)
    return found


# Where a trace keeps token texts and names (everything else in it is numbers, codes and shapes).
TOKEN_KEYS = {"tokens", "text", "token", "final_token", "name", "path", "prompt", "chosen"}


def run_words(trace) -> set[str]:
    """The words of a run's own text: its prompt, the model's name and every token text the trace
    holds (tokens, top tokens, generated and sampled ones), with their prefixes, since a narrow
    column shows a token cut short ('mea…'). Lowercased."""
    texts = [trace.prompt]

    def walk(value, key: str | None = None) -> None:
        if isinstance(value, str):
            if key in TOKEN_KEYS:
                texts.append(value)
        elif isinstance(value, dict):
            for name, item in value.items():
                walk(item, name)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, key)

    walk(trace.model)
    walk(trace.tokens)
    walk(trace.events)
    walk(trace.generation)
    words = set()
    for text in texts:
        for word in re.findall(r"[A-Za-z][A-Za-z'\-]*", text):
            word = word.lower()
            words.update(word[:n] for n in range(2, len(word) + 1))
    return words
