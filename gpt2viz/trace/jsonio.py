"""Writing a Trace as one JSON document, atomically, and reading one back with checks."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import select
import stat
import sys
import tempfile
from pathlib import Path

from ..output_files import check_output, is_dev_null, names_standard_output, signals_held, written
from ..errors import OutputError, TraceError
from ..i18n import N_, _, count
from ..text_safety import is_hidden
from .checks import check_document
from .document import MAX_CONTAINERS, MAX_FILE_BYTES, MAX_QUOTES, Trace


# The name this package gave the error first; gpt2viz.errors.TraceError is the one class.
TraceFileError = TraceError


def dumps(trace: Trace) -> str:
    """The trace as compact JSON: readable text stays as it is (Chinese tokens are not \\u escapes),
    and every character that must not reach a terminal raw (gpt2viz.text_safety.is_hidden: C1
    controls, bidi overrides, DEL, ...; json escapes C0 itself) is written as a \\u escape, so
    `--json -` onto a terminal, or `cat` of a trace, cannot reorder or control it."""
    text = json.dumps(trace.to_dict(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _NOT_PRINTABLE_ASCII.sub(_escape_if_hidden, text)


# Outside JSON's strings a trace is printable ASCII, so a character matched here lies in a string.
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")


def _escape_if_hidden(match: re.Match) -> str:
    ch = match.group()
    if not is_hidden(ch):
        return ch
    n = ord(ch)
    if n < 0x10000:
        return f"\\u{n:04x}"
    n -= 0x10000  # JSON writes a character beyond the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"


def dump(trace: Trace, path: str | Path) -> None:
    """Writes `trace` to `path` ('-' for stdout). The path must name a regular file or a new one
    (gpt2viz.output_files: no directory, pipe or device; OutputError otherwise). A file appears
    whole or not at all: see `write_atomic`."""
    check_output(str(path))
    text = dumps(trace)
    if names_standard_output(str(path)):  # '-', /dev/stdout, or the file stdout goes to: through stdout
        try:
            sys.stdout.flush()  # what was printed before comes first
            write_all(sys.stdout.fileno(), (text + "\n").encode("utf-8"))
        except (OSError, ValueError, AttributeError) as err:  # full, closed or absent stdout
            raise OutputError(N_("{path}: write failed ({error})"), "-", error=getattr(err, "strerror", None) or err) from None
        return
    write_atomic(Path(path), text + "\n")


def write_all(fd: int, data: bytes) -> None:
    """Every byte of `data` into `fd`, however the pipe takes them: a write may take part of it,
    and a pipe left non-blocking by another program may take none for a while (waited out)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])


