"""The generation view's decode step against the headless one, on the same model.

Issue 32 asks for the app's timings to be the model's, not the model's plus the app's own
drawing: the generation view's decode step within 1.2x of the headless step. This runs the app as
a person would, in a tmux session (120 x 40 unless told), and generates 40 tokens (`g` the first
time, Space after), reading the Cost panel's "decode step X ms mean of N" once the run says it is
done; then the same generation headless in fresh processes (`--json - --generate 40`), reading
the trace's `mean_decode_ms`. The two kinds alternate by rounds; the medians are compared. The
terminal is tmux's: a process of its own that parses every frame the app writes, as a real
terminal does.

    python benchmarks/tui_steps.py [--model tiny] [--model DIR ...] [--rounds 3] [--out FILE]

Needs tmux (run.py calls `measure` when it is installed). Progress goes to stderr, a summary to
stdout, every number to the JSON at --out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))

from key_mash import Session  # noqa: E402
PYTHON = sys.executable
PROMPT = "ROMEO:"
SESSION = "gpt2viz-tui-steps"
DECODE = re.compile(r"decode step\s+([0-9.]+) ms\s+mean of (\d+)")
DONE = "✓ done"
READY = "g generate"  # the step-through's key bar: the model is loaded


def available() -> bool:
    """Whether tmux is installed."""
    return shutil.which("tmux") is not None


def headless_decode_ms(model: str, tokens: int, env: dict) -> float:
    """One headless generation in a fresh process: its trace's mean decode step, ms."""
    out = subprocess.run(
        [PYTHON, "-m", "gpt2viz", PROMPT, "--model", model, "--json", "-", "--generate", str(tokens), "--lang", "en"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout
    return float(json.loads(out)["generation"]["mean_decode_ms"])


class App:
    """The app in a tmux session of its own (tools/key_mash.py's Session), its step-through loaded."""

    def __init__(self, model: str, size: str, tokens: int, env: dict, state: Path) -> None:
        width, height = (int(n) for n in size.split("x"))
        steering = {k: v for k, v in env.items() if k.startswith(("GPT2VIZ_", "XDG_CACHE", "ATEN_", "ONEDNN_", "FBGEMM_"))}
        self.session = Session(SESSION, (width, height), "en", model, state, (PROMPT, "--generate", str(tokens)), steering)
        if not self.session.wait_for(READY, 120):
            raise RuntimeError(f"the app did not show its step-through:\n{self.session.screen()}")
        self.session.keys("escape")  # the lessons menu a first start opens
        time.sleep(1)
        self.runs = 0

    def decode_ms(self, tokens: int, expected_ms: float) -> float:
        """One generation (`g` the first time, then Space: again): its mean decode step, ms. The
        screen is read only after the run should have ended, so polling draws nothing during it
        (a new run clears the view at once, so a "done" seen then is the new run's)."""
        self.session.keys("g" if self.runs == 0 else "space")
        self.runs += 1
        time.sleep(1.0 + 3 * tokens * expected_ms / 1000)
        found = DECODE.search(self.session.screen()) if self.session.wait_for(DONE, 120) else None
        if found is None:
            raise RuntimeError(f"no finished generation on the screen:\n{self.session.screen()}")
        return float(found.group(1))

    def close(self) -> None:
        self.session.keys("q")
        time.sleep(1)
        self.session.close()


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
    state = Path(tempfile.mkdtemp(prefix="gpt2viz-tui-steps-"))  # the app's state (errors.log), its own
    for r in range(rounds):
        app = App(model, size, tokens, env, state)
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
    shutil.rmtree(state, ignore_errors=True)
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
