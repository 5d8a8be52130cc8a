"""Every private part of Textual that gpt2viz relies on, in one place.

Textual's public API does not cover these needs; each is done here, against the pinned version
(pyproject.toml), and nowhere else. `TEXTUAL_PRIVATE` names each private method or attribute
used, with a fingerprint of Textual's own code for it at the pinned version: tests/tui/
test_textual_compat.py fails, naming the part, when an upgrade changes one, so the override is
looked at again before it breaks silently.

- `CompatApp`: the crash path. An error nobody foresaw ends the app with one line naming the log
  (gpt2viz.crash_log) instead of Textual's traceback on the terminal. And `leaving`: once the app
  exits, the input still queued (keys typed after q) is dropped, not handled by screens whose
  widgets are being taken down; and `run_action` runs no action for a screen that has left.
  And `call_when_drawn`: a callback once the screen has nothing left to draw (the flags Textual's
  screen update timer reads, the widgets' message queues), for timed work that must not overlap
  the app's painting (tui/jobs.py, Job.report_drawn).
- `CompatPalette`: the command palette's own sentence ("No matches found") in the reader's
  language; no search started or finished, and none of its widgets touched, once it has closed.
- `OptionList._move_page` pages only a list that has its lines: Textual 8.2.8's raises KeyError
  for a list not laid out yet (ctrl+p and PageUp at once; x and PageUp in the what-if menu).
- `CompatInput`: a text field draws its value through a hook of ours (gpt2viz.tui.widgets.
  safe_input shows hidden characters as one-cell marks).
- `binding_table(node)`: a node's bindings by key, to give them texts in another language.
- A `Timer` never has an interval under MIN_TIMER_INTERVAL: Textual 8.2.8's timer loop spins
  forever, the UI frozen at 100% CPU (no key, not even ctrl+c, gets through), for an interval of
  0 or less, which a notification's toast asks for when it is drawn again in the microseconds
  after it expired (its time left, measured twice, went negative in between).
- A `Strip` (one line of a widget's drawing) makes its seven caches when one is first used, not
  when it is made: most strips are drawn once and dropped, and making the caches of every strip
  took a tenth of the TUI's time (py-spy over the TUI tests: 6.4 % in FIFOCache.__init__, 5.2 % in
  Strip.__init__).
- A bracketed paste is read whole (`PasteKeepingParser`, the parser of the terminal's input that
  Textual's Linux driver makes): Textual 8.2.8's took a paste's first ESC for the start of a key's
  sequence and gave the characters after it as key presses, so pasted text with a colour code in
  it ran the app's keys (a line break in it was enter, a q quit) and came out of order, and a
  10 KB paste with many codes took seconds (one key event, one redraw of the field, per character).
  A paste into a field of Textual's own (the palette's search, a number field), which draws its
  value as it is, gets each hidden character but its line breaks as its visible mark
  (`CompatApp.on_event`); such a field keeps the paste's first line, as Textual's Input does.
- `StylesCache.get_inner_outer` is cached without the cache it belongs to: Textual 8.2.8 caches
  it per instance with `lru_cache`, so the last 1,024 widgets' style caches, and every line they
  drew, outlive the widgets (opening and closing 200 step screens held ~100 MB).
- A number and its unit stay on one line when text wraps ("6.1 KiB", "47.6 GB/s", "18.5 ms/token"):
  Rich's word splitter (`rich._wrap.words`, which Textual's text wrapping uses too) broke at any
  space, so a line could end in "6.1" with "KiB" on the next.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
import functools
import hashlib
import inspect
import re
import time
from functools import lru_cache
from typing import Callable

from rich import _wrap as rich_wrap
from rich.align import Align
from rich.cells import cell_len, get_character_cell_size
from rich.text import Text
from textual.app import App
from textual.binding import Binding
from textual import events, work
from textual.command import CommandList, CommandPalette
from textual.css.query import NoMatches
from textual.dom import DOMNode, NoScreen
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.cache import FIFOCache
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option
from textual.notifications import Notification, Notify
from textual._styles_cache import StylesCache
from textual._xterm_parser import BRACKETED_PASTE_END, BRACKETED_PASTE_START, XTermParser
from textual._parser import Parser
from textual._time import get_time

try:
    from textual.drivers import linux_driver
except ImportError:  # no termios (Windows): Textual's driver there reads keys its own way
    linux_driver = None  # type: ignore[assignment]

from ..text_safety import safe_field

# (owner, name) -> sha256 of Textual's source for it at the pinned version (first 16 hex digits).
TEXTUAL_PRIVATE: dict[tuple[type, str], str] = {
    (App, "_handle_exception"): "baea2e7f88e7ac52",
    (App, "_exit"): "252ebc810445207d",
    (App, "_fatal_error"): "2474616cec7fa94d",
    (App, "_on_notify"): "65e0eaed1e22eff4",
    (App, "_unnotify"): "0ca739607455a3aa",
    (App, "_notifications"): "252ebc810445207d",
    (App, "_close_messages_no_wait"): "f5db7e8fd40afc56",
    (CommandPalette, "_start_no_matches_countdown"): "0bc07d1794718e89",
    (CommandPalette, "_stop_no_matches_countdown"): "ab26b55062318399",
    (CommandPalette, "_gather_commands"): "b91ff7feae77d521",
    (CommandPalette, "_cancel_gather_commands"): "968b333f70cecb42",
    (CommandPalette, "_watch__list_visible"): "c01a45104dd9869c",
    (CommandPalette, "_watch__show_busy"): "20c16f13ec9c5629",
    (OptionList, "_index_to_line"): "04010a327bf34277",
    (OptionList, "_move_page"): "85f7f33005763486",
    (Input, "_value"): "33f9515a42e79bd3",
    (Input, "_position_to_cell"): "13188cb52bbc8064",
    (Input, "_cell_offset_to_index"): "b986d8f0be63e5d2",
    (Timer, "__init__"): "8ca147ea690cee4b",
    (Timer, "_run"): "60c942a84c1a8765",
    (StylesCache, "get_inner_outer"): "d2509f3e796680df",
    (DOMNode, "_bindings"): "92386cf024a399a8",
    (Strip, "__init__"): "ce1d8154dca8cfd7",
    (Screen, "_on_timer_update"): "421401660de142c5",
    (Screen, "_layout_required"): "1f509dabafc58436",
    (App, "_resize_event"): "252ebc810445207d",
    (MessagePump, "_message_queue"): "4c13f534c77c6b67",
    (XTermParser, "parse"): "a5834ad1def86544",
    (Parser, "feed"): "390106cde019dd29",
    (Parser, "tick"): "44606084ad3bf7c1",
    (rich_wrap, "words"): "8399129bee547c3c",
}
if linux_driver is not None:
    TEXTUAL_PRIVATE[linux_driver.LinuxDriver, "run_input_thread"] = "d796af6d69db337d"
    TEXTUAL_PRIVATE[linux_driver.LinuxDriver, "_run_input_thread"] = "d2ef22cc2c97a9eb"


# Textual's own code for what this module replaces on Textual's classes (for the fingerprint).
_REPLACED: dict[tuple[type, str], object] = {}


def fingerprint(owner: type, name: str) -> str:
    """The first 16 hex digits of the sha256 of Textual's code for `owner.name` (for an attribute
    set in `__init__`, of `__init__`)."""
    value = _REPLACED.get((owner, name)) or inspect.getattr_static(owner, name, None)
    if value is None:
        value = owner.__init__
    target = getattr(value, "fget", None) or getattr(value, "__wrapped__", None) or value
    if not callable(target):
        target = owner.__init__
    source = inspect.getsource(target)
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def changed_parts() -> list[str]:
    """The private parts whose code is no longer the code the overrides were written against (and
    Rich's word pattern, a value, not code)."""
    changed = [
        f"{getattr(owner, '__qualname__', owner.__name__)}.{name}"
        for (owner, name), expected in TEXTUAL_PRIVATE.items()
        if fingerprint(owner, name) != expected
    ]
    return changed + ([] if _RICH_WORD.pattern == RICH_RE_WORD else ["rich._wrap.re_word"])


# -- the crash path -----------------------------------------------------------------------------------
# CompatApp.call_when_drawn: how often it looks whether the screen is drawn, and for how long at most.
DRAWN_POLL_S = 0.004
DRAWN_MOST_S = 0.15
# What Textual's Screen._on_timer_update reads to know that it has something to draw.
_SCREEN_PENDING = (
    "_layout_required", "_scroll_required", "_repaint_required", "_recompose_required", "_dirty_widgets", "_callbacks",
)


@dataclass
class KeyedNotification(Notification):
    """A notification that takes the place of the last one given the same `replaces` key."""

    replaces: str | None = None


class CompatApp(App):
    """An App whose unexpected errors end it with one line (`crash_line`), never a traceback."""

    def crash_line(self, error: Exception) -> None:
        """Keeps the line the CLI will print for `error` (and logs its traceback)."""

    def _handle_exception(self, error: Exception) -> None:
        # Textual's own handling still runs (so a Pilot test sees the exception), then exits
        # through _fatal_error below.
        self.crash_line(error)
        super()._handle_exception(error)

    def _fatal_error(self) -> None:
        """Ends the app without Textual's traceback on the terminal: the crash line says it."""
        self.bell()
        self._close_messages_no_wait()

    def _on_notify(self, event: Notify) -> None:
        """Runs before Textual's own (which adds the notification): a notification takes the place
        of one on show with the same words, or of one given the same `replaces` key
        (KeyedNotification), as it is shown, so that several asked for in one burst (a key held
        down) replace each other too."""
        new = event.notification
        key = getattr(new, "replaces", None)
        for shown in list(self._notifications):
            if (shown.message, shown.title) == (new.message, new.title) or (
                key is not None and getattr(shown, "replaces", None) == key
            ):
                self._unnotify(shown, refresh=False)

    @property
    def leaving(self) -> bool:
        """Whether the app was told to exit (it still handles what was queued before that)."""
        return bool(self._exit)

    async def on_event(self, event: events.Event) -> None:
        # Keys typed after q reach the app before its exit takes effect; handled, they would open
        # screens in an app that mounts nothing any more, or find no screen at all.
        if self.leaving and isinstance(event, (events.InputEvent, events.Paste)):
            return
        if isinstance(event, events.Paste) and not event.is_forwarded and not isinstance(self.focused, CompatInput):
            # A field of Textual's own (the palette's search, a number of the settings form) draws
            # its value as it is: a pasted escape would reach the terminal. It gets each hidden
            # character as its visible mark, but the line breaks: such a field keeps the first line.
            event = events.Paste("\n".join(safe_field(line) for line in event.text.splitlines()))
        await super().on_event(event)

    async def run_action(self, action, default_namespace=None, namespaces=None) -> bool:
        """Textual's run_action, for a node still on the app's screens: an action queued for a
        screen that has left since (the palette runs its command a moment after it closes, when a
        key typed before may have closed that screen) does nothing, nor does any once the app is
        leaving."""
        if not self.still_there(default_namespace):
            return False
        return await super().run_action(action, default_namespace, namespaces)

    def still_there(self, node: DOMNode | None) -> bool:
        """Whether work queued for `node` may still run: the app is not leaving and `node` (None or
        the app: the app itself) is, or is in, a screen on the stack."""
        if self.leaving:
            return False
        if node is None or node is self:
            return True
        try:
            screen = node if isinstance(node, Screen) else node.screen
        except NoScreen:
            return False
        return screen in self.screen_stack

    def call_when_drawn(self, callback: Callable[[], None]) -> None:
        """`callback` on the UI thread once the screen has drawn everything asked of it so far, at
        most DRAWN_MOST_S later (at once when the app is leaving).

        Textual's `call_after_refresh` is not that: its callbacks run at the next refresh, and the
        layout done there posts Resize messages whose handlers ask for another layout and paint (the
        generation view's panels grow with the steps' rows; a footer recomposes when the keys
        change): measured, a second paint 18-33 ms later and a third after that. So after the
        refresh this looks again every DRAWN_POLL_S until the screen has nothing pending."""
        if self.leaving:  # an app that is exiting may never refresh again
            callback()
            return
        deadline = time.monotonic() + DRAWN_MOST_S

        def check() -> None:
            if self.leaving or not self._has_pending_drawing() or time.monotonic() > deadline:
                callback()
            else:
                self.set_timer(DRAWN_POLL_S, check)

        self.call_after_refresh(check)

    def _has_pending_drawing(self) -> bool:
        """Whether the screen on top has drawing still to do: a flag that Textual's screen update
        timer reads is set (a layout, scroll, repaint or recompose asked for, a dirty widget, a
        callback waiting for the next refresh), a resize waits for the app's timer, or a message
        waits in the app's queue or a widget's of the screen (a handler may ask for more)."""
        if not self.screen_stack:
            return False
        if self._resize_event is not None:
            return True
        screen = self.screen
        if any(getattr(screen, name) for name in _SCREEN_PENDING):
            return True
        return any(not node._message_queue.empty() for node in (self, *screen.walk_children(with_self=True)))

    def push_screen(self, screen, callback=None, wait_for_dismiss=False, **kwargs):
        """Textual's push_screen; the screen's result goes to `callback` only while the app is not
        leaving: a form submitted just before q would otherwise hand its result to a screen whose
        widgets the shutdown is removing, and start work in an app that is ending."""
        return super().push_screen(screen, self.while_staying(callback), wait_for_dismiss, **kwargs)

    def while_staying(self, callback):
        """`callback`, called only while the app is not leaving (None stays None)."""
        if callback is None:
            return None
        if inspect.iscoroutinefunction(callback):

            async def call_async(result):
                if not self.leaving:
                    await callback(result)

            return call_async

        def call(result):
            if not self.leaving:
                return callback(result)
            return None

        return call


# -- the command palette -----------------------------------------------------------------------------------
class CompatPalette(CommandPalette):
    """Textual's command palette, made safe against fast keys, its one sentence translated."""

    no_matches_text: Callable[[], str] = staticmethod(lambda: "No matches found")

    @property
    def _showing(self) -> bool:
        """Whether the palette is still the screen on top (it stops searching once it is not)."""
        return self.is_attached and self.app.screen is self

    def _start_no_matches_countdown(self, search_value: str) -> None:
        # Textual 8.2.8's method, its message from `no_matches_text`: Textual writes it into the
        # list as a literal. As there, it shows only for a search (not in discovery, the empty
        # search) that found nothing for _NO_MATCHES_COUNTDOWN seconds.
        self._stop_no_matches_countdown()

        def show_no_matches() -> None:
            if not self._showing or not self._has_list:
                return
            if search_value:
                self.query_one(CommandList).add_option(
                    Option(Align.center(Text(self.no_matches_text(), style="not bold")), disabled=True, id=self._NO_MATCHES)
                )
                self._list_visible = True
            else:
                self._list_visible = False

        self._no_matches_timer = self.set_timer(self._NO_MATCHES_COUNTDOWN, show_no_matches)

    @property
    def _has_list(self) -> bool:
        """Whether the palette still has its list: not once it is being taken down (closed, or the
        app quitting while a search runs, when it may still be the screen on top)."""
        return self.is_attached and bool(self.query(CommandList))

    def _gather_commands(self, search_value: str):  # type: ignore[override]
        # A key typed just before the palette closed may still ask for a search: there is no
        # list left to fill.
        if not self._showing:
            return None
        return self._search_while_it_has_a_list(search_value)

    @work(exclusive=True, group=CommandPalette._GATHER_COMMANDS_GROUP)
    async def _search_while_it_has_a_list(self, search_value: str) -> None:
        """Textual's search worker, which queries the palette's widgets as it goes: a search still
        running when the palette is taken down ends quietly (WorkerFailed: NoMatches for
        CommandList, the app quitting during a search), as it does when it was cancelled."""
        try:
            await _TEXTUAL_GATHER(self, search_value)
        except NoMatches:
            if self._has_list:
                raise

    def stop_searching(self) -> None:
        """Cancels the search under way (the palette is closing)."""
        self._stop_no_matches_countdown()
        self._cancel_gather_commands()

    def dismiss(self, result: object = None):
        # However it closes (Escape, a command chosen, closed with the screen under it).
        self.stop_searching()
        return super().dismiss(result)

    # A search cancelled as the palette closes still ends by setting _show_busy and _list_visible,
    # whose watchers query the palette's widgets: by then they may be gone (WorkerFailed:
    # NoMatches for CommandList, the soak, a palette over the loading screen).
    async def _watch__show_busy(self) -> None:
        if self._has_list:
            await super()._watch__show_busy()

    def _watch__list_visible(self) -> None:
        if self._has_list:
            super()._watch__list_visible()


# Textual's search, as written (under its @work decorator); CompatPalette runs it in a worker of
# the same group.
_TEXTUAL_GATHER = CommandPalette._gather_commands.__wrapped__


# -- text fields --------------------------------------------------------------------------------------------
class CompatInput(Input):
    """An Input drawn through `shown(value)`: each character of the value maps to one character
    drawn (so the cursor and clicks map one to one). Textual's Input draws `self.value` through
    `_value`, places the cursor by `_position_to_cell` and maps a click to a character by
    `_cell_offset_to_index`; all three are private."""

    def shown(self, value: str) -> str:
        """How `value` is drawn: as many characters as it has."""
        return value

    async def on_key(self, event: events.Key) -> None:
        """A key the field binds itself (backspace, ←, home, ctrl+a, ctrl+k, enter, ...) runs here,
        in the order the keys came. Textual runs such a binding only once its key has bubbled up to
        the app, after the printable keys typed behind it went in: a crash walk's ctrl+a ctrl+k 7 8
        in one read of the terminal left the field empty, and ' abc' ← ← X gave ' abcX'."""
        for binding in binding_table(self).get(event.key, ()):
            if binding.priority:  # the app ran those before the key reached the field
                continue
            event.prevent_default()
            event.stop()
            await self.run_action(binding.action)
            return

    @property
    def _value(self) -> Text:
        if self.password:
            return super()._value
        return Text(self.shown(self.value), no_wrap=True, overflow="ignore", end="")

    def _position_to_cell(self, position: int) -> int:
        return cell_len(self.shown(self.value[:position]))

    def _cell_offset_to_index(self, offset: int) -> int:
        """The character under cell `offset` of the field as drawn."""
        offset += self.scroll_offset.x
        cell = 0
        for index, char in enumerate(self.shown(self.value)):  # one drawn character per character
            width = get_character_cell_size(char)
            if cell <= offset < cell + width:
                return index
            cell += width
        return max(0, min(offset, len(self.value)))


# -- bindings -----------------------------------------------------------------------------------------------
def binding_table(node: DOMNode) -> dict[str, list[Binding]]:
    """The node's bindings by key, to be replaced in place (Textual keeps them in `_bindings`)."""
    return node._bindings.key_to_bindings


def declared_bindings(node: DOMNode) -> list[Binding]:
    """Every binding of the node as declared (its class's and its own)."""
    return [binding for _key, binding in node._bindings]


# -- a cache that kept every widget's drawing alive ------------------------------------------------------------
_REPLACED[StylesCache, "get_inner_outer"] = inspect.getattr_static(StylesCache, "get_inner_outer")
_INNER_OUTER = _REPLACED[StylesCache, "get_inner_outer"].__wrapped__  # type: ignore[attr-defined]


@lru_cache(1024)
def _inner_outer(base_background, background):
    return _INNER_OUTER(None, base_background, background)  # its `cls` (the instance) is unused


def _get_inner_outer(self, base_background, background):
    """Inner and outer background styles, cached by the two colours only."""
    return _inner_outer(base_background, background)


StylesCache.get_inner_outer = _get_inner_outer  # type: ignore[method-assign]


# -- paging a list before it has lines ------------------------------------------------------------------------
_REPLACED[OptionList, "_move_page"] = inspect.getattr_static(OptionList, "_move_page")


def _move_page(self: OptionList, direction) -> None:
    """Textual's page move, for a list whose lines are known: before the list is laid out (hidden,
    or just opened) there is no page to move by, and Textual's would raise KeyError."""
    if (self.highlighted or 0) not in self._index_to_line:
        return
    _REPLACED[OptionList, "_move_page"](self, direction)  # type: ignore[operator]


OptionList._move_page = _move_page  # type: ignore[method-assign]


# -- a timer of no time ------------------------------------------------------------------------------------------
MIN_TIMER_INTERVAL = 0.001  # seconds
_REPLACED[Timer, "__init__"] = Timer.__init__


def _timer_init(self: Timer, *args, **kwargs) -> None:
    _REPLACED[Timer, "__init__"](self, *args, **kwargs)  # type: ignore[operator]
    self._interval = max(self._interval, MIN_TIMER_INTERVAL)


Timer.__init__ = _timer_init  # type: ignore[method-assign]


# -- strips that make their caches when first used ------------------------------------------------------------
# Textual's Strip.__init__ makes these FIFOCaches (name: size) for every strip.
_STRIP_CACHES = {
    "_divide_cache": 4, "_crop_cache": 16, "_style_cache": 16, "_filter_cache": 4, "_line_length_cache": 4,
    "_crop_extend_cache": 4, "_offsets_cache": 4,
}
_REPLACED[Strip, "__init__"] = Strip.__init__


def _strip_init(self: Strip, segments, cell_length: int | None = None) -> None:
    """Textual's Strip.__init__ without its caches, which `_lazy_cache` makes on first use."""
    self._segments = list(segments)
    self._cell_length = cell_length
    self._render_cache = None
    self._link_ids = None
    self._cell_count = None


def _lazy_cache(name: str, size: int) -> property:
    slot = Strip.__dict__[name]  # the slot's own descriptor: where the cache is kept once made

    def get(self: Strip) -> FIFOCache:
        try:
            return slot.__get__(self, Strip)
        except AttributeError:
            cache: FIFOCache = FIFOCache(size)
            slot.__set__(self, cache)
            return cache

    return property(get, slot.__set__)


for _name, _size in _STRIP_CACHES.items():
    setattr(Strip, _name, _lazy_cache(_name, _size))
Strip.__init__ = _strip_init  # type: ignore[method-assign]


# -- a paste read whole -------------------------------------------------------------------------------------
PASTE_IDLE_S = 2.0  # a paste whose end marker has not come after this long with nothing read ends there


class PasteKeepingParser(XTermParser):
    """Textual's parser of what the terminal sends, but for a bracketed paste: what lies between the
    paste's start and end markers is handed over as one Paste event, as it was pasted, whatever
    escape sequences or line breaks it holds (a text field shows an ESC as ␛: widgets.safe_input).

    Textual's own parser reads a paste's characters one by one, and at an ESC inside it waits for a
    key's sequence: up to 32 characters after each ESC came out as key presses before the paste.

    Textual's parser still reads everything outside a paste, the start marker included, and this
    one follows it: a marker counts only where Textual's does (its characters read within its
    escape delay, not given as keys on a timeout), so the two never disagree on a paste being under
    way. A paste whose end never comes ends after PASTE_IDLE_S with nothing read: the keys work
    again (a terminal sends a paste at once)."""

    def __init__(self, debug: bool = False) -> None:
        super().__init__(debug)
        self._seen = ""  # the last characters Textual's parser was given: a paste's start may span two reads
        self._pasted: list[str] | None = None  # the paste's text so far, while one is under way
        self._tail = ""  # its last characters, held back: the end marker may span two reads
        self._last_read = 0.0  # when the paste's last characters came (Textual's clock)

    def tick(self):
        if self._pasted is not None:
            if get_time() - self._last_read >= PASTE_IDLE_S:
                yield from self._end_paste(self._tail)
            return
        if self._timeout_time is not None and get_time() >= self._timeout_time:
            self._seen = ""  # Textual's parser gives what it held as keys: no marker is under way
        yield from super().tick()

    def feed(self, data: str):
        if not data:  # the end of input
            yield from super().feed(data)
            return
        while data:
            if self._pasted is None:
                seen = self._seen + data
                start = seen.find(BRACKETED_PASTE_START)
                if start < 0:
                    self._seen = seen[-(len(BRACKETED_PASTE_START) - 1):]
                    yield from super().feed(data)
                    return
                cut = start + len(BRACKETED_PASTE_START) - len(self._seen)
                yield from super().feed(data[:cut])  # Textual's parser takes the start marker as its own
                self._seen, self._pasted, data = "", [], data[cut:]
                continue
            self._last_read = get_time()
            text = self._tail + data
            end = text.find(BRACKETED_PASTE_END)
            if end < 0:
                keep = min(len(text), len(BRACKETED_PASTE_END) - 1)
                self._pasted.append(text[: len(text) - keep])
                self._tail = text[len(text) - keep:]
                return
            yield from self._end_paste(text[:end])
            data = text[end + len(BRACKETED_PASTE_END):]

    def _end_paste(self, last: str):
        """The paste as one event (NUL dropped, as Textual does). The end marker ends Textual's paste
        too; what its parser gives for it (an empty Paste) is not passed on."""
        pasted = "".join((*self._pasted, last)).replace("\x00", "")  # type: ignore[misc]  # under way
        self._pasted, self._tail = None, ""
        for _token in super().feed(BRACKETED_PASTE_END):
            pass
        yield events.Paste(pasted)


if linux_driver is not None:
    linux_driver.XTermParser = PasteKeepingParser  # type: ignore[misc]  # the class run_input_thread makes


# -- the key reader: bytes that are not UTF-8, and its own failures ----------------------------------
def _lenient_decoder(encoding: str) -> Callable[[], codecs.IncrementalDecoder]:
    """`codecs.getincrementaldecoder` for Textual's key reader, whose decoder then replaces a byte
    that is not UTF-8 with U+FFFD (a Latin-1 terminal's é, xterm's 8-bit Meta keys, a paste of
    such bytes): Textual's strict one raised UnicodeDecodeError in the key thread, which ended the
    app with a traceback and exit status 0."""
    return functools.partial(codecs.getincrementaldecoder(encoding), errors="replace")


def _run_input_thread(self) -> None:
    """Textual's key thread, whose own failure ends the app through its crash path (one line, the
    traceback in the log, exit status 1) instead of Textual's panic (a traceback, exit status 0)."""
    try:
        self.run_input_thread()
    except OSError:  # the terminal went away (EIO after a hang-up): the app ends, as after SIGHUP
        self._app.call_later(self._app.exit)
    except Exception as error:
        self._app.call_later(self._app._handle_exception, error)


if linux_driver is not None:
    linux_driver.getincrementaldecoder = _lenient_decoder  # what run_input_thread makes its decoder with
    _REPLACED[linux_driver.LinuxDriver, "_run_input_thread"] = linux_driver.LinuxDriver._run_input_thread
    linux_driver.LinuxDriver._run_input_thread = _run_input_thread  # type: ignore[method-assign]


# -- a number kept with its unit at a line break -------------------------------------------------
# A unit after a number and one space, followed by the end, a space or closing punctuation.
_UNIT = r"(?:[KMGT]i?B|B|[mµn]?s|G?FLOPs?|[GT]FLOP|nats|bits?)(?:/[A-Za-z]+)?"
_CLOSING = r"\s)\]}},.;:!?，。；：、）"
# Rich's `_wrap.re_word` (a word and the spaces around it, where `divide_line` may break), with
# "6.1 KiB", "(18.5 ms)" and "47.6 GB/s" each one word: Textual's and Rich's text wrapping broke
# at any space, and a line ending in "6.1" with "KiB" on the next misreads.
_WORD_KEEPING_UNITS = re.compile(rf"\s*(?:\S*\d {_UNIT}(?![^{_CLOSING}])\S*|\S+)\s*")
RICH_RE_WORD = r"\s*\S+\s*"  # the pattern it replaces, at the pinned version (changed_parts checks it)
_RICH_WORD = rich_wrap.re_word
rich_wrap.re_word = _WORD_KEEPING_UNITS  # read by rich._wrap.words, which divide_line calls
