"""Runs many `gpt2viz` command lines cheaply, each in a process of its own, for the fuzz tests.

Starting Python and importing torch costs a few seconds a run, more than most hostile cases take.
So one server process imports what a run imports (torch, gpt2viz, textual), runs nothing, and
forks a child per case: the child is a fresh process as far as the case can tell (its own
session, standard streams, working directory, memory and exit status) and runs
`gpt2viz.cli.main(argv)` as `python -m gpt2viz` would. The server measures what the fuzz asserts:
the child's exit status, its peak resident memory (`os.wait4`'s ru_maxrss, which counts what the
child shares with the server, as a fresh run would have it), its time, and it kills a child that
runs past the time bound (a hang).

With `pilot` keys, the child runs the TUI through Textual's Pilot instead of a terminal: the CLI's
own path (`--replay` read and checked, then the app), with `Gpt2VizApp.run` replaced by a walk
that presses the keys, so a replayed trace that breaks a screen ends as it would in a terminal.

Nothing here is a test; tests/test_fuzz_cli.py and tests/tui/test_tui_fuzz_replay.py use it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ADDRESS_SPACE = 8 * 1024**3  # what a child may map at all: a runaway fails fast, not the machine
TIME_BOUND = 120  # seconds a case may take: far above the few it needs; only a hang reaches it
# Resident memory a case may reach: a run of the bundled model peaks near 330 MB, a replay near
# 200 MB; the hostile inputs of issue 19 took 2.5 to 17 GB.
PEAK_BOUND = 1536 * 1024**2


@dataclass
class Result:
    """What one case did."""

    code: int  # exit status; -N when killed by signal N
    stderr: str  # decoded (undecodable bytes replaced) and stripped
    stderr_bytes: bytes  # as written
    stdout: bytes
    peak: int  # bytes of resident memory at most
    seconds: float
    timed_out: bool

    def lines(self) -> list[str]:
        return self.stderr.splitlines()


class Server:
    """The forking server, started once; `run` one case at a time."""

    def __init__(self, workdir: Path, env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        environment = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "HF_HOME": str(workdir / "hf-home"),  # no real cache: a hub id is never found offline
            "XDG_STATE_HOME": str(workdir / "state"),  # the log an unexpected error writes
            "LANG": "C.UTF-8",
            "LC_ALL": "",
            "LC_MESSAGES": "",
            "TOKENIZERS_PARALLELISM": "false",
            # One thread a case: the fuzz asserts errors, memory and hangs, not speed, and CI runs
            # two test files at once on two cores (threads spinning for a core cost time, not more).
            "OMP_NUM_THREADS": "1",
            **(env or {}),
        }
        self.proc = subprocess.Popen(
            [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment,
            cwd=workdir, text=True, encoding="utf-8",
        )
        assert self._read() == {"ready": True}

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fuzz server stopped (exit status {self.proc.wait()})")
        return json.loads(line)

    def run(self, argv: list[str | bytes], *, cwd: Path | None = None, stdin: bytes | None = None,
            close: tuple[int, ...] = (), pilot: list[str] | None = None, size: tuple[int, int] = (80, 24),
            timeout: float = TIME_BOUND, stdout_to: str | None = None, env: dict[str, str | None] | None = None) -> Result:
        """Runs `gpt2viz argv` (bytes are passed as the OS would, undecodable bytes and all).
        Standard input holds `stdin` (None: /dev/null); standard output is kept, or goes to the
        file `stdout_to` (/dev/full, say); the descriptors in `close` are closed. `env` sets (or,
        with None, removes) environment variables of this run, read when the run reads them as
        in a fresh process: huggingface_hub reads HF_ENDPOINT when it is imported, and only a
        run imports it."""
        case = self.workdir / f"case-{time.monotonic_ns()}"
        case.mkdir()
        stdin_file = None
        if stdin is not None:
            stdin_file = case / "stdin"
            stdin_file.write_bytes(stdin)
        request = {
            "argv": [os.fsdecode(a) for a in argv], "cwd": str(cwd or self.workdir),
            "stdin": None if stdin_file is None else str(stdin_file), "stdout": stdout_to or str(case / "stdout"),
            "stderr": str(case / "stderr"), "close": list(close), "pilot": pilot, "size": list(size),
            "timeout": timeout, "env": env or {},
        }
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        stderr = (case / "stderr").read_bytes()
        result = Result(
            code=answer["code"],
            stderr=stderr.decode("utf-8", errors="replace").strip(),
            stderr_bytes=stderr,
            stdout=(case / "stdout").read_bytes() if (case / "stdout").exists() else b"",
            peak=answer["peak"],
            seconds=answer["seconds"],
            timed_out=answer["timed_out"],
        )
        for name in ("stdin", "stdout", "stderr"):
            if (case / name).exists():
                (case / name).unlink()
        case.rmdir()
        return result

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def with_env(environ: dict[str, str], changes: dict[str, str | None] | None) -> dict[str, str]:
    """`environ` with `changes` made: a value sets a variable, None removes it."""
    out = dict(environ)
    for name, value in (changes or {}).items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


_shared: Server | None = None


def shared_server() -> Server:
    """One server for every test file of this pytest process that runs `gpt2viz` (the CLI errors,
    the hub): started on first use, stopped when pytest exits."""
    global _shared
    if _shared is None:
        import atexit
        import shutil
        import tempfile

        workdir = Path(tempfile.mkdtemp(prefix="gpt2viz-cli-server-"))
        _shared = Server(workdir)
        atexit.register(shutil.rmtree, workdir, ignore_errors=True)
        atexit.register(_shared.close)  # (run first: last registered)
    return _shared


# -- the server's side -------------------------------------------------------------------------


def _pilot_run(keys: list[str], size: tuple[int, int]):
    """A replacement for `Gpt2VizApp.run`: the app under Pilot, `keys` pressed one by one. A key
    'layer:N' shows, one after the other, every stage of the step-through in block N ('layer:-'
    those outside the blocks), as the stage keys would reach them."""
    import asyncio

    def run(app, *args, **kwargs):
        async def settled(pilot):
            """Until the app's model work is done or the app has ended: a key then goes to the screen
            the work leads to, and the walk never leaves before a refusal the work would report (a
            slow load on a busy machine once let the walk end first, exit status 0)."""
            while app.return_code is None and not app.session.jobs.idle:  # the case's timeout ends a hang
                await pilot.pause()
                await asyncio.sleep(0.01)

        async def walk():
            async with app.run_test(size=size) as pilot:
                await pilot.pause()
                await settled(pilot)
                for key in keys:
                    if app.return_code is not None:
                        break  # the app ended (an error it reported): nothing more to press
                    if key.startswith("layer:"):
                        screen = app.screen
                        layer = None if key == "layer:-" else int(key[6:])
                        for index, stage in enumerate(getattr(screen, "stages", ())):
                            if stage.layer == layer and app.return_code is None:
                                screen.go_to(index)
                                await pilot.pause()
                    else:
                        await pilot.press(key)
                await settled(pilot)
                await pilot.pause()

        try:
            asyncio.run(walk())
        except Exception:  # the app has recorded it (exit status 1 and the line to print)
            pass
        return app.return_value  # as App.run returns it (None unless the app called exit)

    return run


def _child(request: dict) -> int:
    """Runs one case in the forked child; returns its exit status."""
    os.setsid()  # no controlling terminal, as in CI: the TUI cannot open /dev/tty
    environ = with_env(dict(os.environ), request["env"])
    os.environ.clear()
    os.environ.update(environ)
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    os.chdir(request["cwd"])
    stdin = os.open(request["stdin"] or os.devnull, os.O_RDONLY)
    stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    stderr = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for fd, source in ((0, stdin), (1, stdout), (2, stderr)):
        os.dup2(source, fd)
        os.close(source)
    # The standard streams as Python makes them at startup: None for a closed descriptor.
    sys.stdin = open(0, "r", closefd=False, encoding="utf-8", errors="surrogateescape")
    sys.stdout = open(1, "w", closefd=False, encoding="utf-8", errors="surrogateescape")
    sys.stderr = open(2, "w", closefd=False, encoding="utf-8", errors="backslashreplace", buffering=1)
    for fd in request["close"]:
        os.close(fd)
        setattr(sys, ("stdin", "stdout", "stderr")[fd], None)
    from gpt2viz import cli

    if request["pilot"] is not None:
        from gpt2viz.tui.app import Gpt2VizApp
        import pilot_speed

        pilot_speed.install()

        Gpt2VizApp.run = _pilot_run(request["pilot"], tuple(request["size"]))
        cli.keys_from_the_terminal = lambda: None
    try:
        code = cli.main(request["argv"])
    except SystemExit as exit_:  # --help, --version
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    # What Python does at exit: flush the streams; a flush that fails is exit status 120.
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            code = 120
    return code


def _serve() -> None:
    # What a run imports, imported once (and nothing run: no torch thread exists to fork). Not
    # huggingface_hub: it reads its environment when imported, and a run may set its own.
    import torch  # noqa: F401
    import safetensors.torch  # noqa: F401
    import tokenizers  # noqa: F401
    import textual.app  # noqa: F401

    import gpt2viz  # noqa: F401
    import gpt2viz.cli  # noqa: F401
    import gpt2viz.trace  # noqa: F401
    import gpt2viz.tui.app  # noqa: F401
    from gpt2viz.model.tokenizer import Tokenizer

    # GPT-2's tokenizer, parsed once and kept (Tokenizer.from_dir keeps the last tokenizer.json
    # text it parsed): the bundled model and the tests' checkpoints all hold it, so a run that
    # loads one of them reads its file but does not parse it again (0.15 s a run).
    Tokenizer.from_dir(REPO / "assets" / "tiny")

    assert "huggingface_hub" not in sys.modules, "a run's HF_* variables would come too late"

    answers = sys.stdout
    requests = sys.stdin
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in requests:
        request = json.loads(line)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request)
            except BaseException:  # a fault of this harness, not of gpt2viz: shown as such
                import traceback

                traceback.print_exc()
                code = 99
            finally:
                os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)
        timed_out = False
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() - start > request["timeout"]:
                timed_out = True
                try:
                    os.killpg(pid, signal.SIGKILL)  # the child and whatever it started
                except ProcessLookupError:  # not yet a group of its own
                    os.kill(pid, signal.SIGKILL)
                _, status, usage = os.wait4(pid, 0)
                break
            time.sleep(0.01)
        answers.write(json.dumps({
            "code": os.waitstatus_to_exitcode(status), "peak": usage.ru_maxrss * 1024,
            "seconds": time.monotonic() - start, "timed_out": timed_out,
        }) + "\n")
        answers.flush()


if __name__ == "__main__":
    _serve()
