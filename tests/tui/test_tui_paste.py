"""A bracketed paste reaches the app whole, as one Paste event, whatever it holds: Textual 8.2.8's
parser of the terminal's input took a paste's first ESC for the start of a key's sequence and gave
the characters after it as key presses (a line break in the text was enter, a q quit the app), and
a long paste full of colour codes took seconds, one key event and one redraw per character."""

from __future__ import annotations

from textual import events
from textual.command import CommandPalette
from textual._xterm_parser import BRACKETED_PASTE_END, BRACKETED_PASTE_START, XTermParser
from textual.drivers import linux_driver

from gpt2viz.text_safety import is_hidden
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.prompt import PromptScreen
from gpt2viz.tui.textual_compat import PasteKeepingParser
from tui_helpers import run_async, started

# Copied from a terminal that showed coloured text: a colour code, a line break and a q among them.
PASTED = "red: \x1b[31mhello\x1b[0m then a line\rq and more\x1b[A\x1b"
STREAM = "a" + BRACKETED_PASTE_START + PASTED + BRACKETED_PASTE_END + "b\x1b[A"


def events_of(parser, chunks: list[str]) -> list[tuple[str, str]]:
    return [
        (type(event).__name__, event.text if isinstance(event, events.Paste) else event.key)
        for chunk in chunks
        for event in parser.feed(chunk)
    ]


WHOLE = [("Key", "a"), ("Paste", PASTED), ("Key", "b"), ("Key", "up")]


def test_textuals_own_parser_gives_a_paste_s_characters_as_keys():
    """What the override is for: were Textual's parser mended, this fails and the override can go."""
    got = events_of(XTermParser(), [STREAM])
    assert ("Key", "enter") in got and ("Key", "q") in got


def test_a_paste_is_one_event_however_the_terminal_s_reads_cut_it():
    assert events_of(PasteKeepingParser(), [STREAM]) == WHOLE
    for cut in range(1, len(STREAM)):  # the markers cut in two, an ESC at a read's end, ...
        assert events_of(PasteKeepingParser(), [STREAM[:cut], STREAM[cut:]]) == WHOLE, cut
    assert events_of(PasteKeepingParser(), list(STREAM)) == WHOLE  # a character per read


def test_pastes_one_after_another_and_an_empty_one():
    stream = BRACKETED_PASTE_START + BRACKETED_PASTE_END + "x" + BRACKETED_PASTE_START + "a\x00b" + BRACKETED_PASTE_END
    assert events_of(PasteKeepingParser(), [stream]) == [("Paste", ""), ("Key", "x"), ("Paste", "ab")]  # NUL dropped


class Clock:
    """Textual's clock, as the parsers read it, moved by hand."""

    def __init__(self, monkeypatch) -> None:
        import textual._parser

        from gpt2viz.tui import textual_compat

        self.now = 100.0
        for module in (textual._parser, textual_compat):
            monkeypatch.setattr(module, "get_time", lambda: self.now)


def ticked(parser, clock: Clock, seconds: float) -> list[tuple[str, str]]:
    clock.now += seconds
    return [(type(e).__name__, e.text if isinstance(e, events.Paste) else e.key) for e in parser.tick()]


def test_a_start_marker_textual_gave_as_keys_starts_no_paste(monkeypatch):
    """Escape, a pause, then [200~ typed: Textual's parser gives keys, and so does this one; a q
    after them quits (the review found every key swallowed until an end marker came)."""
    clock = Clock(monkeypatch)
    parser = PasteKeepingParser()
    assert events_of(parser, ["\x1b"]) == []
    assert ticked(parser, clock, 1.0) == [("Key", "escape")]
    got = events_of(parser, ["[200~q"])
    assert not any(kind == "Paste" for kind, _ in got) and got[-1] == ("Key", "q")
    # A start marker cut in two reads with a pause between: keys, as Textual's own parser gives.
    assert events_of(parser, ["\x1b[20"]) == []
    ticked(parser, clock, 1.0)
    got = events_of(parser, ["0~hi"])
    assert not any(kind == "Paste" for kind, _ in got) and got[-1] == ("Key", "i")


def test_a_paste_whose_end_never_comes_ends_when_nothing_more_is_read(monkeypatch):
    clock = Clock(monkeypatch)
    parser = PasteKeepingParser()
    assert events_of(parser, [BRACKETED_PASTE_START + "abc\x1b[20"]) == []
    assert ticked(parser, clock, 1.0) == []  # still within the paste
    assert ticked(parser, clock, 1.5) == [("Paste", "abc\x1b[20")]
    assert events_of(parser, ["q"]) == [("Key", "q")]  # the keys work again
    assert events_of(parser, [STREAM]) == WHOLE  # and so do pastes