def write_atomic(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file and a rename; leaves no debris on error.

    A symbolic link is written through (its target is replaced, the link kept). `/dev/null` and a
    file of several names (hard links) are written in place, as `> PATH` writes them. `dump` has
    checked the path first (gpt2viz.output_files)."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise OutputError(N_("{path}: is a directory"), path)
    with signals_held():  # no Ctrl-C between truncating and writing, no kill before cleaning up
        if is_dev_null(path) or (path.is_file() and path.stat().st_nlink > 1):
            _write_in_place(path, text)
        else:
            _write_through_temporary(path, text)
        written.append(str(path))


def _write_through_temporary(path: Path, text: str) -> None:
    """`text` into a temporary file beside `path`, renamed over it (removed on error)."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        # The temporary name starts with the target's, cut so that a 255-byte name still fits.
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".tmp", dir=directory)
    except OSError as err:
        if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and path.is_file() and os.access(path, os.W_OK):
            _write_in_place(path, text)  # a writable file in a directory we may not add to: as `>` writes it
            return
        raise OutputError(N_("{path}: cannot write there ({error})"), path, error=err.strerror) from None
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp makes 0600; a trace is an ordinary file
        _keep_owner(fd, path)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError):
            raise OutputError(
                N_("{path}: write failed ({error}); nothing was written"), path, error=err.strerror or err
            ) from None
        raise


def _write_in_place(path: Path, text: str) -> None:
    """`text` into the file `path` itself (every name of it sees it), truncated first, as `>` does."""
    data = text.encode("utf-8")
    regular = path.is_file()
    truncated = False
    try:
        with open(path, "r+b" if regular else "wb") as f:
            if regular:
                f.truncate(0)
                truncated = True
            f.write(data)
            f.flush()
            if regular:
                os.fsync(f.fileno())
    except OSError as err:
        if truncated:  # what was there is gone, and the trace did not fit: say so
            raise OutputError(N_("{path}: write failed ({error}); the file was written in place (it has other names) "
                                 "and is now cut short"), path, error=err.strerror or err) from None
        raise OutputError(N_("{path}: write failed ({error})"), path, error=err.strerror or err) from None


def _keep_owner(fd: int, path: Path) -> None:
    """The replaced file's owner and group for its replacement, where this process may give them
    (root may; others keep their own, as a new file would have)."""
    try:
        old = path.stat()
        os.fchown(fd, old.st_uid, old.st_gid)
    except OSError:
        pass


def _mode_for(path: Path) -> int:
    """The permissions the file would get from a plain open(): the old file's, or 0666 - umask."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def validate(doc: object) -> Trace:
    """Checks a decoded JSON document is a trace this version reads (`checks.check_document`: every
    field, its range, and its sizes against the trace's own config), and returns it."""
    check_document(doc)
    return Trace.from_dict(doc)


def load(path: str | Path) -> Trace:
    """Reads and validates a trace written by `dump`. A trace is untrusted input: a file over
    MAX_FILE_BYTES, or anything but a regular file (a directory, a FIFO, /dev/zero), is refused
    before it is read, and what is read must pass `validate`; the error names the file (and the
    field at fault)."""
    path = Path(path)
    data = _read_bounded(path)
    containers, quotes = data.count(b"[") + data.count(b"{"), data.count(b'"')
    if containers > MAX_CONTAINERS or quotes > MAX_QUOTES:
        raise TraceFileError(
            _("{path}: {containers} lists and objects and {strings} strings, more than a trace may hold "
              "({max_containers} and {max_strings}; docs/trace.md, Limits)").format(
                path=path, containers=count(containers), strings=count(quotes // 2),
                max_containers=count(MAX_CONTAINERS), max_strings=count(MAX_QUOTES // 2),
            )
        )
    if not data.strip():
        raise TraceFileError(_("{path}: the file is empty, so not a gpt2viz trace").format(path=path))
    try:
        # A byte-order mark, which some editors put first, is no part of the JSON (RFC 8259 lets a
        # reader ignore it).
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TraceFileError(_("{path}: not UTF-8 text, so not a gpt2viz trace").format(path=path)) from None
    del data  # the text and what it parses into are all that a large trace keeps in memory
    try:
        doc = json.loads(text, parse_constant=_refuse_constant)
    except _NotANumber as err:
        raise TraceFileError(
            _("{path}: not valid JSON ({constant} is not a JSON number; a trace writes null for it)").format(
                path=path, constant=err.constant
            )
        ) from None
    except json.JSONDecodeError as err:
        raise TraceFileError(_("{path}: not valid JSON ({error})").format(path=path, error=err)) from None
    except ValueError:  # an integer of more digits than Python converts (4,300)
        raise TraceFileError(_("{path}: not valid JSON (an integer with thousands of digits)").format(path=path)) from None
    except RecursionError:
        raise TraceFileError(_("{path}: JSON nested too deeply").format(path=path)) from None
    del text
    try:
        return validate(doc)
    except TraceError as err:
        raise TraceFileError(_("{path}: {problem}").format(path=path, problem=err), err.field) from None


class _NotANumber(Exception):
    def __init__(self, constant: str) -> None:
        self.constant = constant


def _refuse_constant(constant: str) -> None:
    """Python's json reads NaN, Infinity and -Infinity; JSON has none of them, nor has a trace."""
    raise _NotANumber(constant)


def _read_bounded(path: Path) -> bytearray:
    """The bytes of the regular file at `path`, at most MAX_FILE_BYTES of them. Opened without
    blocking (a FIFO with no writer would wait forever) and checked before any byte is read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TraceFileError(_("{path}: no such file").format(path=path)) from None
    except OSError as err:
        raise TraceFileError(_("{path}: cannot read ({error})").format(path=path, error=err.strerror)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise TraceFileError(_("{path}: is a directory, not a trace file").format(path=path))
        if not stat.S_ISREG(info.st_mode):
            raise TraceFileError(
                _("{path}: not a regular file (a pipe or a device), so not read as a trace").format(path=path)
            )
        if info.st_size > MAX_FILE_BYTES:
            raise _too_large(path, info.st_size)
        # One buffer of the file's size, read into: the bytes are in memory once. One byte more
        # tells a file that grew since fstat, read on then up to one byte past the limit.
        data = bytearray(info.st_size + 1)
        got = 0
        with io.FileIO(fd, closefd=False) as f, memoryview(data) as view:
            while got < len(data):
                n = f.readinto(view[got:])
                if not n:
                    break
                got += n
        del data[got:]
        while info.st_size < len(data) <= MAX_FILE_BYTES:
            chunk = os.read(fd, min(1 << 24, MAX_FILE_BYTES + 1 - len(data)))
            if not chunk:
                break
            data += chunk
        if len(data) > MAX_FILE_BYTES:
            raise _too_large(path, len(data))
        return data
    except OSError as err:
        raise TraceFileError(_("{path}: cannot read ({error})").format(path=path, error=err.strerror)) from None
    finally:
        os.close(fd)


def _too_large(path: Path, size: int) -> TraceFileError:
    return TraceFileError(
        _("{path}: {size} bytes, more than a trace may hold ({limit} bytes; docs/trace.md, Limits)").format(
            path=path, size=count(size), limit=count(MAX_FILE_BYTES)
        )
    )
