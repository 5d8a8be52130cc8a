"""Makes the README's pictures: SVG screenshots of the main stages, taken from the real app.

    python tools/screenshots.py                       # the bundled tiny model
    python tools/screenshots.py --model gpt2 --prompt "The capital of France is"
    python tools/screenshots.py --replay trace.json   # from a saved trace

The app runs headless (App.run_test), steps to each stage as a user would, and saves what is on
screen to assets/screenshots/NN-name.svg. No timing appears on these screens.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpt2viz.cli import parse_args  # noqa: E402
from gpt2viz.options import DEFAULT_PROMPT  # noqa: E402
from gpt2viz.tui.app import make_app  # noqa: E402
from gpt2viz.tui.screens.lesson_menu import LessonMenu  # noqa: E402
from gpt2viz.tui.screens.step import StepScreen  # noqa: E402
from gpt2viz.tui.stages import index_of  # noqa: E402

# file name -> (stage kind, block or None, selected head)
SHOTS = {
    "01-tokenize": ("tokenize", None, 0),
    "02-embed": ("embed", None, 0),
    "03-attention-scores": ("scores", 0, 1),
    "04-attention-pattern": ("pattern", 0, 1),
    "05-all-heads": ("heads", 0, 1),
    "06-mlp": ("mlp", 0, 0),
    "07-residual": ("mlp_out", 0, 0),
    "08-logits": ("lm_head", None, 0),
    "09-logit-lens": ("logit_lens", None, 0),
    "10-next-token": ("next_token", None, 0),
}


async def take(app, out: Path, size: tuple[int, int]) -> list[Path]:
    written = []
    async with app.run_test(size=size) as pilot:
        for _ in range(600):
            await app.workers.wait_for_complete()
            await pilot.pause()
            if isinstance(app.screen, LessonMenu):  # offered at a first start: "not now" (escape),
                await pilot.press("escape")  # which leaves the user's choice of the menu as it was
            if isinstance(app.screen, StepScreen):
                break
        else:
            raise SystemExit(f"the app did not get past loading: {getattr(app, 'error', '')}")
        screen = app.screen
        for name, (kind, layer, head) in SHOTS.items():
            if layer is not None and layer >= screen.trace.n_layer:
                continue
            screen.head = head
            screen.go_to(index_of(screen.stages, kind, layer))
            await pilot.pause()
            written.append(Path(app.save_screenshot(f"{name}.svg", str(out))))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="model to run (default: the bundled tiny)")
    parser.add_argument("--replay", help="a saved trace to show instead of running a model")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument("--out", default=str(ROOT / "assets" / "screenshots"))
    parser.add_argument("--size", default="120x40", help="terminal size, WIDTHxHEIGHT (default 120x40)")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.replay:
        from gpt2viz.trace import load

        options = parse_args(["--replay", args.replay])
        app = make_app(trace=load(args.replay), options=options)
    else:
        app = make_app(options=parse_args([args.prompt, "--model", args.model]))
    for path in asyncio.run(take(app, out, (width, height))):
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
