"""The guided lessons in the real app: every page of every lesson walked to its end in both
languages at 80 x 24 (the panel is no smaller at 120 x 40), each page's action performed with its
key and each guess typed (one wrong, then right), the screen at the stage the page names; started
by --lesson, on a replay and on a live model, and from the palette; resumed where it was left.
Snapshots of two pages. Update those after an intended change with `pytest tests/tui/test_tui_lessons.py --snapshot-update`."""

from __future__ import annotations

import pytest
from rich.cells import cell_len
from tui_helpers import GENERATION_TRACE, TINY_TRACE, run_async, screen_text, stage_text, started

from gpt2viz.i18n import say, set_language
from gpt2viz.lessons import LESSON_IDS, SCREENS, load_lesson
from gpt2viz.options import RunOptions
from gpt2viz.trace import load
from gpt2viz.tui.app import make_app
from gpt2viz.tui.formatting import num
from gpt2viz.tui.lesson_facts import lesson_answers, lesson_facts, page_text
from gpt2viz.tui.widgets.lesson_panel import LessonPanel, _number
from helpers import state_home

SIZES = [(80, 24), (120, 40)]


@pytest.fixture(autouse=True)
def own_state(tmp_path, monkeypatch):
    """Each test keeps its lesson progress apart (and never in the user's state directory)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(state_home(tmp_path / "state")))


def lesson_text(app) -> str:
    """The page's text as written (the panel lays it out for its width: tests/tui also checks that)."""
    return app.screen.query_one("#lesson-text").text


async def type_guess(pilot, value: float) -> None:
    await pilot.press(*f"{value:.6g}", "enter")
    await pilot.pause()


async def walk(app, pilot, lesson_id: str, trace) -> None:
    """Every page from the first, at the app's size: at its stage, its text whole and on screen,
    its action done with its key, its guesses made."""
    lesson = load_lesson(lesson_id)
    run, screen = app.session.lesson, app.screen
    facts, answers = lesson_facts(trace), lesson_answers(trace)
    assert app.screen.query_one(LessonPanel).display
    for number, page in enumerate(lesson.pages):
        assert run.page == number
        index, head = run.target(trace)
        assert (screen.index, screen.head) == (index, head), (lesson_id, number)
        assert say(page_text(page.text, facts), **facts) in lesson_text(app)
        here = (app.size.width, app.size.height)
        fits(app, here)  # nothing of the page is cut off
        if page.until_off and not app.session.live:  # a replay switches nothing off: says so, n goes on
            assert say("lesson.unavailable.what_if") in lesson_text(app) and say(page.do, **facts) not in lesson_text(app)
        elif page.until is not None or page.until_head is not None or page.until_off:
            assert say(page.do, **facts) in lesson_text(app) and number not in run.done
            await pilot.press(page.press)
            if page.until_off:  # the what-if's menu: its first part, then the pass runs again
                await until(pilot, lambda: type(app.screen).__name__ == "InterventionMenu")
                await pilot.press("enter")
                await until(pilot, lambda: app.screen is screen and number in run.done and app.session.jobs.idle)
            await pilot.pause()
            assert number in run.done and say("lesson.done") in lesson_text(app), (lesson_id, number)
        waits = page.predict is not None and page.predict.answer not in answers  # for the cost lab
        if waits:  # guessed first (the field has the keys), kept until the lab measures it
            await type_guess(pilot, 3)
            assert run.guesses[number].answer is None and number in run.done
            key = "lesson.guess.pending" if app.session.live else "lesson.guess.pending_replay"
            assert say(key, guess="3") in lesson_text(app), (lesson_id, number)
        if page.until_screen is not None:  # open the screen the page asks for, then come back
            # (a replay cannot measure: a page that waits for the lab does not send the learner there)
            assert (say(page.do, **facts) in lesson_text(app)) != (waits and not app.session.live), (lesson_id, number)
            assert waits or number not in run.done
            await pilot.press(page.press)
            await until(pilot, lambda: type(app.screen).__name__ == SCREENS[page.until_screen])
            assert number in run.done, (lesson_id, number)
            # That screen says which page sent the learner there and what to look at.
            note = app.screen.query_one("#lesson-note")
            assert note.display == (page.look is not None), (lesson_id, number)
            if page.look is not None:
                assert say(page.look, **facts) in str(note.render()), (lesson_id, number)
                assert note.region.height >= 1 and note.region.bottom <= app.size.height - 1, (lesson_id, number)
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is screen)
            assert (say("lesson.done") in lesson_text(app)) == (page.predict is None), (lesson_id, number)
        if page.predict is not None and not waits:
            answer, unit = answers[page.predict.answer], page.predict.unit
            await type_guess(pilot, answer * 10)  # wrong: ten times too big
            made = run.guesses[number]
            assert not made.close(page.predict) and made.answer == answer
            assert say("lesson.guess.below", guess=_number(made.value, unit), answer=_number(answer, unit),
                       ratio=num(made.value / answer, 2)) in lesson_text(app)
            assert say(page.predict.why, **facts) in lesson_text(app)
            assert app.screen.query_one("#lesson-guess").has_focus  # another try
            await type_guess(pilot, answer * 1.02)  # right: within the tolerance
            made = run.guesses[number]
            assert made.close(page.predict) and not app.screen.query_one("#lesson-guess").has_focus
            assert say("lesson.guess.close", guess=_number(made.value, unit), answer=_number(answer, unit),
                       tolerance=f"{page.predict.tolerance:.0%}") in lesson_text(app)
            fits(app, here)  # the verdict and its reasons fit too
        # The sizes a page states are those the stage it shows states.
        template = say(page_text(page.text, facts), **{name: "{" + name + "}" for name in facts})
        for name in ("n_params", "T", "n_layer", "vocab"):
            if "{" + name + "}" in template and page.show in ("model_files", "tokenize"):
                assert facts[name] in stage_text(app), (lesson_id, number, name)
        await pilot.press("n")
        await pilot.pause()
    assert run.page == len(lesson.pages) - 1 and say("lesson.finished") in lesson_text(app)


