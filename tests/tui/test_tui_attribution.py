"""Which parts wrote the answer (`w`): direct logit attribution and activation patching on the
bundled tiny model, what the screen shows against the core functions, refusals, Chinese, snapshots.

The bundled tiny model is fixed on disk, so its numbers (and the snapshots) are the same on every
machine; nothing on these screens is a timing.
"""

from __future__ import annotations

import re
import threading

import pytest
from textual.widgets import Input, Static

import gpt2viz
import gpt2viz.patching
from gpt2viz.tui import attribution_narration
from gpt2viz.attribution import direct_logit_attribution
from gpt2viz.patching import patch_residual_stream
from gpt2viz.trace import load
from gpt2viz.tui.app import make_app
from gpt2viz.tui.attribution_narration import default_corruption, grid_columns, grid_values, precise
from gpt2viz.tui.formatting import num
from gpt2viz.tui.screens.attribution import AttributionScreen
from gpt2viz.tui.screens.generation import GenerationScreen
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.widgets.contribution_grid import ContributionGrid, GridData
from gpt2viz.tui.widgets.heatmap import Heatmap, HeatmapData
from gpt2viz.tui.widgets.strip_widget import Prose, StripWidget
from gpt2viz.tui.widgets.laid import Laid
from tui_helpers import TINY_TRACE, run_async, screen_text
from zh_words import english_words, run_words

CLEAN = "The meaning of life is"  # the default prompt
CORRUPTED = "The meaning of love is"  # one word changed: the tiny model answers ',' instead of ' not'
SIZES = [(80, 24), (120, 40)]


@pytest.fixture(scope="module")
def bundled():
    """The bundled tiny model: fixed weights, the same numbers everywhere."""
    return gpt2viz.load_model("tiny")


async def wait_for(pilot, condition, tries: int = 1200) -> None:
    for _ in range(tries):
        await pilot.pause(0.05)
        if condition():
            return
    raise AssertionError("the app never got there")


async def open_attribution(pilot) -> AttributionScreen:
    """From the step-through, `w`, until the model's own answer is attributed."""
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, StepScreen))
    await pilot.press("w")
    await wait_for(pilot, lambda: isinstance(app.screen, AttributionScreen) and app.screen.attributions[0] is not None)
    return app.screen


async def patch(pilot, screen: AttributionScreen, prompt: str) -> None:
    """Types `prompt` as the corrupted prompt on the patching tab and runs it to the end."""
    await pilot.press("2")
    await pilot.pause()
    screen.query_one(Input).value = prompt
    await pilot.press("enter")
    await wait_for(pilot, lambda: not screen.running)
    await pilot.pause()


def strip_text(widget: StripWidget, width: int) -> str:
    return "\n".join(strip.text for strip in widget.lines(width))


def tab_text(screen: AttributionScreen, tab: str, width: int = 80) -> str:
    """Everything a tab holds (also what is scrolled out of sight) and the status line."""
    parts = [str(screen.query_one("#attr-status-text", Static).render())]
    for widget in screen.query_one(f"#attr-{tab}").query("*"):
        if isinstance(widget, (Static, Laid)):
            parts.append(str(widget.render()))
        elif isinstance(widget, StripWidget):
            parts.append(strip_text(widget, width))
    return "\n".join(parts)


def flat(rows: list[list[float]]) -> list[float]:
    return [x for row in rows for x in row]


# -- direct logit attribution -----------------------------------------------------------------------


@run_async
async def test_w_attributes_the_answer_with_the_numbers_of_direct_logit_attribution(bundled):
    app = make_app(lm=bundled)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attribution(pilot)
        ids = bundled.encode_prompt(CLEAN)
        expected = direct_logit_attribution(bundled, ids)  # the model's top token
        assert screen.candidates[0].token_id == expected.token_id
        grid = screen.query_one(ContributionGrid).data
        assert flat(grid.values) == flat(grid_values(expected))
        assert grid.col_labels[-2:] == ["MLP", "bias"] and len(grid.values) == bundled.config.n_layer
        # The picture prints the terms, and the words check the sum against the logit.
        words = screen.query_one("#dla-words", Prose).text
        assert abs(expected.total - expected.logit) < 1e-3
        assert f"The terms add up to {precise(expected.total)}; the logit the model computed is {precise(expected.logit)}" in words
        assert "within 0.001" in words
        assert "4.27" in strip_text(screen.query_one(ContributionGrid), 116)  # block 0's MLP, the largest term
        assert "The largest terms: the MLP of block 0 (+4.27)" in words

        # t: the next of the top candidates, attributed in turn.
        await pilot.press("t")
        await wait_for(pilot, lambda: screen.attributions[1] is not None and screen.choice == 1)
        await pilot.pause()
        second = direct_logit_attribution(bundled, ids, screen.candidates[1].token_id)
        assert flat(screen.query_one(ContributionGrid).data.values) == flat(grid_values(second))
        assert f"(candidate 2 of {len(screen.candidates)})" in str(screen.query_one("#dla-title", Static).render())


