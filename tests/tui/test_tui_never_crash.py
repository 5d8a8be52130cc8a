"""Each crash a key-mash found, at its cause, as the shortest key sequence that showed it.

The keys of one act (joined by +) arrive with no pause between them, as a held key or fast typing
delivers them: the app handles the first while the others wait in its queue. Every test fails on
the code before the session and job service (and the screens' one lifecycle) came in.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

import gpt2viz
from gpt2viz.trace import load
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.generation import GenerationScreen
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import index_of
from monkey import replay, until_ended
from tui_helpers import GENERATION_TRACE, run_async, started
from helpers import state_home


@pytest.fixture(scope="module")
def bundled():
    return gpt2viz.load_model("tiny")


@pytest.fixture
def errors_log(tmp_path, monkeypatch) -> Path:
    """Where an unexpected error's traceback would go: the tests fail if anything lands there."""
    monkeypatch.setenv("XDG_STATE_HOME", str(state_home(tmp_path / "state")))
    return tmp_path / "state" / "gpt2viz" / "errors.log"




@pytest.mark.parametrize(
    "keys, shown",
    [
        ("ctrl+p+pageup", "Palette"),
        ("ctrl+p+pagedown", "Palette"),
        ("ctrl+p settle z+z up+pageup", "Palette"),
        ("right_square_bracket settle x+pageup", "InterventionMenu"),
        ("right_square_bracket settle x+pagedown", "InterventionMenu"),
    ],
)
@run_async
async def test_paging_a_list_before_it_has_lines(bundled, errors_log, keys, shown):
    """KeyError: 0 in OptionList._move_page: a list (the palette's, the what-if menu's) has no
    lines until it is laid out."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, keys, errors_log)
        assert type(app.screen).__name__ == shown


@run_async
async def test_the_palette_closed_before_its_search_ran(bundled, errors_log):
    """NoMatches for CommandList: the palette's search worker started after it had closed."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, "ctrl+p+escape ctrl+p+a+escape ctrl+p+escape+escape settle", errors_log)
        assert isinstance(app.screen, StepScreen)


@pytest.mark.parametrize("keys", ["ctrl+p settle escape+ctrl+p settle", "ctrl+p settle enter+ctrl+p settle"])
@run_async
async def test_the_palette_reopened_as_the_last_one_is_removed(bundled, errors_log, keys):
    """DuplicateIds '--command-palette' (the soak, seed 1679893737): a palette closed a moment
    ago is still registered under Textual's fixed id while ctrl+p opens the next."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, keys, errors_log)


@run_async
async def test_a_step_screen_told_to_move_before_it_has_composed(bundled, errors_log):
    """NoMatches '#stage-title' on StageView (the fast tier on a busy machine): the step screen
    was pushed and at once told to go to a stage, switch a head, take a new trace or a language,
    before it had composed what it draws into. It keeps what it was told and draws it on mount."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        trace = app.screen.trace
        fresh = StepScreen(app.session, trace)
        app.push_screen(fresh)
        fresh.go_to(5)
        fresh.set_head(1)
        fresh.load_trace(trace)
        fresh.redraw_language()
        fresh.verified()
        await started(app, pilot)
        assert app.screen is fresh and fresh.index == 5 and fresh.head == 1
        assert fresh.stages[5].title in fresh.query_one("#stage-title").plain


@pytest.mark.parametrize("menu", ["right_square_bracket settle x", "e", "ctrl+p settle t+o+k+e+n+i+z+e settle"])
@run_async
async def test_enter_twice_in_a_menu_closes_it_once(bundled, errors_log, menu):
    """InvalidStateError, then ScreenStackError: a second Enter dismissed the menu (the what-if
    menu, the prompt editor, the command palette, which dismisses itself) again, popping the
    screens under it."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, f"{menu} settle enter×3", errors_log)
        await started(app, pilot)
        assert [type(s).__name__ for s in app.screen_stack[1:]] == ["StepScreen"]


@run_async
async def test_escape_held_over_every_screen_leaves_the_step_through(bundled, errors_log):
    """ScreenStackError: Escape held on a screen opened over another popped screens that were
    already gone; the step-through of the prompt stays."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        for opener in ("g", "g settle s", "m", "w", "o", "question_mark", "ctrl+p", "e", "g settle enter", "g+enter+enter"):
            await replay(app, pilot, f"{opener} escape×12 settle", errors_log)
            await started(app, pilot)
            assert [type(s).__name__ for s in app.screen_stack[1:]] == ["StepScreen"], opener