async def until(pilot, condition) -> None:
    for _ in range(400):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"still on {type(pilot.app.screen).__name__}")


def fits(app, size) -> None:
    """The lesson's text is drawn whole (as many rows as it wraps to at its width), and the guess
    field where there is one, above the footer."""
    text = app.screen.query_one("#lesson-text")
    width = text.content_region.width
    assert text.content_region.height >= text.get_content_height(text.size, app.size, width) > 0, size
    assert text.region.bottom <= size[1] - 1, (size, text.region, app.session.lesson.lesson.id, app.session.lesson.page)
    field = app.screen.query_one("#lesson-guess")
    if field.display and app.screen.query_one(LessonPanel).has_class("-guessing"):
        assert field.region.height >= 1 and field.region.bottom <= size[1] - 1, (size, field.region, app.session.lesson.lesson.id, app.session.lesson.page)


# Every page of every lesson: the slow tier, which CI runs too (the whole corpus, as for the fuzz
# cases). The fast tier keeps tests/test_lessons.py's check of every file and template, the
# snapshots, the guesses, and the live pages (the batch guess, the switch-off). Pages are checked at
# 80 x 24 (9-11 s a language; a resize a page to check 120 x 40 too doubled that), where the page
# has the fewest cells: a text that fits there fits the larger panel of 120 x 40
# (test_the_lesson_panel_is_no_smaller_at_120_x_40).
@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "zh"])
@run_async
async def test_every_lesson_walks_to_its_end_on_a_replay(language):
    set_language(language)
    trace = load(GENERATION_TRACE)  # with a generation: a page can send the learner to its view
    for lesson_id in LESSON_IDS:
        app = make_app(trace=trace, options=RunOptions(lesson=lesson_id))
        async with app.run_test(size=SIZES[0]) as pilot:
            await started(app, pilot)
            await walk(app, pilot, lesson_id, trace)
            assert say("lesson.replay_note") in lesson_text(app)


@run_async
async def test_a_lesson_on_the_live_model_from_the_palette_and_resumed(tiny_lm):
    app = make_app(lm=tiny_lm, options=RunOptions(prompt="ROMEO: What say you", model="tiny"))
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        assert not app.screen.query_one(LessonPanel).display and app.session.lesson is None
        await pilot.press("n")  # no lesson: n is nobody's key here
        app.start_lesson("000")
        await pilot.pause()
        assert app.screen.query_one(LessonPanel).display
        facts = lesson_facts(app.session.trace)
        assert say("lesson.replay_note") not in lesson_text(app)
        # The model files page and the stage it shows state the same parameter count.
        await pilot.press("n")
        await pilot.pause()
        assert facts["n_params"] in lesson_text(app) and facts["n_params"] in stage_text(app)
        await pilot.press("n")
        await pilot.pause()
        page = app.session.lesson.page
    again = make_app(lm=tiny_lm, options=RunOptions(prompt="ROMEO: What say you", model="tiny", lesson="000"))
    async with again.run_test(size=(80, 24)) as pilot:
        await started(again, pilot)
        assert again.session.lesson.page == page and again.session.lesson.resumed
        index, _head = again.session.lesson.target(again.session.trace)
        assert again.screen.index == index