@run_async
async def test_the_attribution_of_an_edited_pass_splits_that_pass_s_logit(bundled):
    """With a part switched off (what if), `w` splits the logit of the pass on show, the part's
    term 0, not the model's own pass under the edited pass's ranking (a learner walk saw +2.27 for
    a switched-off MLP)."""
    from gpt2viz.interventions import Ablation, applied

    app = make_app(lm=bundled)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen))
        app.session.switch_off(Ablation("mlp", 0))
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen) and app.screen.trace.interventions == ["L0.mlp"])
        screen = await open_attribution(pilot)
        ids = bundled.encode_prompt(CLEAN)
        with applied(bundled.hooks, [Ablation("mlp", 0)]):
            expected = direct_logit_attribution(bundled, ids, screen.candidates[0].token_id)
        own = direct_logit_attribution(bundled, ids, screen.candidates[0].token_id)
        assert expected.logit != own.logit
        shown = screen.attributions[0]
        assert shown.logit == expected.logit and flat(grid_values(shown)) == flat(grid_values(expected))
        assert grid_values(shown)[0][-2] == 0.0  # block 0's MLP: switched off
        # The words say so (they read "the logit the model computed" with nothing about the edit).
        assert screen.query_one("#dla-words", Prose).text.startswith(
            "This pass is edited: L0.mlp switched off (what-if). Every number on this screen is the edited pass's")


@run_async
async def test_w_opens_from_the_generation_view_too(bundled):
    app = make_app(lm=bundled)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen))
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, GenerationScreen) and not app.screen.running)
        generation = app.screen
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, AttributionScreen) and app.screen.attributions[0] is not None)
        assert app.screen.trace is generation.trace
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is generation)


@run_async
async def test_a_replay_says_in_one_line_that_this_needs_a_model():
    app = make_app(trace=load(TINY_TRACE))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen))
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, StepScreen)
        [note] = [n for n in app._notifications if "needs a model" in n.message]
        assert "\n" not in note.message and not note.title


# -- activation patching --------------------------------------------------------------------------


@run_async
async def test_patching_a_prompt_of_the_same_length_shows_the_restored_shares(bundled):
    app = make_app(lm=bundled)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attribution(pilot)
        await pilot.press("2")
        assert screen.query_one(Input).value == CORRUPTED  # the default: one word changed
        await patch(pilot, screen, CORRUPTED)
        expected = patch_residual_stream(bundled, bundled.encode_prompt(CLEAN), bundled.encode_prompt(CORRUPTED))
        assert screen.patch is not None and screen.patch.result == expected
        heatmap = screen.query_one(Heatmap)
        assert heatmap.data.values == expected.restored
        assert heatmap.data.col_labels == ["The", "␣meaning", "␣of", "␣life", "␣is"]
        assert "1.34" in strip_text(heatmap, 60)  # block 4 at ' life', the strongest cell
        words = screen.query_one("#patch-words", Prose).text
        assert "The clean prompt predicts '␣not', the corrupted one ','." in words
        assert f"is {num(expected.clean_diff)} in the clean run and {num(expected.corrupted_diff)} in the corrupted" in words
        assert "The strongest cell is block 4 at position 3 ('␣life'): 1.34." in words
        assert not screen.query_one("#attr-progress").display


