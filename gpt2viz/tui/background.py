"""Running model work off the event loop so that quitting never waits for it.

A Textual thread worker cannot be interrupted while torch is busy, and the app's executor joins
its threads at exit. So the worker hands the long call to a daemon thread and only waits for it,
checking every few milliseconds whether it was cancelled: q during loading quits at once.
If that thread is still busy when the app has closed, `run_app` ends the process with `os._exit`
(the terminal is restored by then): letting Python finalise under a running torch call can abort.
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")

POLL_S = 0.05
THREAD_NAME = "gpt2viz-model"


class Cancelled(Exception):
    """The worker was cancelled while the call was still running."""


# One forward pass at a time: a Recorder subscribes to every hook of the model, so two passes
# running together would record each other's events.
MODEL_LOCK = threading.Lock()


def run_detached(call: Callable[[], T], is_cancelled: Callable[[], bool]) -> T:
    """`call()` in a daemon thread; its result, its exception, or Cancelled if we stop waiting."""
    box: dict = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["result"] = call()
        except BaseException as err:  # handed over to the waiting thread
            box["error"] = err
        finally:
            done.set()

    threading.Thread(target=target, name=THREAD_NAME, daemon=True).start()
    while not done.wait(POLL_S):
        if is_cancelled():
            raise Cancelled()
    if "error" in box:
        raise box["error"]
    return box["result"]


def busy() -> bool:
    """Whether a detached model call is still running (its thread outlives a quit)."""
    return any(t.name == THREAD_NAME and t.is_alive() for t in threading.enumerate())


def locked(call: Callable[[], T]) -> Callable[[], T]:
    """`call` wrapped to run under MODEL_LOCK."""

    def run() -> T:
        with MODEL_LOCK:
            return call()

    return run
