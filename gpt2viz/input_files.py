"""Reading the files gpt2viz is given: regular files only, each within a size bound.

Every file gpt2viz reads (a prompt file, config.json, tokenizer files, a safetensors header, a
shard index) is looked at with `os.stat` before it is opened. A directory, a pipe (FIFO), a
device such as /dev/zero or a socket is refused with a sentence that says so and is never read:
reading /dev/zero never ends, and opening a FIFO that nobody writes to never returns. What this
module opens itself it opens with O_NONBLOCK, so that even a file swapped for a FIFO after the
check cannot hold the open. Each kind of file has a size bound, checked before a byte is read
(README, "Limits"); they sit far above real files and far below what would exhaust memory.

A problem is raised as `FileRefused`, a sentence without the file's name: the caller knows
what the file is to the user (`--prompt-file x.txt`, `config.json`) and says it in its own error.
Nothing here imports from above gpt2viz.errors: the core uses it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from .i18n import _, count

KIB, MIB = 1024, 1024**2
# A prompt file (or standard input with `-`): a prompt keeps its last n_ctx tokens (at most
# 4,096, a few pages), so a megabyte is far more than any prompt can use.
MAX_PROMPT_BYTES = 1 * MIB
# config.json: GPT-2's is 665 bytes; Hugging Face configs with every optional field, a few KB.
MAX_CONFIG_BYTES = 1 * MIB
# model.safetensors.index.json: one line per tensor, about 60 bytes each (GPT-2 xl: 30 KB).
MAX_INDEX_BYTES = 8 * MIB
# tokenizer.json, vocab.json, merges.txt: GPT-2's tokenizer.json is 1.4 MB; one of 262,144 tokens
# (the largest vocabulary gpt2viz loads) is about 30 MB.
MAX_TOKENIZER_BYTES = 64 * MIB
# A safetensors file's JSON header: one entry per tensor, about 120 bytes each (GPT-2 xl: 90 KB).
MAX_SAFETENSORS_HEADER_BYTES = 8 * MIB


class FileRefused(Exception):
    """Why a file was not read, as one sentence in the current language without the file's name."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


def _os_problem(err: OSError) -> FileRefused:
    if err.errno == errno.ENOENT:
        return FileRefused(_("no such file"))
    if err.errno == errno.ENAMETOOLONG:
        return FileRefused(_("the name is too long for the file system"))
    if err.errno == errno.ELOOP:
        return FileRefused(_("a loop of symbolic links"))
    return FileRefused(_("cannot read ({error})").format(error=err.strerror or err))


def _kind_problem(mode: int) -> FileRefused | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return FileRefused(_("is a directory, not a file"))
    return FileRefused(_("not a regular file (a pipe, a device or a socket), so it is not read"))


def _size_problem(size: int, limit: int) -> FileRefused | None:
    if size <= limit:
        return None
    return FileRefused(
        _("{size} bytes, more than gpt2viz reads from such a file ({limit} bytes)").format(
            size=count(size), limit=count(limit)
        )
    )


def checked_size(path: str | Path, limit: int) -> int:
    """The size of the regular file at `path` (symbolic links followed), if it is at most `limit`
    bytes; otherwise FileRefused. For files a library opens itself, after this check."""
    try:
        info = os.stat(path)
    except OSError as err:
        raise _os_problem(err) from None
    problem = _kind_problem(info.st_mode) or _size_problem(info.st_size, limit)
    if problem is not None:
        raise problem
    return info.st_size


def open_regular(path: str | Path, limit: int) -> int:
    """A read-only descriptor of the regular file at `path` of at most `limit` bytes, opened
    without blocking; the caller closes it. FileRefused for anything else."""
    checked_size(path, limit)  # never opens a FIFO or a device
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise _os_problem(err) from None
    try:  # what was opened, in case the file changed since the stat
        info = os.fstat(fd)
        problem = _kind_problem(info.st_mode) or _size_problem(info.st_size, limit)
    except OSError as err:
        problem = _os_problem(err)
    if problem is not None:
        os.close(fd)
        raise problem
    return fd


def read_limited(read, limit: int) -> bytes:
    """Everything `read(n)` gives until it gives nothing, refused past `limit` bytes."""
    chunks, total = [], 0
    while True:
        chunk = read(min(MIB, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise FileRefused(_("more than {limit} bytes, more than gpt2viz reads from it").format(limit=count(limit)))


def read_regular(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them (FileRefused otherwise)."""
    fd = open_regular(path, limit)
    try:
        return read_limited(lambda n: os.read(fd, n), limit)
    except OSError as err:
        raise _os_problem(err) from None
    finally:
        os.close(fd)


def parse_json(data: bytes) -> object:
    """A JSON document from UTF-8 bytes; FileRefused says what is wrong with it in one line,
    including what Python's parser raises beyond JSONDecodeError (nesting too deep for its
    recursion, an integer of more digits than it converts)."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise FileRefused(_("not UTF-8 text (byte {byte} at offset {offset})").format(
            byte=f"0x{data[err.start]:02x}", offset=count(err.start))) from None
    except json.JSONDecodeError as err:
        raise FileRefused(_("not valid JSON ({error})").format(error=err)) from None
    except RecursionError:
        raise FileRefused(_("not valid JSON (nested too deeply)")) from None
    except ValueError:  # an integer of more digits than Python converts (4,300)
        raise FileRefused(_("not valid JSON (an integer with thousands of digits)")) from None


def read_json(path: str | Path, limit: int) -> object:
    """`parse_json` of the regular file at `path`, read within `limit` bytes."""
    return parse_json(read_regular(path, limit))


def shown(value: object, limit: int = 40) -> str:
    """A value from a file as an error message quotes it: its repr, or its type and a cut repr
    when long (a config field may hold a megabyte of text or a 4,000-digit number)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        # str() of an integer of more than 4,300 digits raises: count its digits from its bits.
        return _("an integer of about {digits} digits").format(digits=count(int(value.bit_length() * 0.30103) + 1))
    if getattr(value, "ndim", 0) and hasattr(value, "shape") and hasattr(value, "dtype"):  # a tensor or array: its shape
        return _("a tensor of shape {shape} ({dtype})").format(shape=list(value.shape), dtype=str(value.dtype).removeprefix("torch."))
    text = repr(value)
    if "\n" in text:  # an object whose repr takes several lines: one line
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