@run_async
async def test_what_was_worked_out_is_there_again_after_escape(bundled):
    """A learner's walk: escape after a patching run, w again, and the result was gone (a minute of
    work on SmolLM2). Kept on the session for the same pass; a new pass starts afresh."""
    app = make_app(lm=bundled)
    jobs = []
    for name in ("attribute", "patch", "detect_heads"):
        job = getattr(app.session, name)
        setattr(app.session, name, lambda *args, _name=name, _job=job, **kwargs: jobs.append(_name) or _job(*args, **kwargs))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_attribution(pilot)
        await patch(pilot, screen, "The meaning of love is")
        await pilot.press("escape", "3")  # out of the box the run gave the focus back to, then the heads tab
        await wait_for(pilot, lambda: screen.head_scores is not None)
        screen.query_one(Input).value = "The meaning of work is"  # typed, not run
        shown = strip_text(screen.query_one(Heatmap), 76)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen))
        assert jobs == ["attribute", "patch", "detect_heads"]
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, AttributionScreen))
        again = app.screen
        assert again is not screen and again.patch is screen.patch and again.head_scores is screen.head_scores
        assert again.attributions == screen.attributions and again.query_one(Input).value == "The meaning of work is"
        await pilot.press("2")
        assert strip_text(again.query_one(Heatmap), 76) == shown and "1.34" in shown
        assert jobs == ["attribute", "patch", "detect_heads"]  # nothing ran again
        await pilot.press("escape", "escape")  # out of the box (2 puts the cursor there), then back
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen))
        app.session.attribution_kept.trace = load(TINY_TRACE)  # kept for another pass than the one on show
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, AttributionScreen) and app.screen.attributions[0] is not None)
        assert app.screen.patch is None and app.screen.query_one(Input).value == CORRUPTED
        assert jobs == ["attribute", "patch", "detect_heads", "attribute"]
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, StepScreen) and app.session.attribution_kept is not None)
        app.session.run()  # a new pass: what was kept for the one before, and its trace, are let go
        await wait_for(pilot, lambda: app.session.attribution_kept is None)


@run_async
async def test_a_long_prompt_s_patching_grid_names_its_positions_tokens_below_it():
    """At 80 x 24, 16 positions leave cells too narrow for their tokens: a line under the grid
    names each position's token (the walk found none past ~12 positions), and the position
    numbers stand over their cells' right edge, as the values do."""
    from textual.app import App

    tokens = ["ROM", "EO", ":", "␣What", "␣say", "␣you", "␣to", "␣my", "␣love", ",", "␣fair", "␣lady", "?", "␣I", "␣pray", "␣me"]
    values = [[((b * 7 + p * 3) % 11 - 5) / 5 for p in range(len(tokens))] for b in range(7)]
    app = App()
    async with app.run_test(size=(80, 24)):
        heatmap = Heatmap()
        await app.mount(heatmap)
        heatmap.show(HeatmapData(values=values, row_labels=[], col_labels=tokens, signed=True, scale=1.0, pool_rows=False))
        narrow = strip_text(heatmap, 76)
        heatmap.show(HeatmapData(values=[row[:5] for row in values], row_labels=[], col_labels=tokens[:5], signed=True,
                                 scale=1.0, pool_rows=False))
        wide = strip_text(heatmap, 76).splitlines()
    key = " ".join(narrow[narrow.index("Positions:"):].split())
    assert "0:'ROM' 1:'EO' 2:':' 3:'␣What'" in key and "15:'␣me'" in key
    assert "Positions:" not in "\n".join(wide)  # the tokens stand over their columns
    # Each position number ends where its column's token and value end.
    labels, axis, row = wide[0], wide[1], wide[2]
    for token, number in zip(tokens[:5], range(5)):
        end = labels.index(token) + len(token)
        assert axis[:end].endswith(str(number)) and row[end - 1] != " ", (token, axis, row)


@run_async
async def test_prompts_of_different_lengths_or_the_same_answer_are_refused(bundled):
    app = make_app(lm=bundled)
    runs = []
    session_patch = app.session.patch
    app.session.patch = lambda *args, **kwargs: runs.append(args) or session_patch(*args, **kwargs)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_attribution(pilot)
        await patch(pilot, screen, "The meaning of life is not")
        message = str(screen.query_one("#patch-message", Static).render())
        assert message == "The corrupted prompt has 6 tokens and the clean one 5 tokens: patching needs the same number of tokens."
        assert screen.patch is None and runs == []  # nothing ran
        screen.query_one(Input).value = "The meaning of death is"  # typed to the right length: the refusal goes
        await pilot.pause()
        assert screen.refusal is None and not screen.query_one("#patch-message", Static).display and runs == []
        await patch(pilot, screen, "The meaning of death is")  # the tiny model answers ' not' to both
        message = str(screen.query_one("#patch-message", Static).render())
        assert message.startswith("Both prompts make the model predict '␣not': there is no difference to restore.")
        assert screen.patch is None and screen.query_one(Input).has_focus  # typing goes into the box again
        await patch(pilot, screen, CORRUPTED)
        assert screen.patch is not None and not screen.query_one("#patch-message", Static).display


