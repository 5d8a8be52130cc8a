"""The job service and the session, without Textual: one model thread, results only to an owner
that is still attached, nothing of a cancelled job, errors said in one place."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time

import pytest

from gpt2viz.errors import Gpt2VizError
from gpt2viz.tui.jobs import THREAD_NAME, Batches, JobService
from gpt2viz.tui.session import RunFailed, RunStarted, Session, TraceRecorded
from helpers import state_home


class UIThread:
    """Stands for the app's event loop: what the model thread hands over waits here until pumped."""

    def __init__(self) -> None:
        self.calls: queue.Queue = queue.Queue()

    def deliver(self, call) -> None:
        self.calls.put(call)

    def pump(self, until, timeout: float = 30.0) -> None:
        """Runs handed-over calls until `until()` holds."""
        while not until():
            self.calls.get(timeout=timeout)()

    def drain(self, timeout: float = 0.2) -> None:
        try:
            while True:
                self.calls.get(timeout=timeout)()
        except queue.Empty:
            pass


class Owner:
    """A screen, as far as the job service knows."""


@pytest.fixture
def ui():
    return UIThread()


def test_jobs_run_one_after_another_in_one_thread(ui):
    errors = []
    jobs = JobService(ui.deliver, lambda text, code: errors.append(text))
    owner, seen, results = Owner(), [], []
    for n in range(5):
        jobs.submit(owner, f"job{n}", lambda job, n=n: seen.append((n, threading.current_thread().name)) or n,
                    on_result=results.append, exclusive=False)
    ui.pump(lambda: len(results) == 5)
    assert results == [0, 1, 2, 3, 4] and {name for _n, name in seen} == {THREAD_NAME}
    assert jobs.idle and not errors


def test_a_stopped_job_delivers_what_it_did_a_cancelled_one_nothing(ui):
    jobs = JobService(ui.deliver, lambda text, code: None)
    owner, started = Owner(), threading.Event()
    steps, results = [], []

    def work(job):
        started.set()
        done = 0
        while not job.should_stop():
            job.report(done)
            done += 1
            threading.Event().wait(0.001)
        return done

    job = jobs.submit(owner, "count", work, on_result=results.append, on_progress=steps.append)
    started.wait(5)
    ui.pump(lambda: len(steps) >= 3)
    job.stop()
    ui.pump(lambda: results)
    assert results[0] >= 3
    started.clear()
    steps.clear()
    job = jobs.submit(owner, "count", work, on_result=results.append, on_progress=steps.append)
    started.wait(5)
    job.cancel()
    ui.drain()
    assert len(results) == 1 and jobs.idle  # nothing of the cancelled one, and it is gone


def test_a_newer_job_of_the_same_name_replaces_the_older(ui):
    jobs = JobService(ui.deliver, lambda text, code: None)
    owner, gate, results = Owner(), threading.Event(), []
    jobs.submit(owner, "pass", lambda job: gate.wait(5) and "old", on_result=results.append)
    jobs.submit(owner, "pass", lambda job: "new", on_result=results.append)
    gate.set()
    ui.pump(lambda: results)
    ui.drain()
    assert results == ["new"]


def test_a_detached_owner_hears_nothing_more_and_gets_no_new_job(ui):
    jobs = JobService(ui.deliver, lambda text, code: None)
    owner, gate, heard = Owner(), threading.Event(), []
    jobs.submit(owner, "pass", lambda job: gate.wait(5), on_result=heard.append, on_error=lambda t, c: heard.append(t))
    jobs.detach(owner)
    gate.set()
    late = jobs.submit(owner, "pass", lambda job: heard.append("ran"))
    ui.drain()
    assert heard == [] and late.cancelled


def test_errors_are_said_in_one_line_in_one_place(ui, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(state_home(tmp_path)))
    said = []
    jobs = JobService(ui.deliver, lambda text, code: said.append((text, code)))
    owner = Owner()

    def fails(job):
        raise Gpt2VizError("the weights are not there")

    def bug(job):
        raise ZeroDivisionError("oops")

    jobs.submit(owner, "a", fails)
    jobs.submit(owner, "b", bug)
    ui.pump(lambda: len(said) == 2)
    assert said[0] == ("the weights are not there", 1)
    assert said[1][0].startswith("unexpected error, a bug in gpt2viz: ZeroDivisionError: oops") and said[1][1] == 1
    assert "ZeroDivisionError" in (tmp_path / "gpt2viz" / "errors.log").read_text()


def test_the_session_runs_a_prompt_and_a_cancelled_rerun_changes_nothing(ui, tiny_lm):
    events = []
    session = Session(lm=tiny_lm, deliver=ui.deliver, listener=events.append)
    session.run("Hello world")
    assert isinstance(events[0], RunStarted) and not events[0].can_cancel
    ui.pump(lambda: any(isinstance(e, TraceRecorded) for e in events))
    trace = session.trace
    assert trace.prompt == "Hello world" and session.ablations == []
    from gpt2viz.interventions import Ablation

    session.switch_off(Ablation("mlp", 0))
    assert isinstance(events[-1], RunStarted) and events[-1].can_cancel
    session.cancel_run()
    ui.drain()
    assert session.trace is trace and session.ablations == [] and session.jobs.idle
    session.switch_off(Ablation("mlp", 0))
    ui.pump(lambda: session.trace is not trace)
    assert session.trace.interventions == ["L0.mlp"] and session.changes


