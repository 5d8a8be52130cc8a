"""The palette's check against transformers (result in the header), and a hub download's bytes
on the loading screen."""

from __future__ import annotations

import gpt2viz
from gpt2viz.model.sources import DownloadProgress
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.loading import LoadingScreen
from gpt2viz.tui.screens.step import StepScreen
from tui_helpers import run_async, screen_text


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
            if app.verification is not None:
                break
        assert app.verification.ok and app.verification.max_abs_diff <= 1e-4
        await pilot.pause()
        assert "✓ = transformers" in screen_text(app).split("\n")[0]


@run_async
async def test_the_loading_screen_shows_the_bytes_of_a_download(tiny_trace):
    app = make_app(trace=tiny_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = LoadingScreen("org/model", "Hello", can_cancel=True)
        await app.push_screen(screen)
        await pilot.pause()
        screen.download(DownloadProgress("model.safetensors", 0, 13_000_000, 1_000_000, 15_000_000, 3))
        await pilot.pause()
        screen.download(DownloadProgress("model.safetensors", 2_000_000, 13_000_000, 3_000_000, 15_000_000, 3))
        await pilot.pause()
        text = screen_text(app)
        assert "model.safetensors: 3.0 of 15.0 MB" in text
        bar = screen.query_one("#download-progress")
        assert bar.display and bar.progress == 3_000_000 and bar.total == 15_000_000