@run_async
async def test_a_guess_that_is_no_number_is_asked_again():
    trace = load(TINY_TRACE)
    app = make_app(trace=trace, options=RunOptions(lesson="000"))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await started(app, pilot)
        lesson = app.session.lesson
        while lesson.current.predict is None:
            await pilot.press("n")
        await pilot.press(*"1.2.3", "enter")
        await pilot.pause()
        assert lesson.page not in lesson.guesses
        assert any(say("lesson.guess.unreadable") in str(n.message) for n in app._notifications)
        assert app.screen.query_one("#lesson-guess").has_focus


@run_async
async def test_escape_leaves_a_guess_and_the_stage_keys_stay_the_screen_s():
    """Leaving the guess field with escape gives the step-through its keys back until the next page
    (a stage drawn again does not take the focus back to the field)."""
    app = make_app(trace=load(TINY_TRACE), options=RunOptions(lesson="000"))
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        lesson = app.session.lesson
        while lesson.current.predict is None:
            await pilot.press("n")
        step = app.screen
        field = step.query_one("#lesson-guess")
        assert field.has_focus
        await pilot.press("escape")
        # The footer keeps q at 80 columns (the panel names n and p; a walk found "? he" cut there).
        assert screen_text(app).splitlines()[-1].split("▏")[0].rstrip().endswith("q quit")
        start = app.screen.index
        await pilot.press("right", "right")
        assert app.screen.index == start + 2 and not field.has_focus
        await pilot.press("p", "n")  # the page opened again asks again
        assert field.has_focus
        # Answered, or left with escape, the field stays left when the screen comes back from the
        # palette, the help or the model map (Textual would focus its first focusable widget).
        await type_guess(pilot, lesson_answers(app.session.trace)[lesson.current.predict.answer])
        assert not field.has_focus
        for opens, leaves in ((["ctrl+p"], ["escape"]), (["question_mark"], ["escape"]), (["o"], ["escape"])):
            await pilot.press(*opens)
            await pilot.pause()
            assert app.screen is not step, opens
            await pilot.press(*leaves)
            assert app.screen is step and not field.has_focus, opens
            start = step.index
            await pilot.press("right")
            assert step.index == start + 1 and field.value == "", opens


@pytest.mark.parametrize("language, exact", [("en", "You guessed 151,984; this run gives exactly that."),
                                             ("zh", "你猜的是 151,984；本次运行得到的正是这个数。")])
def test_a_guess_of_the_very_number_is_called_exact(language, exact):
    """A guess equal to the answer as the screens write it is exact, not "close: within 10 %"."""
    from gpt2viz.lessons import Prediction
    from gpt2viz.tui.lesson_run import Guess

    set_language(language)
    prediction = Prediction("q", "block_params", 0.1, "why")
    assert LessonPanel._verdict(Guess(151984, 151984.0), prediction, {}) == exact
    assert LessonPanel._verdict(Guess(151000, 151984.0), prediction, {}) == say(
        "lesson.guess.close", guess="151,000", answer="151,984", tolerance="10%")


@run_async
async def test_the_guess_field_s_own_key_speaks_chinese():
    """A text field's escape shows in the footer while it has focus: in the language on show (the
    shared FieldInput translates its keys when it takes the focus)."""
    set_language("zh")
    app = make_app(trace=load(TINY_TRACE), options=RunOptions(lesson="000"))
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        while app.session.lesson.current.predict is None:
            await pilot.press("n")
        assert app.screen.query_one("#lesson-guess").has_focus
        assert app.screen.active_bindings["escape"].binding.description == "离开输入框"


def at_page(predicate, guess: str | None = None):
    async def run_before(pilot) -> None:
        await started(pilot.app, pilot)
        lesson = pilot.app.session.lesson
        while not predicate(lesson.current):
            await pilot.press("n")
            await pilot.pause()
        if guess is not None:
            await pilot.press(*guess, "enter")
        await pilot.pause()

    return run_before