def test_the_terminal_driver_makes_this_parser():
    assert linux_driver.XTermParser is PasteKeepingParser


async def prompt_field(app, pilot):
    """The prompt editor's field, the editor opened from the step-through."""
    await started(app, pilot)
    await pilot.press("e")
    await started(app, pilot, PromptScreen)
    return app.screen.query_one("#prompt-input")


@run_async
async def test_a_pasted_text_goes_into_the_prompt_whole_with_its_marks(tiny_lm):
    """Textual's Input keeps a paste's first line only; the prompt keeps all of it, ESC shown as ␛
    and a line break (a carriage return from the terminal) as ␊, and the app's keys (q) are not
    run by it."""
    app = make_app(lm=tiny_lm)
    async with app.run_test(size=(100, 30)) as pilot:
        field = await prompt_field(app, pilot)
        field.select_all()  # the field's text chosen: the paste replaces it
        app.post_message(events.Paste("one \x1b[31mred\x1b[0m\rq two\r\nthree"))  # as terminals send line breaks
        await pilot.pause()
        assert field.value == "one \x1b[31mred\x1b[0m\nq two\nthree"
        assert "one ␛[31mred␛[0m␊q two␊three" in field.render_line(0).text
        assert isinstance(app.screen, PromptScreen) and app.is_running


@run_async
async def test_a_paste_into_the_palette_s_search_shows_its_hidden_characters_as_marks(tiny_lm):
    """The palette's field is Textual's and draws its value as it is: an escape pasted into it
    would reach the terminal (a window title set, the screen cleared)."""
    app = make_app(lm=tiny_lm)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(app, pilot)
        await pilot.press("ctrl+p")
        await started(app, pilot, CommandPalette)
        app.post_message(events.Paste("blo\x1b]0;PWNED\x07ck\x9b2J\u202e"))
        await pilot.pause()
        assert app.focused.value == "blo␛]0;PWNED␇ck\ufffd2J\ufffd"
        drawn = "".join(segment.text for strip in app.screen._compositor.render_strips() for segment in strip)
        assert "PWNED" in drawn and not any(is_hidden(ch) for ch in drawn if ch != "\n")


@run_async
async def test_a_number_pasted_with_its_line_break_goes_into_a_settings_field(tiny_lm):
    """A field of Textual's keeps a paste's first line: "0.7" and a line break (a carriage return
    from the terminal) is 0.7, not a paste the number field refuses whole for its mark ␍."""
    from gpt2viz.tui.screens.generation import GenerationScreen
    from gpt2viz.tui.screens.generation_settings import SettingsScreen

    app = make_app(lm=tiny_lm)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(app, pilot)
        await pilot.press("g")
        await started(app, pilot, GenerationScreen)
        await pilot.press("s")
        await started(app, pilot, SettingsScreen)
        field = app.screen.query_one("#new-tokens")
        field.focus()
        field.value = ""
        await pilot.pause()
        app.post_message(events.Paste("64\r"))
        await pilot.pause()
        assert field.value == "64"


@run_async
async def test_keys_read_together_edit_the_prompt_in_their_order(tiny_lm):
    """Keys that arrive in one read of the terminal (a fast typist, a slow SSH link) edit in the
    order they came: Textual ran the field's own bindings (←, backspace, ctrl+a, ctrl+k) only after
    the printable keys behind them went in (a crash walk: ' abc' ← ← X gave ' abcX')."""
    app = make_app(lm=tiny_lm)
    async with app.run_test(size=(100, 30)) as pilot:
        field = await prompt_field(app, pilot)
        field.value = " abc"
        field.cursor_position = 4
        await pilot.pause()
        for key, character in (("left", None), ("left", None), ("X", "X"), ("backspace", None), ("backspace", None),
                               ("y", "y"), ("ctrl+e", None), ("z", "z")):
            app.post_message(events.Key(key, character))  # all queued before any is handled
        await pilot.pause()
        assert field.value == " ybcz"
        for key, character in (("ctrl+a", None), ("ctrl+k", None), ("7", "7"), ("8", "8")):
            app.post_message(events.Key(key, character))
        await pilot.pause()
        assert field.value == "78" and isinstance(app.screen, PromptScreen)