@pytest.mark.parametrize(
    "keys",
    [
        "q+w",  # the soak's run seed 6062323097 (zh, 120x40): 'hqw8w' typed on the step-through
        "w+q",
        "q+L",
        "g settle q+s",
        "ctrl+p settle q+u+i+t settle enter+w+L",  # the palette's Quit
        "q+right+right+right+right+right+right",
        "m+q+1+2",
    ],
)
@run_async
async def test_keys_typed_after_q(bundled, errors_log, keys):
    """NoMatches 'TabbedContent' on AttributionScreen, from its on_mount: keys typed after q still
    reach the app before its exit takes effect, and a screen they open (w: attribution) is given no
    widgets in an app that exits. Once the app is leaving, queued keys do nothing and a screen
    opened just before neither composes nor mounts; the app ends with status 0."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        monkey = await replay(app, pilot, keys, errors_log)
        await until_ended(app)
        monkey.check()
        assert app.return_code == 0


@pytest.mark.parametrize("form", ["settings", "what-if"])
@run_async
async def test_a_result_given_as_the_app_leaves_goes_to_nobody(bundled, errors_log, form):
    """NoMatches 'TopBar' on GenerationScreen, from its settings' result (the soak's run seed
    9517906787, zh, 80x24: enter in the settings form, then q): the result reached the generation
    screen while the app shut down, its widgets removed. Once the app is leaving, a closed
    screen's result starts nothing (rule 8): here the form is dismissed just after q."""
    from gpt2viz.interventions import Ablation
    from gpt2viz.tui.screens.generation_settings import SettingsScreen
    from gpt2viz.tui.screens.interventions import InterventionMenu

    app = make_app(lm=bundled)
    started_runs = []
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        if form == "settings":
            await pilot.press("g")
            await started(app, pilot, GenerationScreen)
            owner = app.screen
            owner.start = started_runs.append  # what the settings' result would start
            await pilot.press("s")
            await started(app, pilot, SettingsScreen)
            result = owner.settings
        else:
            owner = app.screen
            owner.go_to(index_of(owner.stages, "mlp", 0))
            await pilot.press("x")
            await started(app, pilot, InterventionMenu)
            app.session.switch_off = started_runs.append
            result = Ablation("mlp", 0)
        app.action_quit()
        app.screen.dismiss(result)
        await until_ended(app)
        monkey = await replay(app, pilot, "", errors_log)
    monkey.check()
    assert started_runs == [] and app.return_code == 0


@run_async
async def test_progress_after_the_loading_screen_was_left_goes_to_nobody(bundled, errors_log):
    """NoMatches 'ProgressBar' on LoadingScreen (the tmux key-mash, prompt editor, en, 120x40):
    escape left the loading screen of a new prompt's run, and the run's next progress report
    reached it while Textual was removing its widgets. A closing loading screen is given nothing."""
    from types import SimpleNamespace

    from gpt2viz.tui.screens.loading import LoadingScreen
    from gpt2viz.tui.session import DownloadProgressed, RunProgressed, RunStarted

    app = make_app(lm=bundled)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        app._session_event(RunStarted("tiny", "ROMEO:", can_cancel=True))  # as a new prompt's run does
        await pilot.pause()
        loading = app.screen
        assert isinstance(loading, LoadingScreen)
        drawn = []
        loading.progress = lambda *args: drawn.append(args)
        loading.download = lambda *args: drawn.append(args)
        await pilot.press("escape")  # back to the last trace: the run is dropped
        app._session_event(RunProgressed(2, 3, "Running the forward pass"))
        app._session_event(DownloadProgressed(SimpleNamespace(file="model.safetensors", done=8, total=8)))
        assert drawn == []
        await pilot.pause()
        monkey = await replay(app, pilot, "", errors_log)
        monkey.check()


