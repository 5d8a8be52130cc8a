"""Where gpt2viz may write a file it is asked to write (`--json PATH`), checked before any work.

The rules, as a person expects them from shell redirection (`> PATH`):
- `-` is standard output, which must be open; so is a name that leads to it (`/dev/stdout`, or
  the very file stdout was redirected to), written through it as the shell opened it.
- A symbolic link is followed: the file it points to is written, the link stays a link (a
  dangling link creates its target, as `>` does). A loop of links is refused, never replaced.
- The file written is a regular file, new or replaced whole (the trace goes to a temporary file
  beside it, then is renamed over it). A directory, a pipe (FIFO), a device or a socket is refused:
  nothing could be renamed over it, and writing into a FIFO that nobody reads blocks forever. To
  send a trace into a pipe, write it to standard output (`--json - | ...`).
- A path ending in `/` names a directory, never a file; the directory a new file goes into must
  exist.
- A file the run reads (the model's weights, config and tokenizer, the prompt file, standard
  input when the prompt comes from there) is never written over, whatever name reaches it: the
  same file is the same device and inode, through symbolic or hard links alike.
- `/dev/null`, the universal discard, is written into (nothing is kept, as with `> /dev/null`).
- A file that is not writable is refused, as `>` refuses it (the directory's permission would
  let a rename replace it). A file with more than one name (hard links) is written in place, as
  `>` writes it, so that every name sees the trace: the trace is made whole in memory first, so
  only a full disk can leave it short.

While a file is written, SIGINT, SIGTERM and SIGHUP wait (`signals_held`): a file written in place is
never left truncated by Ctrl-C, a temporary file never left behind by a kill, and the interrupt
comes once the file is whole or untouched. `written` lists the files written whole, for the CLI's
line on an interrupt.

Errors are OutputError with `{path}` where the file goes; the CLI puts its flag before it.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import OutputError
from .i18n import N_

# A file name has at most 255 bytes (NAME_MAX); gpt2viz.trace.jsonio's temporary name beside it
# keeps only the first 100 characters of the name.
MAX_NAME_BYTES = 255


STDIN = 0  # in `inputs`: standard input, read by the run (`--prompt-file -`)
DEV_NULL = os.devnull
# Ctrl-C, a kill, and a closed terminal or dropped ssh connection (SIGHUP, where there is one).
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())

# The files this process has written whole (jsonio adds each as it is done).
written: list[str] = []


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait while the `with` block writes a file, then reach the handlers the
    process had (KeyboardInterrupt, termination) once it is done, whole or cleaned up. Only the
    main thread receives signals; elsewhere this holds nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: arrived.append(signum)) for sig in HELD_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(arrived):
            os.kill(os.getpid(), sig)  # delivered now, as it would have been


def check_output(name: str, inputs: list[str | Path | int] = ()) -> None:
    """Refuses `name` as the file a trace is written to (OutputError), by the rules above; the
    files in `inputs` are what the run reads (STDIN: standard input)."""
    if names_standard_output(name):  # '-', /dev/stdout, the file stdout goes to: written through stdout
        if sys.stdout is None or getattr(sys.stdout, "closed", False):  # None: closed when Python started
            raise OutputError(N_("{path}: standard output is closed"), name)
        return
    if not name:
        raise OutputError(N_("{path}: an empty file name"), '""')
    if name.endswith(("/", os.sep)):
        raise OutputError(N_("{path}: ends with '/', so it names a directory, not a file"), name)
    target = _target(name)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as err:
        raise _os_error(name, err) from None
    if len(os.fsencode(target.name)) > MAX_NAME_BYTES:
        raise OutputError(N_("{path}: the file name is longer than {max} bytes"), name, max=MAX_NAME_BYTES)
    if info is None:
        parent = target.parent
        if not parent.is_dir():
            raise OutputError(N_("{path}: no such directory: {directory}"), name, directory=str(parent))
        return
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(N_("{path}: is a directory"), name)
    if is_dev_null(target):
        return
    if not stat.S_ISREG(info.st_mode):
        raise OutputError(
            N_("{path}: not a regular file (a pipe, a device or a socket); a trace is written to a file, or "
               "to standard output with '-'"),
            name,
        )
    for source in inputs:
        if _same_file(info, source):
            if source == STDIN:
                raise OutputError(N_("{path}: this run reads that file as its standard input, so it is never written over"),
                                  name)
            raise OutputError(N_("{path}: this run reads that file ({input}), so it is never written over"), name,
                              input=str(source))
    if not os.access(target, os.W_OK):
        raise OutputError(N_("{path}: cannot write there ({error})"), name, error=os.strerror(errno.EACCES))


def names_standard_output(name: str) -> bool:
    """Whether `name` leads to this process's standard output itself (/dev/stdout, /dev/fd/1,
    /proc/self/fd/1, or the file stdout was redirected to): a trace is then written through
    standard output as the shell opened it (`>>` appends), never renamed over what it leads to."""
    if name == "-":
        return True
    try:
        info, out = os.stat(name), os.fstat(sys.stdout.fileno())  # what a trace to '-' is written into
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError
        return False
    return (info.st_dev, info.st_ino) == (out.st_dev, out.st_ino)


def is_dev_null(path: str | Path) -> bool:
    """Whether `path` is the null device (by what it is, not by its name)."""
    try:
        info, null = os.stat(path), os.stat(DEV_NULL)
    except OSError:
        return False
    return stat.S_ISCHR(info.st_mode) and (info.st_dev, info.st_ino, info.st_rdev) == (null.st_dev, null.st_ino, null.st_rdev)


def _target(name: str) -> Path:
    """The file `name` leads to: a symbolic link followed to its end (a loop is an error)."""
    path = Path(name)
    try:
        if not path.is_symlink():
            return path
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:  # a dangling link: its target is created, as `>` does
        return Path(os.path.realpath(path))
    except OSError as err:
        raise _os_error(name, err) from None


def _same_file(info: os.stat_result, source: str | Path | int) -> bool:
    try:
        other = os.fstat(source) if isinstance(source, int) else os.stat(source)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) == (other.st_dev, other.st_ino)


def _os_error(name: str, err: OSError) -> OutputError:
    if err.errno == errno.ELOOP:
        return OutputError(N_("{path}: a loop of symbolic links"), name)
    if err.errno == errno.ENAMETOOLONG:
        return OutputError(N_("{path}: the file name is too long for the file system"), name)
    return OutputError(N_("{path}: cannot write there ({error})"), name, error=err.strerror or str(err))
