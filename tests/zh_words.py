"""Finding English left in a Chinese screen: Latin words that are not technical terms or code.

Allowed in Latin letters: the terms the tutorials keep in Latin letters (../shared/GLOSSARY-zh.md),
names (formats, devices, libraries, file formats), units, the names Textual gives keys, code (a
word written against a dot, an underscore, a bracket, `=`, `@` or `|`, as in `ln_f(x)`,
`scores [1, 4, 5, 5]`, `L3.heads`, `<|endoftext|>`), and the run's own text (the prompt, token
texts, model names). Any other Latin word on a zh screen is an untranslated sentence or label:
"head", "cache" or "pattern" alone too (the Chinese says 头, 缓存, 注意力权重), and "n/a".
"""

from __future__ import annotations

import re

# Terms of several words, allowed as a whole only ("KV cache", but not "cache" on its own).
PHRASES = ("kv cache", "kv-cache", "lm head", "logit lens", "hugging face hub", "hugging face")

# Single Latin words allowed in Chinese text, lowercase, by kind.
GLOSSARY = """
    token tokens bpe logit logits softmax layernorm pre-norm gelu mlp ffn kv prefill decode
    top-k top-p qk qkv wte wpe eos ttft tpot id ids kl
    rmsnorm silu swiglu gqa norm gate up down
"""  # the last line: a LLaMA-family model's parts (SmolLM2), named as its code names them
FORMULA = "argmax tanh erf ln"  # functions a sentence names as the formula writes them
NAMES = """
    trace json utf tiny gpt gpt2viz cpu cuda mps fbgemm onednn blas simd python pytorch torch transformers textual nan inf
    gguf llama llama.cpp hugging safetensors transformerlens
"""  # trace: the file format gpt2viz writes, named so in Chinese too; tiny: the bundled model
UNITS = "b s ms us µs ns kb mb gb kib mib gib gb/s flop flops gflop tflop gflop/s tokens/s nat"
KEYS = "esc tab home end pgup pgdn space shift ctrl"  # how Textual shows keys (footer, help, sentences)

ALLOWED = {word for words in (GLOSSARY, FORMULA, NAMES, UNITS, KEYS) for word in words.split()}

WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'\-/]*")
# Code: a word written against a dot, an underscore, '=', '|', a bracket after it, a colon or a call's
# bracket before it (":mean", "softmax(scores"), a shape after it ("q [1, 4, 5, 16]"), or before a
# matrix product ("pattern @ v").
CODE_BEFORE = re.compile(r"(?:[._|<:]|\w[(\[])$")  # an argument: softmax(scores
CODE_AFTER = re.compile(r"^(?:[._()\[\]=|]| ?\[\d| @ )")


def english_words(text: str, also_allowed: set[str] = frozenset()) -> list[str]:
    """The Latin words of `text` that are neither allowed terms nor code nor in `also_allowed` (the
    run's prompt and token texts, lowercased). A word with a digit is code ('float32', 'L3H5');
    a single letter is a variable or a key ('x', 'g'); 'n/a' is a word."""
    for phrase in PHRASES:  # (a line may break inside one)
        text = re.sub(r"\s+".join(map(re.escape, phrase.split())), " ", text, flags=re.IGNORECASE)
    found = []
    for match in WORD.finditer(text):
        word = match.group(0).rstrip("/'-")
        w = word.lower()
        before, after = text[max(0, match.start() - 2) : match.start()], text[match.end() : match.end() + 3]
        if len(w) < 2 or w in ALLOWED or w in also_allowed or any(ch.isdigit() for ch in w):
            continue
        if "_" in w or CODE_BEFORE.search(before) or CODE_AFTER.match(after):
            continue
        found.append(word)
    return found


# Where a trace keeps token texts and names (everything else in it is numbers, codes and shapes).
TOKEN_KEYS = {"tokens", "text", "token", "final_token", "name", "path", "prompt", "chosen", "cpu"}


def run_words(trace) -> set[str]:
    """The words of a run's own text: its prompt, the model's name and every token text the trace
    holds (tokens, top tokens, generated and sampled ones), with their prefixes, since a narrow
    column shows a token cut short ('mea…'). Lowercased."""
    trace.resolve_all()  # parts worked out on first read (top tokens, the MLP's neurons) included
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