def test_snapshot_a_guess_compared_at_80x24(snap_compare):
    app = make_app(trace=load(TINY_TRACE), options=RunOptions(lesson="000"))
    assert snap_compare(app, terminal_size=(80, 24), run_before=at_page(lambda page: page.predict is not None, "150k"))


def test_snapshot_an_attention_page_in_chinese_at_120x40(snap_compare):
    set_language("zh")
    app = make_app(trace=load(TINY_TRACE), options=RunOptions(lesson="000"))
    assert snap_compare(app, terminal_size=(120, 40), run_before=at_page(lambda page: page.until_head is not None))


# -- the lesson menu -----------------------------------------------------------------------------
def menu_lines(app) -> list[str]:
    from textual.widgets import OptionList

    options = app.screen.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


def every_choice_in_sight(app) -> None:
    """The menu's list needs no scrolling and its last choice is drawn on the screen: at 80 x 24
    the list once came out a line short and scrolled "Not now, and do not open ..." away."""
    from textual.widgets import OptionList

    options = app.screen.query_one(OptionList)
    assert options.max_scroll_y == 0 and options.scroll_y == 0
    last = str(options.get_option_at_index(options.option_count - 1).prompt)
    assert last in screen_text(app)


async def start_fresh(app, pilot):
    """The app started with a state directory where the menu was never answered: the menu is on top
    of the step-through."""
    from gpt2viz.tui.screens.lesson_menu import LessonMenu
    from gpt2viz.tui.screens.step import StepScreen

    for _ in range(200):
        await pilot.pause()
        if isinstance(app.screen, LessonMenu) and app.screen.is_mounted:
            break
    assert isinstance(app.screen, LessonMenu) and app.screen.at_start
    assert isinstance(app.screen_stack[-2], StepScreen)


@run_async
async def test_a_first_start_offers_the_lessons_until_one_is_chosen(tmp_path, monkeypatch):
    """An empty state directory: the menu opens over the step-through, lists every lesson with its
    pages, Not now and Never; Escape closes it (no lesson) and the next start offers it again;
    choosing a lesson opens it at its first page and the next start goes to the step-through."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "fresh"))
    from gpt2viz.tui.lesson_run import menu_at_start
    from gpt2viz.tui.screens.step import StepScreen

    trace = load(TINY_TRACE)
    for attempt in ("escape", "choose"):
        app = make_app(trace=trace)
        async with app.run_test(size=(80, 24)) as pilot:
            await start_fresh(app, pilot)
            lines = menu_lines(app)
            for i, lesson_id in enumerate(LESSON_IDS):
                lesson = load_lesson(lesson_id)
                assert lines[i] == say("lesson.menu.item", lesson=lesson_id, title=say(lesson.title),
                                       progress=say("lesson.menu.new", pages=len(lesson.pages)))
            assert lines[len(LESSON_IDS):] == [say("lesson.menu.not_now"), say("lesson.menu.never")]
            every_choice_in_sight(app)
            if attempt == "escape":
                await pilot.press("escape")
                await pilot.pause()
                assert isinstance(app.screen, StepScreen) and app.session.lesson is None
                assert menu_at_start()
            else:
                await pilot.press("down", "enter")  # the second lesson
                await pilot.pause()
                assert isinstance(app.screen, StepScreen)
                assert app.session.lesson.lesson.id == LESSON_IDS[1] and app.session.lesson.page == 0
                assert say("lesson.header", lesson=LESSON_IDS[1], title=say(load_lesson(LESSON_IDS[1]).title),
                           page=1, pages=len(load_lesson(LESSON_IDS[1]).pages)) in lesson_text(app)
                assert not menu_at_start()
    app = make_app(trace=trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        await pilot.pause()
        assert isinstance(app.screen, StepScreen)


@run_async
async def test_r_in_the_menu_starts_a_lesson_over(tmp_path, monkeypatch):
    """A finished lesson reopened at its last page, with no way back but p pressed 17 times (a
    learner walk): r in the menu opens the highlighted lesson at page 1, its progress forgotten;
    another lesson's progress is kept."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "fresh"))
    from gpt2viz.tui.lesson_run import LessonRun
    from gpt2viz.tui.screens.lesson_menu import LessonMenu
    from tui_helpers import GENERATION_TRACE

    for lesson_id, page in ((LESSON_IDS[0], 5), (LESSON_IDS[1], 3)):
        run = LessonRun.start(load_lesson(lesson_id))
        run.page, run.done = page, {1}
        run.save()
    app = make_app(trace=load(GENERATION_TRACE))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, LessonMenu) or app.session.lesson is not None or app.screen.__class__.__name__ == "StepScreen")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, LessonMenu))
        await pilot.press("r")
        await until(pilot, lambda: app.session.lesson is not None)
        run = app.session.lesson
        assert run.lesson.id == LESSON_IDS[0] and run.page == 0 and not run.done
    assert LessonRun.start(load_lesson(LESSON_IDS[0])).page == 0
    assert LessonRun.start(load_lesson(LESSON_IDS[1])).page == 3  # the other lesson's is kept


