"""Unexpected errors (bugs, odd files nobody foresaw): one line for the user, and the whole
traceback in a log file that the line names, so a bug report can carry it.
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from pathlib import Path

from .i18n import _

LOG_NAME = "errors.log"
MAX_LOG_BYTES = 1_000_000  # past this, the log starts over (the previous one is kept as .1)


def log_dir() -> Path:
    """Where the log lives: $XDG_STATE_HOME/gpt2viz, by default ~/.local/state/gpt2viz."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "gpt2viz"


def _append(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.stat().st_size > MAX_LOG_BYTES:
        os.replace(path, path.with_name(path.name + ".1"))
    # Never through a symbolic link: the fallback lives in a shared temporary directory.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as f:
        f.write(text)


def log_traceback(err: BaseException) -> Path | None:
    """Appends `err`'s traceback to the log; returns the file, or None if no place was writable."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    text = f"--- {stamp}\n" + "".join(traceback.format_exception(type(err), err, err.__traceback__))
    fallback = Path(tempfile.gettempdir()) / f"gpt2viz-{os.getuid() if hasattr(os, 'getuid') else 'user'}-{LOG_NAME}"
    for path in (log_dir() / LOG_NAME, fallback):
        try:
            _append(path, text)
            return path
        except OSError:
            continue
    return None


def unexpected_error_line(err: BaseException) -> str:
    """The one line shown for an error gpt2viz did not expect; its traceback goes to the log."""
    where = log_traceback(err)
    detail = str(err).splitlines()[0] if str(err) else ""
    what = f"{type(err).__name__}: {detail}" if detail else type(err).__name__
    if where is None:
        return _("unexpected error, a bug in gpt2viz: {error}").format(error=what)
    return _("unexpected error, a bug in gpt2viz: {error} (traceback in {path})").format(error=what, path=where)
