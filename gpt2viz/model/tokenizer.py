"""GPT-2's byte-level BPE tokenizer, and how to show a token to a person.

A token is a sequence of bytes, not always whole characters: an emoji can be split across two
tokens. `display` shows each token on its own without lying about it: spaces and line breaks are
made visible and bytes that are not whole UTF-8 characters appear as `\\xNN`.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from pathlib import Path

from tokenizers import AddedToken
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, processors

from ..errors import ModelSourceError
from ..i18n import _

EOS_TEXT = "<|endoftext|>"


@lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """GPT-2's map from the printable stand-in characters of its vocabulary back to bytes."""
    # Printable bytes stand for themselves; the others are shifted past 255 so that every byte
    # has a visible, non-whitespace character (a space is stored as 'Ġ', U+0120).
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = keep[:]
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars)}


def build_byte_level_bpe(vocab_path: str | Path, merges_path: str | Path) -> HFTokenizer:
    """GPT-2's tokenizer from its `vocab.json` (`encoder.json`) and `merges.txt` (`vocab.bpe`)."""
    # Field for field what Hugging Face's gpt2 tokenizer.json holds.
    vocab, merges = models.BPE.read_file(str(vocab_path), str(merges_path))
    tokenizer = HFTokenizer(
        models.BPE(vocab, merges, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False)
    )
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens([AddedToken(EOS_TEXT, normalized=True, special=True)])
    return tokenizer


_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def visible_text(text: str) -> str:
    """`text` with whitespace made visible, invisible characters escaped, and a lone combining
    mark shown on a dotted circle, so no token ever looks blank."""
    out = []
    for i, ch in enumerate(text):
        category = unicodedata.category(ch)
        if ch in _VISIBLE:
            out.append(_VISIBLE[ch])
        elif category in ("Cc", "Cf", "Zl", "Zp", "Zs", "Co", "Cn"):
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
        elif category in ("Mn", "Me") and i == 0:
            out.append("◌" + ch)
        else:
            out.append(ch)
    return "".join(out)


class Tokenizer:
    """Text <-> token ids, plus the bytes and a display string of each token."""

    def __init__(self, tokenizer: HFTokenizer) -> None:
        self._tk = tokenizer
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        eos = tokenizer.token_to_id(EOS_TEXT)
        self.eos_id: int | None = eos
        self._special = {t.content for t in tokenizer.get_added_tokens_decoder().values()}

    @classmethod
    def from_dir(cls, directory: str | Path) -> "Tokenizer":
        """Loads `tokenizer.json`, or else `vocab.json` + `merges.txt`, from a checkpoint directory."""
        directory = Path(directory)
        try:
            if (directory / "tokenizer.json").is_file():
                return cls(HFTokenizer.from_file(str(directory / "tokenizer.json")))
            if (directory / "vocab.json").is_file() and (directory / "merges.txt").is_file():
                return cls(build_byte_level_bpe(directory / "vocab.json", directory / "merges.txt"))
        except Exception as err:  # the tokenizers library raises plain Exceptions on bad files
            raise ModelSourceError(
                _("{path}: cannot read the tokenizer ({error})").format(path=directory, error=err)
            ) from None
        raise ModelSourceError(_("{path}: no tokenizer.json (or vocab.json + merges.txt)").format(path=directory))

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; `<|endoftext|>` written in the text is the special token."""
        return self._tk.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        """The text of a list of ids (incomplete UTF-8 at the edges becomes U+FFFD)."""
        return self._tk.decode(list(ids), skip_special_tokens=False)

    def token_text(self, token_id: int) -> str:
        """The vocabulary entry as stored, e.g. 'Ġnot' for ' not'."""
        return self._tk.id_to_token(token_id) or ""

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for."""
        stored = self.token_text(token_id)
        if stored in self._special:
            return stored.encode("utf-8")
        table = byte_decoder()
        try:
            return bytes(table[ch] for ch in stored)
        except KeyError:
            # Not a byte-level vocabulary entry; show it as it is stored.
            return stored.encode("utf-8")

    def display(self, token_id: int) -> str:
        """The token as a person should see it: '␣not', '↵', 'caf\\xc3' for half a character."""
        raw = self.token_bytes(token_id)
        return visible_text(raw.decode("utf-8", errors="backslashreplace"))