@run_async
async def test_never_keeps_the_menu_closed_at_start_and_i_opens_it_from_any_screen(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "fresh"))
    from gpt2viz.tui.lesson_run import menu_at_start
    from gpt2viz.tui.screens.generation import GenerationScreen
    from gpt2viz.tui.screens.lesson_menu import LessonMenu
    from gpt2viz.tui.screens.step import StepScreen
    from tui_helpers import GENERATION_TRACE

    app = make_app(trace=load(GENERATION_TRACE))
    async with app.run_test(size=(120, 40)) as pilot:
        await start_fresh(app, pilot)
        await pilot.press("end", "enter")  # the last line: never
        await pilot.pause()
        assert isinstance(app.screen, StepScreen) and not menu_at_start()
        assert say("lesson.menu.never_note") in [n.message for n in app._notifications]
        await pilot.press("g")
        await started(app, pilot, GenerationScreen)
        await pilot.press("i")
        await pilot.pause()
        assert isinstance(app.screen, LessonMenu) and not app.screen.at_start
        assert menu_lines(app)[-1] == say("lesson.menu.not_now")  # no "never" when opened by i
        await pilot.press("enter")  # the first lesson, from the generation view
        await pilot.pause()
        assert isinstance(app.screen, StepScreen) and app.session.lesson.lesson.id == LESSON_IDS[0]
        await pilot.press("n", "n")  # to a page that asks for a guess: the field has the keys
        await pilot.pause()
        assert app.screen.query_one("#lesson-guess").has_focus
        await pilot.press("escape", "i")  # out of the field, then the menu
        await pilot.pause()
        lesson = load_lesson(LESSON_IDS[0])
        run = app.session.lesson
        assert menu_lines(app)[0] == say("lesson.menu.item", lesson=LESSON_IDS[0], title=say(lesson.title),
                                         progress=say("lesson.menu.at", page=3, pages=len(lesson.pages),
                                                      done=len(run.done), asks=sum(p.asks for p in lesson.pages)))
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, StepScreen) and app.session.lesson.page == 2


@run_async
async def test_the_menu_speaks_chinese(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "fresh"))
    set_language("zh")
    try:
        app = make_app(trace=load(TINY_TRACE))
        async with app.run_test(size=(80, 24)) as pilot:
            await start_fresh(app, pilot)
            lines = menu_lines(app)
            assert lines[0].startswith("第 000 课：") and lines[-1] == "以后再说，启动时不再打开这个菜单"
            every_choice_in_sight(app)
            text = app.screen.query_one("#lesson-menu-intro").content
            assert "第一次使用" in str(getattr(text, "plain", text))
    finally:
        set_language("en")


@run_async
async def test_a_page_that_needs_a_generation_says_what_to_do_on_a_replay_without_one():
    """Lesson 001 sends the learner to the generation view; a replay with no generation cannot
    open one (g only says so), so the page says how to get one instead of asking for g."""
    app = make_app(trace=load(TINY_TRACE), options=RunOptions(lesson="001"))
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        lesson = app.session.lesson
        while lesson.current.until_screen != "generation":
            await pilot.press("n")
            await pilot.pause()
        text = lesson_text(app)
        assert say("lesson.unavailable.generation") in text and say("lesson.do.open_generation") not in text
        fits(app, (80, 24))


async def open_page(app, pilot, number: int):
    """Started, then n up to page `number` of the app's lesson: (the lesson run, the step-through)."""
    await started(app, pilot)
    run = app.session.lesson
    while run.page < number:
        await pilot.press("n")
    await pilot.pause()
    return run, app.screen


