"""A long soak of the key monkey (tests/tui/monkey.py): the suite's runs, over many seeds.

    python benchmarks/monkey_soak.py --keys 500000 [--seed 1] [--md benchmarks/RESULTS.md]

Runs every screen in both languages on the bundled model and on a 2-block random checkpoint, at
the three sizes in turn (120x40, 80x24, 40x12), KEYS_PER_RUN keys a run and a new seed each time,
until `--keys` keys were sent; each run ends by quitting (q, ctrl+c). Every failure is printed with
its seed and last acts (replay it with tests/tui/monkey.py's `replay`). With --md the summary
replaces the section "Key monkey soak" of the notes in RESULTS.md (kept by run.py --md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "tui")]

from gpt2viz.kernels.cpu import this_cpu

SECTION = "## Key monkey soak"


def resident_mb() -> int:
    """This process's resident memory (a leak across runs shows here)."""
    for line in Path("/proc/self/status").read_text().splitlines() if Path("/proc/self/status").exists() else []:
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=500_000, help="keys to send in all (default 500,000)")
    ap.add_argument("--seed", type=int, default=1, help="the first base seed (default 1)")
    ap.add_argument("--md", help="write the summary into this RESULTS.md's notes")
    args = ap.parse_args(argv)
    md = Path(args.md).resolve() if args.md else None  # before the chdir below

    tmp = Path(tempfile.mkdtemp(prefix="gpt2viz-soak-"))
    os.environ["XDG_STATE_HOME"] = str(tmp / "state")
    os.chdir(tmp)  # the palette's screenshots land here
    errors_log = tmp / "state" / "gpt2viz" / "errors.log"

    import gpt2viz
    from checkpoints import write_checkpoint
    from gpt2viz.i18n import set_language
    from monkey import KEYS_PER_RUN, OPENERS, RUN_SIZES, MonkeyFailure, case_seed, monkey_run

    two_blocks = str(tmp / "two-blocks")
    write_checkpoint(Path(two_blocks), "tiny")  # tests/checkpoints.py: 2 blocks, 4 heads, random weights
    models = {"tiny": (gpt2viz.load_model("tiny"), "tiny"), "test-2-block": (gpt2viz.load_model(two_blocks), two_blocks)}

    started, cpu0 = time.time(), time.process_time()
    sent = runs = 0
    failures: list[str] = []
    base = args.seed
    while sent < args.keys:
        for model, (lm, checkpoint) in models.items():
            for language in ("en", "zh"):
                for index, target in enumerate(OPENERS):
                    if sent >= args.keys:
                        break
                    size = RUN_SIZES[(index + runs) % len(RUN_SIZES)]
                    seed = case_seed(base, target, language, model)
                    set_language(language)
                    try:
                        sent += asyncio.run(monkey_run(lm, checkpoint, target, seed, KEYS_PER_RUN, size, errors_log))
                    except MonkeyFailure as failure:
                        failures.append(f"{model} {language}: {failure}")
                        print(f"FAIL {model} {language}: {failure}", flush=True)
                        if errors_log.exists():
                            print(errors_log.read_text()[-4000:], flush=True)
                            errors_log.unlink()
                        sent += KEYS_PER_RUN
                    finally:
                        set_language("en")
                    runs += 1
        base += 1
        print(
            f"{sent:,} keys, {runs} runs, {len(failures)} failures, {time.time() - started:,.0f} s "
            f"({threading.active_count()} threads, {resident_mb()} MB resident)",
            flush=True,
        )

    wall, cpu = time.time() - started, time.process_time() - cpu0
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        SECTION,
        "",
        f"`python benchmarks/monkey_soak.py --keys {args.keys} --seed {args.seed}` on {stamp}: "
        f"**{sent:,} keys in {runs} runs, {len(failures)} failures** ({wall / 60:,.0f} min, {cpu / 60:,.0f} CPU-min of "
        f"this process, {sent / wall:,.0f} keys/s). {this_cpu().model}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}.",
        "",
        f"Each run: one of the {len(OPENERS)} screens ({', '.join(OPENERS)}) opened first, then {KEYS_PER_RUN} keys of a "
        "new seed (single keys, keys held 5-30 times, bursts, typing, pastes of ASCII, Chinese and control "
        "characters, resizes down to 40x12), in English and Chinese, on the bundled model and on a 2-block "
        "random checkpoint; then q (or ctrl+c) must end the app with status 0. A failure is any exception, "
        "any errors.log line, a screen stack without the app's screens, or an app that does not quit.",
        "",
    ]
    lines += [f"- {failure.splitlines()[0]}" for failure in failures]
    summary = "\n".join(lines).rstrip() + "\n"
    print(summary)
    if md is not None:
        path = md
        text = path.read_text(encoding="utf-8")
        pattern = re.compile(re.escape(SECTION) + r".*?(?=\n## |\Z)", re.S)
        text = pattern.sub(summary.rstrip(), text) if SECTION in text else text.rstrip() + "\n\n" + summary
        path.write_text(text, encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
