"""Base of the Line API pictures: all lines built once per width and data, then served from a cache."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from ...i18n.layout import wrap_lines
from ...text_safety import safe_text


class StripWidget(Widget):
    """A picture drawn line by line; subclasses implement `build_lines(width)`."""

    DEFAULT_CSS = """
    StripWidget {
        height: auto;
        width: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[Strip] = []
        self._lines_key: tuple | None = None

    def build_lines(self, width: int) -> list[Strip]:
        """Every line of the picture at `width` cells."""
        raise NotImplementedError

    def invalidate(self) -> None:
        """Drops the cached lines (new data) and lays the widget out again."""
        self._lines_key = None
        self.refresh(layout=True)

    def lines(self, width: int) -> list[Strip]:
        """The cached lines at `width` in the current theme (their colours are in the strips), built
        if needed. (Keyed by the theme rather than watching the app's: a watcher on the app would
        keep every widget it was set for alive until the theme changed.)"""
        key = (width, self.app.theme)
        if key != self._lines_key:
            self._lines = self.build_lines(width) if width > 0 else []
            self._lines_key = key
        return self._lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines(width))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        lines = self.lines(width)
        if y < len(lines):
            return lines[y].crop_extend(0, width, self.base_style)
        return Strip.blank(width, self.base_style)

    @property
    def base_style(self) -> Style:
        """The widget's own colours, for blank cells."""
        return self.rich_style

    def style_of(self, component: str) -> Style:
        """A component class's style (set in app.tcss), as a Rich style."""
        return self.get_component_rich_style(component)


def text_strips(text: str, width: int, style: Style, indent: int = 0) -> list[Strip]:
    """`text` word-wrapped into strips no wider than `width`, indented where there is room."""
    if indent > width // 3:
        indent = 0
    room = max(8, width - indent)
    return [Strip([Segment(" " * indent + line, style)]) for line in wrap_lines(text, room)]


def fit_strip(segments: list[Segment], width: int) -> list[Strip]:
    """Segments as one strip if they fit in `width`, else split before the widest that would not."""
    strips: list[Strip] = []
    line: list[Segment] = []
    used = 0
    for segment in segments:
        length = segment.cell_length
        if line and used + length > width:
            strips.append(Strip(line))
            line, used = [], 0
        line.append(segment)
        used += length
    if line:
        strips.append(Strip(line))
    return strips


class Prose(StripWidget):
    """Paragraphs of running text, wrapped by terminal cells: Chinese lines break between
    characters (Textual's own wrapping breaks only at spaces, which Chinese has few of)."""

    def __init__(self, text: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.text = safe_text(text)

    def update(self, text: str) -> None:
        """Shows `text` (paragraphs separated by line breaks), by gpt2viz.text_safety's rule: the
        paragraphs quote prompts, tokens and names, and their Segments go to the terminal as they are."""
        self.text = safe_text(text)
        self.invalidate()

    def build_lines(self, width: int) -> list[Strip]:
        style = self.base_style
        return [Strip([Segment(line, style)]) for paragraph in self.text.split("\n") for line in wrap_lines(paragraph, width)]