@run_async
async def test_a_guess_at_the_batch_speed_waits_for_the_cost_lab_and_is_compared_with_what_it_measured(tiny_lm):
    """Lesson 004's batching page, live on the model: the guess is kept, the learner runs the cost
    lab's batch sweep, and back at the page the guess meets this machine's measurement (or, where
    the machine was busy meanwhile, the page says why it does not compare)."""
    from gpt2viz.cpu_share import disturbed
    from gpt2viz.tui.lesson_facts import BATCH, measured

    lesson = load_lesson("004")
    number = next(i for i, page in enumerate(lesson.pages) if page.predict and page.predict.answer == "batch_step_ratio")
    app = make_app(lm=tiny_lm, options=RunOptions(prompt="ROMEO: What say you", model="tiny", lesson="004"))
    async with app.run_test(size=(80, 24)) as pilot:
        run, screen = await open_page(app, pilot, number)
        facts = lesson_facts(app.session.trace)
        assert say(lesson.pages[number].do, **facts) in lesson_text(app)  # how to measure it
        await type_guess(pilot, 2)
        assert run.guesses[number].answer is None and say("lesson.guess.pending", guess="2") in lesson_text(app)
        await pilot.press("m")  # the guess left the field: m opens the lab
        await until(pilot, lambda: type(app.screen).__name__ == "CostLabScreen")
        await pilot.press("2", "r")
        for _ in range(3000):  # the sweep, in the model thread: a condition, not a duration
            result = app.session.lab_result
            if result is not None and result.batch is not None and app.session.jobs.idle:
                break
            await pilot.pause(0.02)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        sweep = app.session.lab_result.batch
        steps = {row.batch: row.step_ms for row in sweep.rows}
        ratio = steps[BATCH] / steps[1]
        made = run.guesses[number]
        assert made.answer == pytest.approx(ratio)  # what the lab measured, not a number of the trace
        text = lesson_text(app)
        assert (say("lesson.guess.busy", share=f"{sweep.others_cpu:.0%}") in text) is disturbed(sweep)
        lab = measured(app.session.lab_result)
        assert say(lesson.pages[number].predict.why, **{**facts, **lab.facts}) in text
        assert LessonPanel._verdict(made, lesson.pages[number].predict, {}) in text
        assert _number(ratio, "") in text and "2" in text
        # Run again and stopped before it measured a step: the guess waits again (no stale answer).
        from dataclasses import replace

        app.session.keep_lab_result(replace(app.session.lab_result, batch=replace(sweep, rows=[])))
        screen._draw_lesson()
        await pilot.pause()
        assert run.guesses[number].answer is None and say("lesson.guess.pending", guess="2") in lesson_text(app)
        # Measured again while the machine was busy: compared all the same (a learner on a busy
        # machine once never got an answer), under a line that says how busy it was.
        app.session.keep_lab_result(replace(app.session.lab_result, batch=replace(sweep, others_cpu=0.9)))
        screen._draw_lesson()
        await pilot.pause()
        text = lesson_text(app)
        assert say("lesson.guess.busy", share="90%") in text
        assert LessonPanel._verdict(run.guesses[number], lesson.pages[number].predict, {}) in text
        assert text.index(say("lesson.guess.busy", share="90%")) < text.index(
            LessonPanel._verdict(run.guesses[number], lesson.pages[number].predict, {}))


@run_async
async def test_the_key_a_guess_page_asks_for_does_what_it_says_before_any_guess(tiny_lm):
    """The batching page's field has the focus when it opens; its "press m" opens the cost lab
    from the empty field (no guess starts with a unit), where it used to type an m for "million".
    Once a number is typed, m is a unit again."""
    lesson = load_lesson("004")
    number = next(i for i, page in enumerate(lesson.pages) if page.predict and page.predict.answer == "batch_step_ratio")
    app = make_app(lm=tiny_lm, options=RunOptions(prompt="ROMEO: What say you", model="tiny", lesson="004"))
    async with app.run_test(size=(80, 24)) as pilot:
        run, screen = await open_page(app, pilot, number)
        field = screen.query_one(LessonPanel).guess_field()
        assert field.has_focus and lesson.pages[number].press == "m"
        await pilot.press("1", ".", "5", "m")
        assert field.value == "1.5m" and type(app.screen).__name__ == "StepScreen"
        field.value = ""
        await pilot.press("m")
        await until(pilot, lambda: type(app.screen).__name__ == "CostLabScreen")
        assert field.value == "" and number not in run.guesses
        # Back on the page, which still waits for a guess: typing goes into its field again.
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        await pilot.press("2")
        assert field.has_focus and field.value == "2"


