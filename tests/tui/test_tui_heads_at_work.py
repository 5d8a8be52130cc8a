"""The attribution screen's third tab: every head scored at three jobs on a repeated random sequence
(gpt2viz.head_detector, as TransformerLens's head detector scores them) and this pass's attention
sink, with the detector's own numbers; on the bundled model, whose heads do none of the jobs, it
says so."""

from __future__ import annotations

import pytest
import torch
from tui_helpers import run_async, screen_text

from gpt2viz.head_detector import repeated_random_tokens, score_heads
from gpt2viz.tui.app import make_app
from gpt2viz.tui.attribution_narration import head_name, sink_shares
from gpt2viz.tui.formatting import num
from gpt2viz.tui.session import detector_tokens
from gpt2viz.tui.widgets.strip_widget import Prose

SIZE = (120, 40)


async def open_heads(app, pilot):
    """The attribution screen of `app`'s model on its heads tab, once the detector has run."""
    for _ in range(300):
        await pilot.pause()
        if hasattr(app.screen, "stages"):
            break
    await app.workers.wait_for_complete()
    await pilot.press("w")
    await pilot.pause()
    await pilot.press("3")
    for _ in range(600):
        await pilot.pause()
        if getattr(app.screen, "head_scores", None) is not None:
            break
    await pilot.pause()
    return app.screen


def expected_scores(lm):
    tokens = repeated_random_tokens(detector_tokens(lm.config.n_ctx), lm.config.vocab_size, seed=0, first=lm.eos_id)
    return score_heads(lm.model, tokens)


@run_async
async def test_the_heads_tab_says_what_the_detector_measured_on_a_llama_model(llama_lm):
    app = make_app(lm=llama_lm)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_heads(app, pilot)
        scores = expected_scores(llama_lm)
        for job in ("induction", "previous_token", "duplicate_token"):
            assert torch.allclose(screen.head_scores.scores[job], scores.scores[job], atol=1e-6)
        # What is on screen, and the tab's words whole (their end may be scrolled below).
        text = " ".join((screen_text(app) + " " + screen.query_one("#heads-words", Prose).text).split())
        assert "induction scores, block × head" in text
        layer, head, _score = scores.top("induction", 1)[0]
        assert f"{head_name(layer, head)} is head {head} of block {layer}." in text  # the names explained
        for job in ("induction", "previous token", "duplicate token"):
            found = scores.found(job.replace(" ", "_"))
            if found:
                layer, head, score = found[0]
                assert f"{job}: {head_name(layer, head)} {num(score, 2)}" in text
            else:
                layer, head, score = scores.top(job.replace(" ", "_"), 1)[0]
                assert f"{job}: no head does it here. The best, {head_name(layer, head)}, scores {num(score, 2)}" in text
        # The sink: the share of the last position's attention on position 0, from this pass.
        shares = sink_shares(screen.trace)
        most = max(s for row in shares for s in row)
        assert f"{100 * most:.1f}%" in text
        await pilot.press("j")
        await pilot.pause()
        assert "previous token scores" in " ".join(screen_text(app).split())


@pytest.fixture(scope="module")
def bundled():
    import gpt2viz

    return gpt2viz.load_model("tiny")


@run_async
async def test_on_the_bundled_model_the_detector_finds_no_induction_head(bundled):
    """tiny was trained for minutes on a little Shakespeare: its best induction head scores at chance."""
    app = make_app(lm=bundled)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_heads(app, pilot)
        assert screen.head_scores.found("induction") == []
        text = " ".join(screen_text(app).split())
        assert "induction: no head does it here." in text
        assert "duplicate token: no head does it here." in text
        # The grid's corner names its columns' numbers (at 80 x 24 the grid comes before the words).
        from gpt2viz.tui.widgets.contribution_grid import ContributionGrid

        grid = screen.query_one("#heads-grid", ContributionGrid)
        first = grid.render_line(0).text
        assert first.split()[:3] == ["head", "0", "1"], first


def test_the_heads_tab_and_a_llama_attribution_speak_chinese_with_the_english_numbers(llama_lm, llama_trace):
    import re
    from collections import Counter

    from zh_words import english_words, run_words

    from gpt2viz.attribution import direct_logit_attribution
    from gpt2viz.i18n import set_language
    from gpt2viz.tui.attribution_narration import (
        candidates,
        dla_text,
        heads_grid_title,
        heads_text,
        term_lines,
    )
    from gpt2viz.tui.facts import key_texts

    scores = expected_scores(llama_lm)
    first = candidates(llama_trace)[0]
    a = direct_logit_attribution(llama_lm, llama_trace.all_token_ids, first.token_id)

    def words() -> str:
        return "\n".join([
            heads_text(scores, llama_trace, key_texts(llama_trace), "j"), heads_grid_title("induction", scores),
            heads_grid_title("sink", scores), dla_text(a, first, 1, 5, "x", 5, "float32"), term_lines(a),
        ])

    english = words()
    set_language("zh")
    try:
        chinese = words()
    finally:
        set_language("en")
    assert english_words(chinese, run_words(llama_trace)) == []
    number = re.compile(r"-?\d+(?:[.,]\d+)*(?:e-?\d+)?%?")
    assert Counter(number.findall(chinese)) == Counter(number.findall(english))


@run_async
async def test_every_tab_scrolls_from_the_keyboard_at_80_columns(llama_lm):
    """At 80 x 24 a tab's grid and words run past the screen: the arrows, page keys and end reach
    the rest, whatever has the focus (a learner there saw a 30-block grid stop at block 15)."""
    app = make_app(lm=llama_lm)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_heads(app, pilot)
        pane = screen.query_one("#heads-pane")
        assert pane.max_scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert pane.scroll_y == pane.max_scroll_y
        await pilot.press("pageup")
        await pilot.pause()
        assert pane.scroll_y < pane.max_scroll_y
        await pilot.press("1")
        await pilot.pause()
        await pilot.press("down")
        await pilot.pause()
        assert screen.query_one("#dla-pane").scroll_y > 0


@run_async
async def test_the_detector_runs_once_however_the_tab_is_reached(llama_lm):
    """`3` both shows the tab and activates it: one job, and none again on coming back."""
    app = make_app(lm=llama_lm)
    calls = []
    detect = app.session.detect_heads
    app.session.detect_heads = lambda *args, **kwargs: calls.append(1) or detect(*args, **kwargs)
    async with app.run_test(size=SIZE) as pilot:
        await open_heads(app, pilot)
        for key in ("1", "3", "tab", "3"):
            await pilot.press(key)
            await pilot.pause()
        await app.workers.wait_for_complete()
        assert calls == [1]
