"""The app's one model thread: every piece of torch work is a job in its queue.

A job has an id, an owner (a screen, or the session) and a name. Jobs run one after the other in a
single long-lived daemon thread, so two never touch the model at once (a Recorder subscribes to
every hook of it) and no lock is needed. A job speaks only through `deliver`, which hands a
callable to the UI thread; there its progress, its result or its error reaches the owner only if
the job was not cancelled and the owner is still attached. So a screen that is gone never hears of
the work it started, and a result that arrives after a cancel is dropped.

- `stop()` asks a job to end early; the job checks `should_stop()` between its steps and its
  result (what it did so far) still arrives.
- `cancel()` drops the job: it stops too, and nothing of it is delivered any more.
- `detach(owner)` cancels every job of the owner and refuses its new ones (a screen closing).
- Timed work (a generation, the cost lab) hands over with `report_drawn` and starts with
  `until_drawn`: the model thread waits until the UI has drawn and gone quiet, so no drawing is
  timed as the model's. Work of many short pieces (a generation's steps) hands them over in
  batches (`Batches`), so that few of them follow a wait.

An error of a job is put into one line here (`failure_text`: a gpt2viz error's own message, any
other logged with its traceback to the file the line names) and delivered to the job's `on_error`,
or to the service's when it has none.

Quitting never waits for a job: the thread is a daemon, and `busy()` tells the CLI to leave with
`os._exit` while a torch call is under way (letting Python finalise under it can abort).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from ..crash_log import unexpected_error_line
from ..errors import Gpt2VizError
from ..threads import ThreadPolicy

THREAD_NAME = "gpt2viz-model"

Deliver = Callable[[Callable[[], None]], None]
WhenDrawn = Callable[[Callable[[], None]], object]
# How long the model thread waits at most for the UI to draw a report (Job.report_drawn): a UI that
# never draws it (the app leaving) cannot hold the work up for longer.
DRAWN_WAIT_S = 5.0
OnError = Callable[[str, int], None]
# After a drawn report, the model thread waits for the UI to go quiet (JobService._until_quiet): a
# window this long in which the UI's thread used under this share of one CPU, at most this long.
QUIET_WINDOW_S = 0.02
QUIET_SHARE = 0.1
QUIET_MOST_S = 0.1

_services: "weakref.WeakSet[JobService]" = weakref.WeakSet()


class Cancelled(Exception):
    """Raised inside a job's work to end it at once (e.g. from a download's progress callback)."""


def failure_text(err: BaseException) -> tuple[str, int]:
    """What to tell the user about a failed job, in one line, and the exit status it implies. An
    error gpt2viz did not expect is logged with its traceback to a file the line names."""
    if isinstance(err, Gpt2VizError):
        return str(err), err.exit_code
    return unexpected_error_line(err), 1


@dataclass(eq=False)
class Job:
    """One piece of model work. Read its flags from any thread; set them from the UI thread."""

    id: int
    owner: object
    name: str
    work: Callable[["Job"], Any]
    on_result: Callable[[Any], None] | None = None
    on_progress: Callable[..., None] | None = None
    on_error: OnError | None = None
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    _service: "JobService | None" = field(default=None, repr=False)

    def stop(self) -> None:
        """Ends the job at its next step; what it did so far is still delivered."""
        self._stop.set()

    def cancel(self) -> None:
        """Ends the job and drops it: nothing of it is delivered any more."""
        self._cancelled.set()
        self._stop.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def should_stop(self) -> bool:
        """For the work, between its steps: whether to end now (stopped, cancelled or closing)."""
        return self._stop.is_set()

    def check(self) -> None:
        """For the work: raises Cancelled if the job was cancelled (a stop lets it finish)."""
        if self._cancelled.is_set():
            raise Cancelled()

    def report(self, *args: Any) -> None:
        """For the work: hands progress to the owner (on the UI thread, if still wanted)."""
        if self.on_progress is not None and self._service is not None:
            self._service._post(self, self.on_progress, args)

    def report_drawn(self, *args: Any) -> None:
        """For timed work, between the pieces it times: hands progress to the owner as `report`
        does, then waits until the UI has handled it and drawn what it changed, so that the next
        piece is timed while the UI is idle. Drawing holds the GIL for milliseconds at a time; over
        a timed step it is timed as the model's (benchmarks/RESULTS.md: the generation view's step
        times against headless). Returns at once when the job is stopped or the service closed."""
        if self.on_progress is not None and self._service is not None:
            self._service._post(self, self.on_progress, args, drawn=True)

    def until_drawn(self) -> None:
        """For timed work, before its first timed piece: returns once the UI has drawn what it
        changed as it started the job (a view cleared for a new run), as `report_drawn` does."""
        if self._service is not None:
            self._service._post(self, lambda: None, (), drawn=True)


def thread_cpu_clock(thread_id: int) -> Callable[[], float]:
    """The CPU time, in seconds, of the thread `thread_id` (threading.get_ident()), as a function;
    where the system gives no thread's clock to another thread, this process's CPU time."""
    try:
        clock = time.pthread_getcpuclockid(thread_id)
        time.clock_gettime(clock)
    except (AttributeError, OSError, OverflowError):
        return time.process_time
    return lambda: time.clock_gettime(clock)


class Batches:
    """For timed work of many short pieces (a generation's steps): hands them to the owner as lists,
    by `Job.report_drawn`: everything made since the last handover (or since the start) once
    `every_s` seconds have passed since it; `flush()` hands over the rest.

    A handover per piece made the model wait for the UI after every one (a trip through the UI's
    event loop, a draw when one was due, the wait for the UI to go quiet), and a piece timed right
    after such a wait runs slower than one after another piece (its memory caches gone cold;
    benchmarks/RESULTS.md, session 25). In batches, one piece per handover pays it, and a run
    shorter than `every_s` (the bundled model's 40 tokens) has no wait between its pieces. What a
    piece shows waits for the next handover: at most `every_s`, or the time of the piece after it
    when that is longer."""

    def __init__(self, job: "Job", every_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.job = job
        self.every_s = every_s
        self.clock = clock
        self._pending: list[Any] = []
        self._handed = clock()  # when the last handover came back, or the work began

    def add(self, piece: Any) -> None:
        self._pending.append(piece)
        if self.clock() - self._handed >= self.every_s:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            pieces, self._pending = self._pending, []
            self.job.report_drawn(pieces)
        self._handed = self.clock()


class JobService:
    """A queue of jobs and the one thread that runs them."""

    def __init__(self, deliver: Deliver, on_error: OnError, when_drawn: WhenDrawn | None = None) -> None:
        self._deliver = deliver
        # Runs a callable on the UI thread once the screen has drawn all it was asked to (the app's
        # call_when_drawn); without a UI, at once.
        self._when_drawn: WhenDrawn = when_drawn or (lambda call: call())
        self._on_error = on_error
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._ids = itertools.count(1)
        self._jobs: list[Job] = []  # submitted and not yet finished (UI thread)
        self._detached: weakref.WeakSet = weakref.WeakSet()
        self._thread: threading.Thread | None = None
        self._current: Job | None = None
        self._closed = False
        self._threads = ThreadPolicy()  # torch's threads: the CPUs other processes leave free
        _services.add(self)

    # -- the UI thread's side -------------------------------------------------------------------
    def submit(
        self,
        owner: object,
        name: str,
        work: Callable[[Job], Any],
        *,
        on_result: Callable[[Any], None] | None = None,
        on_progress: Callable[..., None] | None = None,
        on_error: OnError | None = None,
        exclusive: bool = True,
    ) -> Job:
        """Queues `work(job)` for the model thread. `exclusive`: the owner's earlier jobs of the
        same name are cancelled first. A detached owner, or a closed service, gets a job that is
        cancelled already and never runs."""
        if exclusive:
            self.cancel(owner, name)
        job = Job(next(self._ids), owner, name, work, on_result, on_progress, on_error, _service=self)
        if self._closed or self._is_detached(owner):
            job.cancel()
            return job
        self._jobs.append(job)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
            self._thread.start()
        self._queue.put(job)
        return job

    def jobs(self, owner: object, name: str | None = None) -> list[Job]:
        """The owner's jobs (of `name`) not yet finished nor cancelled."""
        return [j for j in self._jobs if j.owner is owner and (name is None or j.name == name) and not j.cancelled]

    def running(self, owner: object, name: str | None = None) -> bool:
        """Whether the owner has a job (of `name`) queued or under way."""
        return bool(self.jobs(owner, name))

    def stop(self, owner: object, name: str | None = None) -> None:
        """Asks the owner's jobs (of `name`) to end early; their results still arrive."""
        for job in self.jobs(owner, name):
            job.stop()

    def cancel(self, owner: object, name: str | None = None) -> None:
        """Drops the owner's jobs (of `name`): nothing of them arrives any more."""
        for job in self.jobs(owner, name):
            job.cancel()
        self._forget()

    def detach(self, owner: object) -> None:
        """The owner is gone: its jobs are cancelled and its new ones refused."""
        try:
            self._detached.add(owner)
        except TypeError:  # an owner that cannot be weakly referenced stays attached
            pass
        self.cancel(owner)

    def close(self) -> None:
        """No job runs any more: every job is cancelled and the thread ends after the one under way."""
        self._closed = True
        for job in list(self._jobs):
            job.cancel()
        self._jobs.clear()
        self._queue.put(None)

    @property
    def idle(self) -> bool:
        """Whether no job is queued or under way, nor has a result on its way (UI thread)."""
        return not self._jobs

    @property
    def busy(self) -> bool:
        """Whether the model thread is running a job right now."""
        return self._current is not None

    def _is_detached(self, owner: object) -> bool:
        try:
            return owner in self._detached
        except TypeError:
            return False

    def _forget(self) -> None:
        self._jobs = [j for j in self._jobs if not j.cancelled]

    def _wanted(self, job: Job) -> bool:
        return not job.cancelled and not self._closed and not self._is_detached(job.owner)

    def _post(self, job: Job, callback: Callable[..., None], args: tuple, drawn: bool = False) -> None:
        """From the model thread: `callback(*args)` on the UI thread, if the job is still wanted then;
        `drawn`: returns once the UI has drawn the screen after it and gone quiet (Job.report_drawn)."""
        done = threading.Event() if drawn else None
        ui_thread: list[int] = []

        def call() -> None:
            ui_thread.append(threading.get_ident())
            try:
                if self._wanted(job):
                    callback(*args)
            finally:
                if done is not None:
                    self._when_drawn(done.set)

        if not self._wanted(job):
            return
        try:
            self._deliver(call)
        except RuntimeError:  # the UI's loop is closed: the app has gone
            return
        if done is None:
            return
        deadline = time.monotonic() + DRAWN_WAIT_S
        while not done.wait(0.05):
            if job.should_stop() or self._closed or time.monotonic() > deadline:
                return
        self._until_quiet(job, thread_cpu_clock(ui_thread[0]))

    def _until_quiet(self, job: Job, ui_cpu: Callable[[], float]) -> None:
        """Returns once the UI's thread has gone quiet after `when_drawn`'s callback: the screen has
        nothing left to draw then, but the thread may still be busy with what its flags do not show
        (the rest of that turn of its loop, a garbage collection, a timer of another widget).
        As Textual's own test pilot waits for idle: the model thread sleeps in windows of
        QUIET_WINDOW_S until one in which the UI's thread used under QUIET_SHARE of a CPU (`ui_cpu`:
        its CPU time), and stops waiting once QUIET_MOST_S have passed. The UI's thread alone:
        torch's own threads go on spinning for milliseconds after a product."""
        deadline = time.monotonic() + QUIET_MOST_S
        while not (job.should_stop() or self._closed):
            cpu, start = ui_cpu(), time.monotonic()
            time.sleep(QUIET_WINDOW_S)
            now = time.monotonic()
            if ui_cpu() - cpu < QUIET_SHARE * (now - start) or now > deadline:
                return

    def _finish(self, job: Job, callback: Callable[..., None] | None, args: tuple) -> None:
        """From the model thread: the job's last word, and it leaves the list of jobs."""

        def call() -> None:
            if job in self._jobs:
                self._jobs.remove(job)
            if callback is not None and self._wanted(job):
                callback(*args)

        try:
            self._deliver(call)
        except RuntimeError:
            pass

    # -- the model thread -----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None or self._closed:
                return
            if job.cancelled:
                self._finish(job, None, ())
                continue
            self._current = job
            try:
                self._threads.apply()
                result = job.work(job)
            except Cancelled:
                self._finish(job, None, ())
            except Exception as err:  # noqa: BLE001  (every failure is reported in one place)
                text, code = failure_text(err)
                self._finish(job, job.on_error or self._on_error, (text, code))
            else:
                self._finish(job, job.on_result, (result,) if job.on_result is not None else ())
            finally:
                self._current = None


def busy() -> bool:
    """Whether any app's model thread is running a job now (its thread outlives a quit)."""
    return any(service.busy for service in list(_services))
