"""Content laid out when Textual renders it, for the width the widget has then.

A widget that must fit its text to its width (tables padded to columns, lines folded at arrows,
bars as long as the room) is given a `build(width) -> Content` function of plain data, not a
finished text. Textual asks for the height at the width it lays the widget out with, and renders
at that width: there is one drawing pass, nothing waits for a refresh to learn its width, and a
resize is just another width (each built once, then cached).
"""

from __future__ import annotations

from typing import Callable, Union

from textual.content import Content
from textual.geometry import Size
from textual.widget import Widget

Built = Union[Content, str]
Build = Callable[[int], Built]


class Laid(Widget):
    """Shows what `build(width)` makes for its own width (a str is shown as it is, never as markup)."""

    DEFAULT_CSS = """
    Laid {
        height: auto;
        width: 1fr;
    }
    """

    def __init__(self, build: Build | Built | None = None, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._build: Build | None = None
        self._built: tuple[int, Content] | None = None
        if build is not None:
            self._build = build if callable(build) else (lambda width, fixed=build: fixed)

    def show(self, build: Build | Built | None) -> None:
        """Shows `build(width)` from now on (or a fixed text, or nothing for None)."""
        self._build = build if callable(build) or build is None else (lambda width, fixed=build: fixed)
        self._built = None
        self.refresh(layout=True)

    def forget(self) -> None:
        """Builds again at the next layout (what `build` reads besides the width changed), with no
        refresh of its own: for a parent that learns its room while it is being laid out."""
        self._built = None

    def content_for(self, width: int) -> Content:
        """The content at `width` cells (built once per width)."""
        if self._built is not None and self._built[0] == width:
            return self._built[1]
        built = self._build(width) if self._build is not None and width > 0 else ""
        content = Content(built) if isinstance(built, str) else built
        self._built = (width, content)
        return content

    @property
    def content(self) -> Content:
        """The content as laid out at the width the widget has (80 before it has one)."""
        return self.content_for(self.size.width or 80)

    @property
    def plain(self) -> str:
        """The text as laid out at the width the widget has, for reading."""
        return self.content.plain

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        content = self.content_for(width) if width > 0 else Content("")
        return content.get_height(self.styles, width) if content.plain else 0  # nothing: no line

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return self.content_for(container.width).get_optimal_width(self.styles, container.width)

    def render(self) -> Content:
        return self.content_for(self.size.width)
