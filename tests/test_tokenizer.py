"""GPT-2's byte-level BPE: the ids of GPT2-FACTS.md, lossless round trips, and token display."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

FACT_IDS = [
    ("The meaning of life is", [464, 3616, 286, 1204, 318]),
    ("The capital of France is", [464, 3139, 286, 4881, 318]),
    ("i want to sleep!!", [72, 765, 284, 3993, 3228]),
    ("Hello", [15496]),
    ("hello", [31373]),
    (" not", [407]),
    (" Paris", [6342]),
    ("<|endoftext|>", [50256]),
    (
        "The meaning of life is not the same as the meaning of death",
        [464, 3616, 286, 1204, 318, 407, 262, 976, 355, 262, 3616, 286, 1918],
    ),
]


@pytest.mark.parametrize("text, ids", FACT_IDS)
def test_fact_ids(tokenizer, text, ids):
    assert tokenizer.encode(text) == ids
    assert tokenizer.decode(ids) == text


def test_vocabulary_and_eos(tokenizer):
    assert tokenizer.vocab_size == 50257
    assert tokenizer.eos_id == 50256


ROUND_TRIP = [
    "plain ASCII, with punctuation: (a+b)*c = d; 'quotes' \"double\" ~`!@#$%^&",
    "  leading and trailing spaces  ",
    "\u4eca\u65e5\u306f\u3001\u4e16\u754c\uff01 \ud55c\uad6d\uc5b4 \u4e2d\u6587\u5b57",  # CJK
    "emoji \U0001f642\U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f44d\U0001f3fd \U0001f1eb\U0001f1f7",
    "combining: e\u0301 a\u0308 n\u0303 Z\u0324\u0354\u0367\u0311\u0313",
    "control:\x00\x01\x07\x1b[31m\x7f\t\r\n\x0b\x0c end",
    "\u00a0nbsp \u2028line sep \u200bzero width \ufeffbom",
    "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m",
    "\n\n\n",
    "",
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_round_trip_examples(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_round_trip_any_text(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a", " ", "\u0301", "\U0001f642", "\u4e2d", "\x00", "\n", "\u200d"]), max_size=30))
def test_round_trip_mixed_pieces(tokenizer, pieces):
    text = "".join(pieces)
    assert tokenizer.decode(tokenizer.encode(text)) == text


def _bytes_to_unicode() -> dict[int, str]:
    """OpenAI's GPT-2 byte -> printable character table, written independently of the code."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
    bs += list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


@pytest.fixture(scope="module")
def all_tokens(tokenizer):
    """(id, stored token string, its bytes) for the whole vocabulary, via the oracle table."""
    decoder = {c: b for b, c in _bytes_to_unicode().items()}
    vocab = tokenizer._tk.get_vocab(with_added_tokens=True)
    assert len(vocab) == 50257
    out = []
    for token, i in sorted(vocab.items(), key=lambda kv: kv[1]):
        raw = token.encode() if token == "<|endoftext|>" else bytes(decoder[c] for c in token)
        out.append((i, token, raw))
    return out


def test_token_bytes_for_every_id(tokenizer, all_tokens):
    for i, _, raw in all_tokens:
        assert tokenizer.token_bytes(i) == raw, i


def test_display_every_id(tokenizer, all_tokens):
    """Never raises; no plain space, line break or other control character reaches the screen;
    bytes that are not whole UTF-8 characters are shown as \\xNN."""
    for i, _, raw in all_tokens:
        shown = tokenizer.display(i)
        assert isinstance(shown, str) and shown, i
        assert " " not in shown, (i, shown)
        assert not any(unicodedata.category(ch) == "Cc" for ch in shown), (i, shown)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            assert "\\x" in shown, (i, shown)


def test_display_examples(tokenizer):
    assert tokenizer.token_text(407) == "\u0120not"
    shown = tokenizer.display(407)
    assert shown != " not" and " " not in shown
    assert shown.endswith("not") and len(shown) == 4  # one visible marker for the space
    assert tokenizer.display(15496) == "Hello"
    assert tokenizer.display(50256) == "<|endoftext|>"
    newline = tokenizer.encode("\n")
    assert len(newline) == 1 and "\n" not in tokenizer.display(newline[0])