@run_async
async def test_after_a_run_typing_goes_into_the_box_and_a_refusal_clears_the_old_grid(bundled):
    """A learner's walk: after a run the status line still said to type in the box, but the box had
    lost the focus, so the keys typed acted on the screen (q would quit); a prompt then refused for
    its length left the last run's grid under the refusal, as if it were the new prompt's."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_attribution(pilot)
        await patch(pilot, screen, CORRUPTED)
        field = screen.query_one(Input)
        assert screen.patch is not None and field.has_focus
        await pilot.press("end", "z")
        assert field.value == CORRUPTED + "z" and isinstance(app.screen, AttributionScreen)
        status = lambda: str(screen.query_one("#attr-status-text", Static).render())  # noqa: E731
        assert status() == "Type a corrupted prompt in the box and press ⏎."
        await pilot.press("escape")  # out of the box: the line says what the keys do now
        assert not field.has_focus and status() == "r runs the corrupted prompt; 2 goes back to the box to change it."
        await pilot.press("2")
        assert field.has_focus
        field.value = "The meaning of life is not"
        await pilot.press("enter")
        await pilot.pause()
        assert screen.patch is None and screen.query_one(Heatmap).data is None
        assert "patching needs the same number of tokens" in str(screen.query_one("#patch-message", Static).render())


@run_async
async def test_space_stops_a_patching_run(bundled, monkeypatch):
    asked_to_stop = threading.Event()

    def endless(lm, clean, corrupted, rival=None, progress=None, cancelled=lambda: False):
        for done in range(10_000):
            if cancelled():
                asked_to_stop.set()
                return None
            progress(done, 10_000)
            threading.Event().wait(0.01)
        raise AssertionError("never told to stop")

    monkeypatch.setattr(gpt2viz.patching, "patch_residual_stream", endless)
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_attribution(pilot)
        await pilot.press("2")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.progress is not None)
        assert screen.check_action("stop", ()) and not screen.check_action("patch", ())
        assert "Patching:" in str(screen.query_one("#attr-status-text", Static).render())
        await pilot.press("space")
        await wait_for(pilot, lambda: not screen.running and asked_to_stop.is_set())
        assert screen.patch is None and screen.stopped
        assert "stopped before it finished" in str(screen.query_one("#attr-status-text", Static).render())


def test_the_default_corrupted_prompt_changes_one_word_and_keeps_the_length(bundled):
    encode = bundled.encode_prompt
    assert default_corruption(CLEAN, encode) == CORRUPTED
    assert default_corruption("The capital of France is", encode) == "The capital of Germany is"
    assert default_corruption("Hello there", encode) == ""  # nothing to swap: the user types one


# -- Chinese ----------------------------------------------------------------------------------------


# The same words and numbers again at 120 x 40: the slow tier.
@pytest.mark.parametrize("size", [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), marks=pytest.mark.slow, id="120x40")])
@run_async
async def test_in_chinese_nothing_is_english_and_the_numbers_are_the_same(bundled, size):
    app = make_app(lm=bundled)
    async with app.run_test(size=size) as pilot:
        screen = await open_attribution(pilot)
        await wait_for(pilot, lambda: all(a is not None for a in screen.attributions))
        await patch(pilot, screen, CORRUPTED)
        english = {tab: tab_text(screen, tab, size[0]) for tab in ("dla", "patch")}
        attributions, result = list(screen.attributions), screen.patch
        app.switch_language("zh")
        await pilot.pause()
        await pilot.pause()
        # Redrawn from what the screen holds: nothing ran again.
        assert screen.attributions == attributions and screen.patch is result and not screen.running
        allowed = run_words(screen.trace) | words_of(CORRUPTED) | {"mlp", "wte", "wpe", "c_proj"}
        for tab in ("dla", "patch"):
            chinese = tab_text(screen, tab, size[0])
            assert english_words(chinese, allowed) == [], tab
            assert numbers(chinese) == numbers(english[tab]), tab
        assert english_words(screen.help_text(), allowed) == []
        await pilot.press("escape", "1")  # out of the box the run gave the focus back to, then the first tab
        await pilot.pause()
        assert english_words(screen_text(app), allowed) == []


def words_of(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]+", text)}


def numbers(text: str) -> list[str]:
    return sorted(re.findall(r"\d+(?:[.,]\d+)*", text))


# -- how it looks -----------------------------------------------------------------------------------


def on_tab(tab: str):
    async def run_before(pilot) -> None:
        screen = await open_attribution(pilot)
        if tab == "patch":
            await patch(pilot, screen, CORRUPTED)
            # The box has the focus again: its cursor steady, not caught on or off by the blink's
            # timer (the 80 x 24 snapshot failed once in a busy suite over that one cell).
            screen.query_one(Input).cursor_blink = False
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        await pilot.wait_for_scheduled_animations()

    return run_before


@pytest.fixture
def digits_every_cpu_gives(monkeypatch):
    """The sum of the terms and the logit at the digits every CPU computes alike. Their 7th digits
    and their difference (about 1e-6) depend on the order the CPU's kernels add in: 4.845460 and
    4.845461 on an AMD EPYC, 4.845461 and 4.845459 on a Xeon with AMX. Tests above check them."""
    monkeypatch.setattr(attribution_narration, "precise", lambda x: f"{x:.4f}")
    monkeypatch.setattr(attribution_narration, "difference", lambda x: "<1e-05" if x < 1e-5 else f"{x:.1e}")


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
@pytest.mark.parametrize("tab", ["dla", "patch"])
def test_attribution_snapshots(snap_compare, bundled, digits_every_cpu_gives, tab, size):
    app = make_app(lm=bundled)
    assert snap_compare(app, terminal_size=size, run_before=on_tab(tab))


async def grid_lines(data: GridData, *widths: int) -> list[list[str]]:
    """The lines a ContributionGrid mounted in an app draws `data` in, at each of `widths`."""
    from textual.app import App

    app = App()
    async with app.run_test(size=(80, 24)):
        grid = ContributionGrid()
        await app.mount(grid)
        grid.show(data)
        return [strip_text(grid, width).splitlines() for width in widths]


@pytest.mark.parametrize("lang, bias", [("en", "bias"), ("zh", "偏置")])
@run_async
async def test_a_twelve_head_grid_keeps_two_significant_digits_and_whole_names(lang, bias):
    # GPT-2 small's 12 heads in the room the 80-column screen leaves: the cells count in
    # hundredths ('-24' for -0.243, said under the legend), the block-wide parts keep their names.
    from gpt2viz.i18n import set_language

    set_language(lang)
    try:
        values = [[(-1) ** (h + b) * (h + 1) / 50 for h in range(12)] + [0.5, -0.01] for b in range(12)]
        values[3][7] = -0.243
        data = GridData(values, [f"block {b}" for b in range(12)], grid_columns(12), rule_before=12, scale=0.5)
        narrow, wide = await grid_lines(data, 70, 200)
        wide = "\n".join(wide)
        assert narrow[0].split()[-2:] == ["MLP", bias]
        assert narrow[4].split()[2 + 7] == "-24" and narrow[4].split()[-2:] == ["50", "-1"]
        said = "In the cells: 50 means 0.50." if lang == "en" else "格中的数：50 表示 0.50。"
        assert said in narrow[-1]
        assert "-0.24" in wide and "In the cells" not in wide and "格中" not in wide
    finally:
        set_language("en")


@run_async
async def test_job_scores_far_below_the_colours_end_keep_two_digits():
    """A learner's walk: the bundled model's heads score 0.0069 and 0.0067 at a job whose best is
    0.5; at two decimals every cell read 0.00 or 0.01, and the induction and duplicate-token grids
    looked the same while the words compared the two numbers."""
    values = [[0.0069, 0.0067, 0.0012], [0.0, 0.0031, 0.0049]]
    data = GridData(values, ["block 0", "block 1"], ["0", "1", "2"], rule_before=3, scale=0.5)
    (lines,) = await grid_lines(data, 70)
    assert lines[1].split()[-3:] == ["69", "67", "12"] and lines[2].split()[-3:] == ["0", "31", "49"]
    assert "In the cells: 69 means 0.0069." in lines[-1]
    assert "-0.50" in "\n".join(lines)  # the colours still end at the job's best score
