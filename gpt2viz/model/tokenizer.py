"""GPT-2's byte-level BPE tokenizer, and how to show a token to a person.

A token is a sequence of bytes, not always whole characters: an emoji can be split across two
tokens. `display` shows each token on its own without lying about it: spaces and line breaks are
made visible and bytes that are not whole UTF-8 characters appear as `\\xNN`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from tokenizers import AddedToken
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, processors

from ..errors import InputError, ModelSourceError, TokenIdError
from ..i18n import N_, _, count
from ..input_files import MAX_TOKENIZER_BYTES, FileRefused, checked_size, read_regular, shown
from ..text_safety import visible_token
from .files import FileRecord, TokenizerRecord, tokenizer_record

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


@dataclass(frozen=True)
class _Parsed:
    """A tokenizer as its file(s) made it, with what `Tokenizer.from_dir` checks and records of it
    (the record naming no file yet: the same text may lie in many checkpoints)."""

    tokenizer: HFTokenizer
    top_id: int | None  # the highest id it gives; None for an empty vocabulary
    record: TokenizerRecord


def _highest_id(tokenizer: HFTokenizer) -> int | None:
    ids = tokenizer.get_vocab(with_added_tokens=True).values()
    return max(ids) if ids else None


def _parsed(tokenizer: HFTokenizer) -> _Parsed:
    return _Parsed(tokenizer, _highest_id(tokenizer), tokenizer_record(tokenizer))


@lru_cache(maxsize=1)
def _parsed_json(text: str) -> _Parsed:
    """A tokenizer.json's text parsed, kept for the next load of the same text: loading a model
    again (another number format, a what-if, the tests' hundreds of loads of GPT-2's tokenizer)
    then skips the ~0.15 s of parsing and inspecting GPT-2's 50,000 merges. The tokenizer is
    never changed after it is made, so the loads can share it."""
    return _parsed(HFTokenizer.from_str(text))


def visible_text(text: str) -> str:
    """`text` with whitespace made visible, invisible characters escaped, and a lone combining
    mark shown on a dotted circle, so no token ever looks blank (the display rule of
    gpt2viz.text_safety, for tokens)."""
    return visible_token(text)


class Tokenizer:
    """Text <-> token ids, plus the bytes and a display string of each token."""

    def __init__(self, tokenizer: HFTokenizer, source: str = "tokenizer") -> None:
        self._tk = tokenizer
        self.source = source  # the file(s) it came from, as errors name them
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        # The ids a model may give it: its own, or the model's rows where the model has more (a
        # vocabulary padded to 50,304; such ids decode to nothing, as the tokenizers library has it).
        self.id_limit = self.vocab_size
        eos = tokenizer.token_to_id(EOS_TEXT)
        self.eos_id: int | None = eos
        self._special = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
        self.record: TokenizerRecord | None = None  # what its files held (model/files.py), once loaded from them
        self._shown: dict[int, str] = {}  # display()'s answers: a trace shows the same tokens many times

    @classmethod
    def from_dir(cls, directory: str | Path, vocab_size: int | None = None) -> "Tokenizer":
        """Loads `tokenizer.json`, or else `vocab.json` + `merges.txt`, from a checkpoint directory:
        regular files of at most MAX_TOKENIZER_BYTES each (gpt2viz.input_files). With
        `vocab_size` (the model's), a tokenizer with an id the model has no row for is refused."""
        files = tokenizer_files(directory)
        source = " + ".join(map(str, files))
        try:
            sizes = [checked_size(f, MAX_TOKENIZER_BYTES) for f in files]
            if len(files) == 1:
                parsed = _parsed_json(read_regular(files[0], MAX_TOKENIZER_BYTES).decode("utf-8"))
            else:
                parsed = _parsed(build_byte_level_bpe(*files))
        except FileRefused as err:
            raise ModelSourceError(_("{path}: {problem}").format(path=source, problem=err.problem)) from None
        except UnicodeDecodeError:
            raise ModelSourceError(_("{path}: cannot read the tokenizer (not UTF-8 text)").format(path=source)) from None
        except Exception as err:  # the tokenizers library raises plain Exceptions on bad files
            raise ModelSourceError(
                _("{path}: cannot read the tokenizer ({error})").format(path=source, error=_first_line(err))
            ) from None
        tokenizer = cls(parsed.tokenizer, source)
        tokenizer._check_ids(vocab_size, parsed.top_id)
        tokenizer.id_limit = max(tokenizer.vocab_size, vocab_size or 0)
        tokenizer.record = replace(parsed.record, files=tuple(FileRecord(f.name, size) for f, size in zip(files, sizes)))
        return tokenizer

    def _check_ids(self, vocab_size: int | None, top: int | None = None) -> None:
        """Refuses an empty vocabulary, and an id the model (`vocab_size` rows) has no row for;
        `top`, the tokenizer's highest id where it is known already."""
        if top is None:
            top = _highest_id(self._tk)
        if top is None:
            raise ModelSourceError(_("{path}: an empty vocabulary (no token to encode text with)").format(path=self.source))
        if vocab_size is not None and top >= vocab_size:
            raise ModelSourceError(
                _("{path}: token id {id} is beyond the model's vocabulary (config.json's vocab_size is {vocab}): "
                  "a tokenizer bigger than the model").format(path=self.source, id=count(top), vocab=count(vocab_size))
            )

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; `<|endoftext|>` written in the text is the special token."""
        _check_text(text)
        try:
            return self._tk.encode(text, add_special_tokens=False).ids
        except Exception as err:  # e.g. a WordLevel vocabulary without [UNK] meeting an unknown word
            raise ModelSourceError(
                _("{path}: the tokenizer cannot encode this text ({error})").format(path=self.source, error=_first_line(err))
            ) from None

    def decode(self, ids: list[int], setting: str = "ids", *, skip_special_tokens: bool = False) -> str:
        """The text of a list of ids (incomplete UTF-8 at the edges becomes U+FFFD); an id
        outside the vocabulary is a TokenIdError naming the argument `setting`. Special tokens
        (<|endoftext|>) are written out unless `skip_special_tokens`."""
        return self._tk.decode(self._checked_ids(ids, setting), skip_special_tokens=skip_special_tokens)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text (lists of different lengths: pad them with an attention mask,
        as `LanguageModel.pad` does)."""
        texts = list(texts)
        for text in texts:
            _check_text(text)
        try:
            return [e.ids for e in self._tk.encode_batch(texts, add_special_tokens=False)]
        except Exception as err:
            raise ModelSourceError(
                _("{path}: the tokenizer cannot encode this text ({error})").format(path=self.source, error=_first_line(err))
            ) from None

    def decode_batch(self, rows: list[list[int]]) -> list[str]:
        """The text of each list of ids."""
        return self._tk.decode_batch([self._checked_ids(r) for r in rows], skip_special_tokens=False)

    def _checked_ids(self, ids: list[int], setting: str = "ids") -> list[int]:
        """`ids` as a list of ints below `id_limit` (the tokenizers library would raise
        OverflowError for -1)."""
        return checked_ids(ids.tolist() if hasattr(ids, "tolist") else list(ids), self.id_limit, setting)

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
        """The token as a person should see it: '␣not', '↵', 'caf\\xc3' for half a character.
        Remembered per id: a generation's candidates (up to 1,000 a step) were 44 % of its trace's time."""
        shown = self._shown.get(token_id)
        if shown is None:
            raw = self.token_bytes(token_id)
            shown = self._shown[token_id] = visible_text(raw.decode("utf-8", errors="backslashreplace"))
        return shown


def checked_ids(ids: list, vocab: int, setting: str) -> list[int]:
    """`ids` if each is an int (not a bool) from 0 to `vocab` - 1, else a TokenIdError naming the
    first that is not, `setting` naming the argument."""
    bad = next((i for i in ids if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab), None)
    if bad is not None:
        raise TokenIdError(setting, N_("{setting}: id {id} is outside the vocabulary (0 to {last})"), id=shown(bad), last=vocab - 1)
    return ids


def tokenizer_files(directory: str | Path) -> list[Path]:
    """The file(s) `Tokenizer.from_dir` reads in `directory`: `[tokenizer.json]`, or else
    `[vocab.json, merges.txt]`. Anything by that name counts (a directory named tokenizer.json is
    then refused as one, not passed over)."""
    directory = Path(directory)
    single = directory / "tokenizer.json"
    pair = [directory / "vocab.json", directory / "merges.txt"]
    if os.path.lexists(single):
        return [single]
    if all(os.path.lexists(f) for f in pair):
        return pair
    raise ModelSourceError(_("{path}: no tokenizer.json (or vocab.json + merges.txt)").format(path=directory))


def _check_text(text: object) -> None:
    """Refuses a text that is not a str, or holds a lone surrogate: not a character, it has no
    UTF-8 bytes to tokenize (Python lets such strings exist; a file or a terminal cannot hold one)."""
    if not isinstance(text, str):
        raise InputError("text", N_("{setting} must be a str, got {type}"), type=type(text).__name__)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InputError(
            "text", N_("{setting} holds {char} at character {offset}, a lone surrogate: not a character, so it "
                       "cannot be tokenized"), char=f"U+{ord(text[err.start]):04X}", offset=err.start,
        ) from None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