@run_async
async def test_a_page_that_asks_to_switch_a_part_off_is_done_when_the_edited_pass_shows(tiny_lm):
    lesson = load_lesson("004")
    number = next(i for i, page in enumerate(lesson.pages) if page.until_off)
    app = make_app(lm=tiny_lm, options=RunOptions(prompt="ROMEO: What say you", model="tiny", lesson="004"))
    async with app.run_test(size=(80, 24)) as pilot:
        run, screen = await open_page(app, pilot, number)
        page = lesson.pages[number]
        assert screen.stage.key == page.show and say(page.do) in lesson_text(app) and number not in run.done
        await pilot.press(page.press)
        await until(pilot, lambda: type(app.screen).__name__ == "InterventionMenu")
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is screen and bool(screen.trace.interventions) and app.session.jobs.idle)
        await pilot.pause()
        assert number in run.done and say("lesson.done") in lesson_text(app)
        assert screen.stage.key == page.show  # the stage stays where the page put it
        # Enter took this stage's own part, and every page says its numbers are the edited pass's
        # until u switches it on again.
        assert screen.trace.interventions == ["L0.mlp"]
        assert say("lesson.edited", parts="L0.mlp", undo="u") in lesson_text(app)
        await pilot.press("n")
        await pilot.pause()
        assert say("lesson.edited", parts="L0.mlp", undo="u") in lesson_text(app)
        await pilot.press("u")
        await until(pilot, lambda: not screen.trace.interventions and app.session.jobs.idle)
        await pilot.pause()
        assert say("lesson.edited", parts="L0.mlp", undo="u") not in lesson_text(app)


