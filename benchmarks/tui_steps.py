"""The generation view's decode step against the headless one, on the same model.

Issue 32 asks for the app's timings to be the model's, not the model's plus the app's own
drawing: the generation view's decode step within 1.2x of the headless step. This runs the app as
a person would, in a tmux session (120 x 40 unless told), and generates 40 tokens (`g` the first
time, Space after), reading the Cost panel's "decode step X ms mean of N" once the run says it is
done; then the same generation headless in fresh processes (`--json - --generate 40`), reading
the trace's `mean_decode_ms`. The two kinds alternate by rounds; the medians are compared. The terminal is tmux's: a process of its own that parses every frame the app writes,
as a real terminal does.

    python benchmarks/tui_steps.py [--model tiny] [--model DIR ...] [--rounds 3] [--out FILE]

Needs tmux (run.py calls `measure` when it is installed). Progress goes to stderr, a summary to
stdout, every number to the JSON at --out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
PROMPT = "ROMEO:"
SESSION = "gpt2viz-tui-steps"
DECODE = re.compile(r"decode step\s+([0-9.]+) ms\s+mean of (\d+)")
DONE = "✓ done"
READY = "g generate"  # the step-through's key bar: the model is loaded


def available() -> bool:
    """Whether tmux is installed."""
    return shutil.which("tmux") is not None


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout


def _screen() -> str:
    return _tmux("capture-pane", "-p", "-t", SESSION)


def _wait_for(test, timeout_s: float, every_s: float = 0.25) -> str | None:
    """The screen once `test(screen)` holds, polling every `every_s`; None after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        screen = _screen()
        if test(screen):
            return screen
        time.sleep(every_s)
    return None


def headless_decode_ms(model: str, tokens: int, env: dict) -> float:
    """One headless generation in a fresh process: its trace's mean decode step, ms."""
    out = subprocess.run(
        [PYTHON, "-m", "gpt2viz", PROMPT, "--model", model, "--json", "-", "--generate", str(tokens), "--lang", "en"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout
    return float(json.loads(out)["generation"]["mean_decode_ms"])


class App:
    """The app in a tmux session of its own, its step-through loaded."""

    def __init__(self, model: str, size: str, tokens: int, env: dict) -> None:
        width, height = size.split("x")
        _tmux("kill-session", "-t", SESSION)
        command = shlex.join([PYTHON, "-m", "gpt2viz", PROMPT, "--model", model, "--generate", str(tokens), "--lang", "en"])
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()
                           if k.startswith(("GPT2VIZ_", "XDG_", "ATEN_", "ONEDNN_", "FBGEMM_")))
        subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, "-x", width, "-y", height,
                        f"env {exports} {command}"], check=True)
        if _wait_for(lambda s: READY in s, 120) is None:
            raise RuntimeError(f"the app did not show its step-through:\n{_screen()}")
        _tmux("send-keys", "-t", SESSION, "Escape")  # the lessons menu a first start opens, if open
        time.sleep(1)
        self.runs = 0

    def decode_ms(self, tokens: int, expected_ms: float) -> float:
        """One generation (`g` the first time, then Space: again): its mean decode step, ms. The
        screen is read only after the run should have ended, so polling draws nothing during it
        (a new run clears the view at once, so a "done" seen then is the new run's)."""
        _tmux("send-keys", "-t", SESSION, "g" if self.runs == 0 else "Space")
        self.runs += 1
        time.sleep(1.0 + 3 * tokens * expected_ms / 1000)
        screen = _wait_for(lambda s: DONE in s and DECODE.search(s) is not None, 120)
        if screen is None:
            raise RuntimeError(f"no finished generation on the screen:\n{_screen()}")
        return float(DECODE.search(screen).group(1))

    def close(self) -> None:
        _tmux("send-keys", "-t", SESSION, "q")
        time.sleep(1)
        _tmux("kill-session", "-t", SESSION)


def measure(model: str, rounds: int = 3, per_round: int = 3, tokens: int = 40, size: str = "120x40", log=None) -> dict:
    """`rounds` rounds of `per_round` generations in the TUI (one app, its first generation not
    counted: the first use of its kernels), then `per_round` headless; medians and their ratio.

    The kinds alternate by rounds, not run by run: the app picks its thread count from the CPU
    share other processes used since its last piece of work (gpt2viz/threads.py), and a headless
    run between two of its generations is such a process (it would run the next one on one
    thread, which no user of the app alone sees)."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    env = dict(os.environ)
    tui, headless = [], []
    headless_decode_ms(model, tokens, env)  # a first run, which may measure the kernels
    for r in range(rounds):
        app = App(model, size, tokens, env)
        try:
            expected = statistics.median(headless) if headless else 50.0
            app.decode_ms(tokens, expected)
            runs = [app.decode_ms(tokens, expected) for _ in range(per_round)]
        finally:
            app.close()
        tui += runs
        time.sleep(2)
        runs_h = [headless_decode_ms(model, tokens, env) for _ in range(per_round)]
        headless += runs_h
        log(f"  {Path(model).name} round {r + 1}: TUI " + " ".join(f"{ms:.2f}" for ms in runs)
            + " ms; headless " + " ".join(f"{ms:.2f}" for ms in runs_h) + " ms")
    t, h = statistics.median(tui), statistics.median(headless)
    return {"model": model, "size": size, "tokens": tokens, "rounds": rounds, "per_round": per_round,
            "tui_ms": tui, "headless_ms": headless, "tui_median_ms": t, "headless_median_ms": h, "ratio": t / h}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", help="'tiny' or a checkpoint directory (repeat for more; default tiny)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of TUI then headless runs (default 3)")
    ap.add_argument("--per-round", type=int, default=3, help="generations of each kind a round (default 3)")
    ap.add_argument("--tokens", type=int, default=40, help="new tokens a generation (default 40)")
    ap.add_argument("--size", default="120x40", help="the terminal's columns x rows (default 120x40)")
    ap.add_argument("--out", default=None, help="where to write the JSON results")
    args = ap.parse_args(argv)
    if not available():
        print("tui_steps.py: tmux is not installed", file=sys.stderr)
        return 1
    results = [measure(m, args.rounds, args.per_round, args.tokens, args.size) for m in args.model or ["tiny"]]
    for r in results:
        print(f"{r['model']}: TUI decode step {r['tui_median_ms']:.2f} ms, headless {r['headless_median_ms']:.2f} ms, "
              f"{r['ratio']:.2f}x (medians of {r['rounds'] * r['per_round']}, {r['size']})")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