@pytest.mark.parametrize("opener", ["action_attribution", "action_cost_lab", "action_show_map", "action_generate"])
@run_async
async def test_a_screen_opened_as_the_app_leaves(bundled, errors_log, opener):
    """The same NoMatches from another side: a screen pushed in the moment the app exits (a key
    handled just before q, a run's result) is composed after the exit, when Textual mounts none of
    its widgets; its Mount must not look for them."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        getattr(app.screen, opener)()
        app.action_quit()
        await until_ended(app)
        monkey = await replay(app, pilot, "", errors_log)
        monkey.check()
        assert app.return_code == 0


# Twice fast; the slow tier repeats it more, as a soak of the race.
@pytest.mark.parametrize("rounds", [2, pytest.param(8, marks=pytest.mark.slow)])
@run_async
async def test_a_step_opened_and_closed_before_it_is_drawn(errors_log, rounds):
    """NoMatches '#stage-count' on StageView, NoMatches 'TopBar' on GenerationScreen: a callback
    the screen had left for after the next refresh ran once the screen was gone."""
    app = make_app(trace=load(GENERATION_TRACE))
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, "g settle", errors_log)
        assert isinstance(app.screen, GenerationScreen)
        for _ in range(rounds):
            await replay(app, pilot, "left×12 enter+escape enter+pagedown+escape enter+j+j+escape+escape+g", errors_log)
            await started(app, pilot, GenerationScreen)


@run_async
async def test_a_result_after_its_screen_closed_is_dropped(bundled, errors_log):
    """A generation step's forward pass that arrives after its view closed, or after a cancel,
    opens nothing: the job's result reaches only an owner still attached."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, "g", errors_log)
        await started(app, pilot, GenerationScreen)
        await replay(app, pilot, "left×3 enter+escape settle", errors_log)
        await started(app, pilot)
        assert [type(s).__name__ for s in app.screen_stack[1:]] == ["StepScreen"]
        # A re-run cancelled before its result: the step-through keeps the pass it had.
        before = app.screen.trace
        await replay(app, pilot, "right_square_bracket settle x settle enter+escape", errors_log)
        await started(app, pilot)
        assert app.screen.trace is before and not app.screen.trace.interventions


@pytest.mark.parametrize(
    "keys",
    [
        "g settle resize:100x30+escape",  # the generation view drew again after a resize: TopBar
        "g settle left×12 enter settle resize:90x30+escape",  # a step's pass: #stage-count
        "question_mark settle resize:100x30+escape",  # the help laid out its keys again
        "g settle s settle resize:100x30+escape",  # the settings form laid out its keys again
        "o settle resize:100x30+escape",  # the map drew itself again
    ],
)
@run_async
async def test_a_resize_as_a_screen_closes(errors_log, keys):
    """NoMatches on a screen that is gone: a screen drew itself again after a resize, in a callback
    for after the next refresh, which ran once it had closed."""
    app = make_app(trace=load(GENERATION_TRACE))
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, keys, errors_log)
        await replay(app, pilot, "escape settle escape settle", errors_log)
        assert isinstance(app.screen, StepScreen)


@run_async
async def test_the_palette_searches_only_while_it_is_open(bundled, errors_log):
    """NoMatches for CommandList (as WorkerFailed): a search asked for by a key typed just before
    the palette closed started once its list was gone."""
    app = make_app(lm=bundled)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, "ctrl+p settle", errors_log)
        palette = app.screen
        assert type(palette).__name__ == "Palette"
        await replay(app, pilot, "escape", errors_log)
        palette._gather_commands("block")  # what the palette's Input.Changed handler does
        await replay(app, pilot, "settle settle", errors_log)
        assert isinstance(app.screen, StepScreen)


TOAST_AT_ITS_END = r"""
import asyncio, sys
from textual.notifications import Notification
# The race: a toast drawn again as its notification expires sees 'not expired', then a time left
# just under zero, and times itself with it.
Notification.has_expired = property(lambda self: False)
Notification.time_left = property(lambda self: -7.4e-06)
sys.path.insert(0, sys.argv[1])
from tui_helpers import TINY_TRACE
from gpt2viz.trace import load
from gpt2viz.tui.app import make_app

async def main():
    app = make_app(trace=load(TINY_TRACE))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.pause()
        app.notify("a notification at the end of its time")
        for _ in range(5):
            await pilot.press("o", "escape")
        await pilot.press("q")
    print("answered", app.return_code)

asyncio.run(main())
"""