@run_async
async def test_chinese_lesson_text_keeps_latin_words_whole_at_80x24():
    """Laid out for the panel's width: 'GPT-2' was folded 'G' / 'PT-2' by a plain widget."""
    set_language("zh")
    app = make_app(trace=load(TINY_TRACE), options=RunOptions(lesson="000"))
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        text = app.screen.query_one("#lesson-text")
        for _ in range(len(load_lesson("000").pages)):
            assert "".join(text.plain.split()) == "".join(text.text.split())  # only the breaks differ
            for word in ("GPT-2", "KV", "MiB", "[1,"):
                for line in text.plain.split("\n"):
                    assert not (line.endswith(word[: len(word) // 2]) and word not in line and word in text.text)
            assert max(cell_len(line) for line in text.plain.split("\n")) <= text.size.width
            await pilot.press("n")
            await pilot.pause()


@pytest.mark.parametrize("language", ["en", "zh"])
@run_async
async def test_the_lesson_panel_is_no_smaller_at_120_x_40(language):
    """The slow walk checks the pages at 80 x 24 alone: that says they fit at 120 x 40 only
    while the panel there is at least as wide and may grow at least as tall (a text wrapped to a
    wider line takes no more lines)."""
    set_language(language)
    room = {}
    for size in SIZES:
        app = make_app(trace=load(TINY_TRACE), options=RunOptions(lesson="000"))
        async with app.run_test(size=size) as pilot:
            await started(app, pilot)
            panel, text = app.screen.query_one(LessonPanel), app.screen.query_one("#lesson-text")
            fits(app, size)
            room[size] = (text.content_region.width, panel.styles.max_height.resolve(panel.parent.size, app.size))
    (narrow, low), (wide, high) = room[SIZES[0]], room[SIZES[1]]
    assert wide >= narrow and high >= low, room


@run_async
async def test_a_guess_once_in_moves_to_the_stage_that_shows_the_number():
    """Lesson 000's logits and probability guesses open on Final ln_f, which keeps the answer out of
    sight; once the guess is in, the step-through moves to the LM head, where the numbers it quotes
    are (a learner walk found the page left on ln_f, the numbers nowhere on screen)."""
    lesson = load_lesson("000")
    number = next(i for i, page in enumerate(lesson.pages) if page.predict and page.predict.answer == "logits")
    app = make_app(trace=load(TINY_TRACE), options=RunOptions(lesson="000"))
    async with app.run_test(size=(120, 40)) as pilot:
        run, screen = await open_page(app, pilot, number)
        assert screen.stage.key == "ln_final"
        answer = lesson_answers(app.session.trace)["logits"]
        await type_guess(pilot, 1000)  # far off: the answer is shown all the same
        assert run.guesses[number].answer == answer and screen.stage.key == "lm_head"
        assert f"{int(answer):,}" in stage_text(app)  # the LM head stage says how many logits it made
        await pilot.press("escape", "p", "n")  # back to the page: its verdict, beside the number again
        await pilot.pause()
        assert run.page == number and screen.stage.key == "lm_head"


def test_a_huge_guess_is_written_with_a_power_of_ten():
    """1e30 read back as 1,000,000,000,000,000,019,884,624,838,656 (the float's digits), and its
    ratio to the answer as 6,579,639,962,101,274,013,335,552."""
    from gpt2viz.lessons import Prediction
    from gpt2viz.tui.lesson_run import Guess

    assert _number(1e30, "") == "1e+30" and _number(151984, "") == "151,984" and _number(0.425, "") == "0.425"
    verdict = LessonPanel._verdict(Guess(1e30, 151984), Prediction("q", "a", 0.1, "w"), {})
    assert "1e+30" in verdict and "6.58e+24" in verdict and "019,884" not in verdict


def test_an_answer_of_0_is_judged_without_a_ratio():
    """Lesson 003 asks how many scores the mask removes: 0 for a one-token prompt. A guess of 5
    divided by it (ZeroDivisionError: the app ended) and 0 was refused as no guess."""
    from gpt2viz.lessons import Prediction
    from gpt2viz.tui.lesson_run import Guess

    asked = Prediction("q", "a", 0.1, "w")
    assert LessonPanel._verdict(Guess(5, 0), asked, {}) == say("lesson.guess.off", guess="5", answer="0")
    assert LessonPanel._verdict(Guess(0, 0), asked, {}) == say("lesson.guess.exact", guess="0")
    assert LessonPanel._verdict(Guess(0, 10), asked, {}) == say("lesson.guess.off", guess="0", answer="10")
    assert _number(float("nan"), "%") == "–"


@run_async
async def test_a_verdict_is_worked_out_again_for_a_new_pass(tiny_lm):
    """A guess judged on one pass kept its verdict after the prompt was edited: 'this run gives
    exactly that' above the new pass's '0 + 1 + 2 + 3 = 6'. The verdict is the pass on show's."""
    from gpt2viz.trace import trace_prompt

    lesson = load_lesson("003")
    number = next(i for i, page in enumerate(lesson.pages) if page.predict and page.predict.answer == "masked_scores")
    app = make_app(trace=load(TINY_TRACE), options=RunOptions(lesson="003"))
    async with app.run_test(size=(120, 40)) as pilot:
        run, screen = await open_page(app, pilot, number)
        await type_guess(pilot, 10)  # five tokens: 0 + 1 + 2 + 3 + 4
        assert say("lesson.guess.exact", guess="10") in lesson_text(app)
        screen.load_trace(trace_prompt(tiny_lm, "Hello"))  # one token: the mask removes nothing
        await pilot.pause()
        assert run.guesses[number].answer == 0
        assert say("lesson.guess.off", guess="10", answer="0") in lesson_text(app)


@run_async
async def test_a_word_typed_into_a_guess_stays_in_the_field():
    """Once something is typed, n and p are the field's letters (refused) and no letter reaches the
    step-through: a crash walk typed 1e999, enter, then 'nan' (which turned the page and showed all
    heads) and 'inf' with enter (the lesson menu opened and lesson 000 replaced 001). From an empty
    field n still turns the page."""
    app = make_app(trace=load(TINY_TRACE), options=RunOptions(lesson="001"))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await started(app, pilot)
        lesson = app.session.lesson
        while lesson.current.predict is None:
            await pilot.press("n")
        page, step = lesson.page, app.screen
        field = step.query_one("#lesson-guess")
        await pilot.press(*"1e999", "enter", *"nan", *"inf", "enter")
        await pilot.pause()
        assert app.session.lesson is lesson and lesson.page == page and app.screen is step
        assert field.has_focus and field.value == "1e999i"
        assert not any("All heads" in str(n.message) for n in app._notifications)
        await pilot.press("ctrl+u", "n")
        assert lesson.page == page + 1
