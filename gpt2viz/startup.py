"""The `gpt2viz` command's first and last moments: Ctrl-C while the libraries load is one line,
exit 130; and it ends as soon as its work is done.

Loading torch and the rest takes a second or two, and a KeyboardInterrupt raised inside an import
prints a long traceback before anything of gpt2viz can catch it. So the command starts here, with
nothing heavy imported (the package's own `__init__` loads its API lazily): an interrupt until the
command line has been read and the libraries loaded writes the CLI's own line and leaves with 130.
From then on the CLI handles interrupts itself (`gpt2viz.cli.main`).

When the CLI is done (the app has quit and restored the terminal, the trace is written and
closed), the process leaves with `os._exit`: Python's own teardown of torch and the rest takes
0.6 s on these machines, which a person who pressed q would wait for. Nothing is left to clean
up by then; the standard streams are flushed first.
"""

from __future__ import annotations

import os
import signal
import sys


def _language(argv: list[str]) -> str:
    """The language the command line asks for (--lang X, --lang=X), else the locale's."""
    from .i18n import language_from_env, parse_language

    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--lang" and i + 1 < len(argv) else arg.partition("=")[2] if arg.startswith("--lang=") else None
        if value is not None:
            try:
                return parse_language(value)
            except Exception:  # the CLI says what is wrong with it
                break
    return language_from_env()


def interrupted_line(argv: list[str]) -> bytes:
    """What the CLI says for an interrupt, in the command line's language."""
    from .i18n import MissingCatalog, _, set_language

    try:
        set_language(_language(argv))
        text = _("interrupted; nothing was written")
    except (MissingCatalog, OSError):
        text = "interrupted; nothing was written"
    return f"gpt2viz: {text}\n".encode("utf-8", "replace")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    line = [b"gpt2viz: interrupted; nothing was written\n"]  # until the language is known

    def leave(signum, frame) -> None:  # noqa: ARG001
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # one line, whatever follows
        os.write(2, line[0])
        os._exit(130)

    # A command started with SIGINT ignored (a background job of a script) keeps ignoring it.
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else leave)
    line[0] = interrupted_line(argv)
    from . import cli  # torch, Textual, Rich: the slow part

    cli.ENDS_THE_PROCESS = True  # an answered interrupt may stay ignored to the end
    signal.signal(signal.SIGINT, previous)
    try:
        code = cli.main(argv)
    except KeyboardInterrupt:  # a second Ctrl-C in the instant the CLI took the first: it has its line
        code = 130
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the work is done: a late Ctrl-C only ends it sooner
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe, a closed stream: nothing more can be said
            pass
    os._exit(code)