def test_display_partial_utf8(tokenizer):
    """An emoji split over tokens: each piece shows its dangling bytes as \\xNN."""
    emoji = "\U0001f642"  # F0 9F 99 82
    ids = tokenizer.encode(emoji)
    assert len(ids) > 1
    assert b"".join(tokenizer.token_bytes(i) for i in ids) == emoji.encode("utf-8")
    shown = "".join(tokenizer.display(i) for i in ids)
    assert shown == "\\xf0\\x9f\\x99\\x82"
    # A lone lead byte of a 2-byte character, as a vocabulary entry of its own.
    lone = tokenizer._tk.token_to_id(_bytes_to_unicode()[0xC3])
    assert tokenizer.display(lone) == "\\xc3"


@pytest.fixture(scope="module")
def vocab_merges_tokenizer(tmp_path_factory):
    """The same tokenizer read from the older vocab.json + merges.txt pair."""
    import json
    from pathlib import Path

    from gpt2viz.model.tokenizer import Tokenizer

    src = json.loads((Path(__file__).resolve().parent.parent / "assets/tokenizer/tokenizer.json").read_text())
    directory = tmp_path_factory.mktemp("vocab_merges")
    vocab = {k: v for k, v in src["model"]["vocab"].items()}
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    merges = ["#version: 0.2"] + [" ".join(m) if isinstance(m, list) else m for m in src["model"]["merges"]]
    (directory / "merges.txt").write_text("\n".join(merges) + "\n", encoding="utf-8")
    return Tokenizer.from_dir(directory)


@pytest.mark.parametrize("text, ids", FACT_IDS)
def test_vocab_and_merges_files_give_the_same_ids(vocab_merges_tokenizer, text, ids):
    assert vocab_merges_tokenizer.encode(text) == ids
    assert vocab_merges_tokenizer.decode(ids) == text
    assert vocab_merges_tokenizer.vocab_size == 50257 and vocab_merges_tokenizer.eos_id == 50256


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_vocab_and_merges_round_trip(vocab_merges_tokenizer, tokenizer, text):
    assert vocab_merges_tokenizer.encode(text) == tokenizer.encode(text)
    assert vocab_merges_tokenizer.decode(tokenizer.encode(text)) == text


def test_no_token_displays_blank(tokenizer):
    """Non-breaking spaces are escaped and a lone combining mark sits on a dotted circle. A whole
    character below U+0100 is written \\u00a0, never \\xa0, which a token's text keeps for a raw
    byte that is no character alone."""
    assert tokenizer.display(1849) == "\\u00a0"
    assert tokenizer.display(tokenizer.encode("工")[0]).startswith("\\x")  # half a character: a raw byte
    assert tokenizer.display(24333).startswith("◌")
    for token_id in range(tokenizer.vocab_size):
        shown = tokenizer.display(token_id)
        assert shown.strip() and shown.isprintable(), (token_id, shown)


def test_a_tokenizer_file_is_parsed_once_and_read_anew_when_it_changes(tmp_path):
    """Loads of the same tokenizer.json text share one parsed tokenizer (a model loaded again skips
    the parse); a file changed between loads is the new file, and the model's vocabulary is
    checked at every load, parsed or kept."""
    import json
    import shutil

    from gpt2viz.errors import ModelSourceError
    from gpt2viz.model.tokenizer import Tokenizer

    bundled = Path(__file__).resolve().parent.parent / "assets" / "tiny" / "tokenizer.json"
    first, second = tmp_path / "a", tmp_path / "b"
    for directory in (first, second):
        directory.mkdir()
        shutil.copyfile(bundled, directory / "tokenizer.json")
    a, b = Tokenizer.from_dir(first, vocab_size=50257), Tokenizer.from_dir(second, vocab_size=50257)
    assert a._tk is b._tk and a.source != b.source
    assert a.record == b.record and a.record.merges == 50000 and a.record.files[0].bytes == bundled.stat().st_size

    data = json.loads(bundled.read_text(encoding="utf-8"))
    data["added_tokens"].append({"id": 50257, "content": "<|new|>", "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": False, "special": True})
    (second / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    grown = Tokenizer.from_dir(second, vocab_size=50258)
    assert grown._tk is not a._tk
    assert grown.vocab_size == 50258 and grown.encode("<|new|>") == [50257]
    assert grown.record.files[0].bytes == (second / "tokenizer.json").stat().st_size
    for _ in range(2):  # parsed, then kept: refused both times
        with pytest.raises(ModelSourceError, match="token id 50,257 is beyond the model's vocabulary"):
            Tokenizer.from_dir(second, vocab_size=50257)
