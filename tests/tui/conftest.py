"""Fixtures of the TUI tests: the committed trace and a GPT-2-small-shaped one."""

from __future__ import annotations

import pytest

from gpt2viz.trace import Trace, load, trace_prompt
from tui_helpers import TINY_TRACE

PROMPT12 = "The meaning of life is, as everyone knows, not 42"  # 12 tokens


@pytest.fixture(scope="session")
def tiny_trace() -> Trace:
    """The committed trace of the random `tiny` checkpoint (for snapshots)."""
    return load(TINY_TRACE)


@pytest.fixture(scope="session")
def small_trace(ckpts) -> Trace:
    """A 12-token trace of a random checkpoint with GPT-2 small's shape (12 x 12 x 768)."""
    return trace_prompt(ckpts.lm("gpt2-small"), PROMPT12)


@pytest.fixture(scope="session")
def llama_trace(llama_lm) -> Trace:
    """Its trace of a short prompt, with three generated tokens."""
    return trace_prompt(llama_lm, "the cat sat on the mat", generate_tokens=3)