def test_a_toast_drawn_as_it_expires_does_not_freeze_the_app():
    """The UI froze at 100% CPU, deaf to q and ctrl+c (seen in tmux after ~100 step screens): a
    notification's toast, drawn again in the microseconds after it expired, set a timer of a
    negative interval, and Textual's timer loop spins forever on one."""
    import subprocess
    import sys

    here = str(Path(__file__).parent)
    done = subprocess.run([sys.executable, "-c", TOAST_AT_ITS_END, here], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "answered 0" in done.stdout, done.stderr[-2000:]


@run_async
async def test_the_batch_plot_squeezed_by_a_small_terminal(errors_log):
    """ValueError: math domain error (seen in tmux): plotext's log scale failed on the batch plot
    squeezed to 20x8 cells, as a terminal went down to 40x12 (below the minimum size)."""
    from tui_helpers import TINY_TRACE

    lab = load(TINY_TRACE.with_name("tiny-lab-trace.json"))
    assert lab.cost_lab["batch"]["rows"]
    app = make_app(trace=lab)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, "m settle 2 settle resize:40x12 settle resize:60x20 settle resize:120x40 settle", errors_log)
        assert type(app.screen).__name__ == "CostLabScreen"


@pytest.mark.parametrize("after", ["escape", "q"])
@run_async
async def test_a_palette_command_for_a_screen_that_has_left(bundled, errors_log, after):
    """NoMatches '#sampling' on SettingsScreen (the soak, seed 10332832719, en, 120x40): the
    palette runs its chosen command a moment after it closes (Textual's call_later); keys typed
    just before had closed the settings form (escape), or quit the app (q), and its 'generate'
    ran on a form whose fields were gone. A command or action for a screen that has left does
    nothing. The race is set up in its order: the command is queued after the form has left."""
    from gpt2viz.tui.commands import KeyCommands
    from gpt2viz.tui.screens.generation_settings import SettingsScreen

    app = make_app(lm=bundled)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        await replay(app, pilot, "g settle", errors_log)
        await started(app, pilot, GenerationScreen)
        generation = app.screen
        generation.start = lambda *args: pytest.fail("the closed form's settings started a run")
        await replay(app, pilot, "s settle tab settle", errors_log)  # a switch focused: Enter is the form's
        settings = app.screen
        assert isinstance(settings, SettingsScreen)
        generate = next(e.command for e in KeyCommands(settings)._entries() if e.help.endswith("⏎"))
        await replay(app, pilot, after, errors_log)
        app.call_later(generate)
        if after == "q":
            await until_ended(app)
            await replay(app, pilot, "", errors_log)
            assert app.return_code == 0
        else:
            await replay(app, pilot, "settle", errors_log)
            assert app.screen is generation
            app.call_later(partial(app.run_action, "apply", settings))  # a key's action, late
            await replay(app, pilot, "settle", errors_log)


@run_async
async def test_a_key_held_down_leaves_one_notification_not_a_stack():
    """Holding '.' away from the attention stages stacked ten 'Head N of 8 will be shown'
    notifications over half the screen (a crash walk): each takes the last one's place; a
    message said again (a held 'a' before any block) shows once."""
    app = make_app(trace=load(GENERATION_TRACE.with_name("tiny-trace.json")))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await started(app, pilot)
        assert app.screen.stage.layer is None  # the model's files: no block, no attention
        await pilot.press(*["full_stop"] * 10)
        await pilot.pause()
        heads = [n for n in app._notifications if "will be shown at the attention stages" in n.message]
        assert len(heads) == 1 and heads[0].message.startswith(f"Head {10 % app.screen.n_head} of ")
        await pilot.press(*["a"] * 5)
        await pilot.pause()
        assert sum("All heads: go to a block first" in n.message for n in app._notifications) == 1
        for _ in range(7):  # asked for in one burst, before any is shown (keys piled up on a busy app)
            app.screen.action_next_head()
        await pilot.pause()
        assert sum("will be shown at the attention stages" in n.message for n in app._notifications) == 1
