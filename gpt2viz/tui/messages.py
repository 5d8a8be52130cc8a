"""App-wide messages: what the loading worker reports, as plain data.

Textual's Message initialises itself in `__post_init__`, so dataclasses need nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from ..trace import Trace


@dataclass(eq=False)
class LoadProgressed(Message):
    """The loading worker finished a step and started the next."""

    step: int
    total: int
    text: str


@dataclass(eq=False)
class DownloadProgressed(Message):
    """A hub download has come this far (gpt2viz.model.sources.DownloadProgress)."""

    progress: object


@dataclass(eq=False)
class TraceRecorded(Message):
    """The forward pass is done; `trace` holds all its numbers (plain data). A pass with parts of
    the model switched off also brings `changes`: the next-token probabilities without and with
    them ({text, before, after} per token, gpt2viz.interventions.prediction_changes)."""

    trace: Trace
    changes: list[dict] | None = None


@dataclass(eq=False)
class LoadFailed(Message):
    """Loading the model or running it failed; `text` says why, in one line."""

    text: str
    exit_code: int = 1
