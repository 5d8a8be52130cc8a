"""Running model work off the event loop so that quitting never waits for it.

A Textual thread worker cannot be interrupted while torch is busy, and the app's executor joins
its threads at exit. So the worker hands the long call to a daemon thread and only waits for it,
checking every few milliseconds whether it was cancelled: q during loading quits at once.
If that thread is still busy when the app has closed, the CLI ends the process with `os._exit`
(the terminal is restored by then): letting Python finalise under a running torch call can abort.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from ..crash_log import unexpected_error_line
from ..errors import Gpt2VizError

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


def failure_text(err: BaseException) -> tuple[str, int]:
    """What to tell the user about a failed run, in one line, and the exit status it implies. An
    error gpt2viz did not expect is logged with its traceback to a file the line names."""
    if isinstance(err, Gpt2VizError):
        return str(err), err.exit_code
    return unexpected_error_line(err), 1


@contextmanager
def reporting(on_failure: Callable[[str, int], None]) -> Iterator[None]:
    """The one way a worker ends on an error: a cancelled run ends quietly; any other error is
    handed to `on_failure` as (one line, exit status) instead of escaping the worker."""
    try:
        yield
    except Cancelled:
        return
    except Exception as err:
        on_failure(*failure_text(err))


def record_pass(
    lm, prompt: str | list[int], topk: int, is_cancelled: Callable[[], bool], decode: bool = False, ablations=()
):
    """The forward pass over `prompt` (with `decode`: the decode step that reads its last id with
    the others cached), recorded under MODEL_LOCK in a model thread and worked out completely
    there (`Trace.resolve_all`), so that a screen only ever reads plain data: the UI thread never
    runs torch work. `ablations` (gpt2viz.interventions) switch parts of the model off."""
    from ..interventions import applied
    from ..trace import trace_decode_step, trace_prompt

    def record():
        if decode:
            with applied(lm.hooks, ablations):
                trace = trace_decode_step(lm, prompt, topk=topk, quality=True)
            trace.interventions = [ablation.spec for ablation in ablations]
            return trace.resolve_all()
        return trace_prompt(lm, prompt, topk=topk, quality=True, ablations=ablations).resolve_all()

    return run_detached(locked(record), is_cancelled)


def measure_changes(lm, ids: list[int], ablations, is_cancelled: Callable[[], bool]) -> list[dict]:
    """How switching `ablations` off moves the next-token probabilities after `ids`, as plain data
    ({text, before, after} per token), worked out in a model thread."""
    from ..interventions import prediction_changes

    def measure():
        display = lm.tokenizer.display
        return [{"text": display(c.token_id), "before": c.before, "after": c.after} for c in prediction_changes(lm, ids, ablations)]

    return run_detached(locked(measure), is_cancelled)