def test_a_failed_first_run_is_fatal_and_a_later_one_is_not(ui, tmp_path):
    events = []
    session = Session(deliver=ui.deliver, listener=events.append)
    session.options.model = str(tmp_path / "nowhere")
    session.run()
    ui.pump(lambda: any(isinstance(e, RunFailed) for e in events))
    failed = next(e for e in events if isinstance(e, RunFailed))
    assert failed.fatal and failed.exit_code != 0 and "nowhere" in failed.text


def test_the_session_and_the_job_service_import_no_textual():
    code = "import sys, gpt2viz.tui.session, gpt2viz.tui.jobs; print(sorted(m for m in sys.modules if m.startswith('textual')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_drawn_report_returns_only_once_the_ui_has_drawn_it(ui):
    """Timed work (a generation step, a lab measurement) goes on only when the UI is idle again:
    the step handed over, handled, and the screen drawn after it (Job.report_drawn)."""
    refreshed: queue.Queue = queue.Queue()
    jobs = JobService(ui.deliver, lambda text, code: None, when_drawn=refreshed.put)
    order, results = [], []

    def work(job):
        for n in range(3):
            job.report_drawn(n)
            order.append(f"timed {n + 1}")
        return "done"

    jobs.submit(Owner(), "timed", work, on_progress=lambda n: order.append(f"handled {n}"), on_result=results.append)
    for n in range(3):
        ui.calls.get(timeout=30)()  # the step handled; the screen not drawn yet
        assert order[-1] == f"handled {n}"
        threading.Event().wait(0.2)  # the model thread, if it did not wait, would time its next piece now
        assert order[-1] == f"handled {n}"
        refreshed.get(timeout=30)()  # drawn
    ui.pump(lambda: results == ["done"])
    assert order == ["handled 0", "timed 1", "handled 1", "timed 2", "handled 2", "timed 3"]


def test_a_drawn_report_of_a_stopped_job_does_not_wait_for_a_ui_that_never_draws(ui):
    jobs = JobService(ui.deliver, lambda text, code: None, when_drawn=lambda call: None)  # never drawn
    results = []
    job = jobs.submit(Owner(), "timed", lambda job: job.report_drawn(1) or "went on", on_progress=lambda n: None,
                      on_result=results.append)
    ui.calls.get(timeout=30)()
    job.stop()
    ui.pump(lambda: results == ["went on"])


def test_short_pieces_are_handed_over_in_batches_each_drawn_before_the_next_piece(ui):
    """A generation's steps reach the UI as lists: all made since the last handover (or the start)
    once every_s has passed; each list is drawn before the model goes on, and flush hands over the
    rest, in order (jobs.Batches)."""
    refreshed: queue.Queue = queue.Queue()
    jobs = JobService(ui.deliver, lambda text, code: None, when_drawn=refreshed.put)
    now = [0.0]
    order, results = [], []

    def work(job):
        batches = Batches(job, 0.2, clock=lambda: now[0])
        for piece, at in enumerate((0.0, 0.05, 0.1, 0.25, 0.3, 0.35)):
            now[0] = at
            batches.add(piece)
            order.append(f"made {piece}")
        batches.flush()
        return "done"

    jobs.submit(Owner(), "timed", work, on_progress=lambda pieces: order.append(pieces), on_result=results.append)
    for expected in ([0, 1, 2, 3], [4, 5]):
        ui.calls.get(timeout=30)()  # handed over and handled; not drawn yet
        assert order[-1] == expected
        threading.Event().wait(0.1)  # the model thread, if it did not wait for the draw, would go on now
        assert order[-1] == expected
        refreshed.get(timeout=30)()  # drawn
    ui.pump(lambda: results == ["done"])
    assert order == ["made 0", "made 1", "made 2", [0, 1, 2, 3], "made 3", "made 4", "made 5", [4, 5]]


def test_a_drawn_report_waits_until_the_ui_has_finished_drawing(ui, monkeypatch):
    """Textual may paint the screen after `when_drawn`'s callback (its update timer, a frame
    later): the model thread goes on only once the UI's thread has been quiet for a moment."""
    from gpt2viz.tui import jobs as jobs_module

    monkeypatch.setattr(jobs_module, "QUIET_MOST_S", 5.0)  # only quiet ends the wait, however loaded the machine
    painted = threading.Event()
    went_on = []

    def paint():  # on the UI's thread, after the drawn signal: busy, as a paint is
        end = time.thread_time() + 0.05
        while time.thread_time() < end:
            pass
        painted.set()

    def refresh_then_paint(call):
        call()
        ui.deliver(paint)

    jobs = JobService(ui.deliver, lambda text, code: None, when_drawn=refresh_then_paint)

    def work(job):
        job.report_drawn(1)
        went_on.append(painted.is_set())

    jobs.submit(Owner(), "timed", work, on_progress=lambda n: None, on_result=lambda r: None)
    ui.pump(lambda: went_on)
    assert went_on == [True]
