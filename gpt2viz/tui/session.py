"""What the app works on, and every command that runs the model: plain Python, no Textual.

A `Session` owns the model, the trace on show, the parts switched off (what if), the cost lab's
result, the generation settings and the check against transformers. Each command that needs the
model (run a prompt, reload it in another number format, switch a part off, verify, generate,
measure, attribute, patch) is a job of its one `JobService` (gpt2viz.tui.jobs): the torch work runs
in the model thread, and what comes back is plain data, worked out completely there
(`Trace.resolve_all`), so the UI thread only reads numbers.

What changes the session itself (a new trace, loading progress, a failed run, a verification) is
told to its listener as a `SessionEvent`, on the UI thread. The work a screen starts (generating,
measuring) is owned by that screen: its results go to the screen's callbacks only while the screen
is attached (`JobService.detach` when it closes).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..errors import DownloadCancelled, Gpt2VizError
from ..i18n import _
from ..interventions import Ablation, applied
from ..options import RunOptions
from ..trace import Trace
from .generation import GenerationSettings
from .jobs import Batches, Deliver, Job, JobService, OnError, WhenDrawn

LOAD_STEPS = 3
PROGRESS_INTERVAL_S = 0.1  # a download reports every piece; the screen hears of it this often


# -- what the session tells its listener -------------------------------------------------------
@dataclass(frozen=True)
class SessionEvent:
    """Something that changed the session (base class)."""


@dataclass(frozen=True)
class RunStarted(SessionEvent):
    """A run of `model` over `prompt` started; `can_cancel`: there is a trace to go back to;
    `in_place`: the same pass again with other parts switched off, shown where the reader is."""

    model: str
    prompt: str
    can_cancel: bool
    in_place: bool = False


@dataclass(frozen=True)
class RunProgressed(SessionEvent):
    """Step `step` of `total` of a run started; `text` says which, in the language of the moment."""

    step: int
    total: int
    text: str


@dataclass(frozen=True)
class DownloadProgressed(SessionEvent):
    """A hub download has come this far (gpt2viz.model.sources.DownloadProgress)."""

    progress: Any


@dataclass(frozen=True)
class TraceRecorded(SessionEvent):
    """A run ended: `trace` is the session's trace now. A pass with parts switched off brings
    `changes`, the next-token probabilities without and with them ({text, before, after} per
    token); `then` names what the run was started for ("generate": back to a generation view)."""

    trace: Trace
    changes: list[dict] | None = None
    then: str | None = None


@dataclass(frozen=True)
class RunFailed(SessionEvent):
    """A run failed; `text` says why in one line. `fatal`: there was no trace yet to go back to."""

    text: str
    exit_code: int
    fatal: bool


@dataclass(frozen=True)
class Verified(SessionEvent):
    """The check against transformers ended (gpt2viz.verify.Verification)."""

    result: Any


@dataclass(frozen=True)
class Failed(SessionEvent):
    """A job with no owner's handler failed (`title` says which kind of work, `text` why)."""

    title: str
    text: str


def throttled(report: Callable[[Any], None], interval_s: float = PROGRESS_INTERVAL_S) -> Callable[[Any], None]:
    """`report` called at most every `interval_s` (a download reports every 256 KiB), and always
    for a file's last bytes."""
    last = [0.0]

    def call(progress) -> None:
        now = time.monotonic()
        if now - last[0] >= interval_s or progress.file_done >= progress.file_total:
            last[0] = now
            report(progress)

    return call


# -- model work: plain functions the jobs call in the model thread -------------------------------
def record_pass(lm, prompt: str | list[int], topk: int, decode: bool = False, ablations=(), prompt_length: int | None = None,
                reserve: int | None = None) -> Trace:
    """The forward pass over `prompt` (with `decode`: the decode step that reads its last id with
    the others cached), recorded and worked out completely (`Trace.resolve_all`), so that a screen
    only ever reads plain data. `ablations` (gpt2viz.interventions) switch parts of the model off.
    A generation step's pass (`prompt_length`: the generation's prompt is `prompt`'s first ids)
    takes a mean ablation's mean from that prompt, as the generation did; its cache allocates
    `reserve` positions, as the generation's did."""
    import torch

    from ..trace import trace_decode_step, trace_prompt

    with applied(lm.hooks, ablations):
        if prompt_length is not None and prompt_length < len(prompt) and any(a.how == "mean" for a in ablations):
            # The prompt's pass first: its means are kept for the passes below (interventions.py;
            # the edits inside trace_prompt's own block then average what is a mean already).
            lm.model(torch.tensor([list(prompt)[:prompt_length]], device=lm.model.device), last_only=True)
        if decode:
            trace = trace_decode_step(lm, prompt, topk=topk, quality=True, reserve=reserve)
            trace.interventions = [ablation.spec for ablation in ablations]
        else:
            trace = trace_prompt(lm, prompt, topk=topk, quality=True, ablations=ablations, reserve=reserve)
    return trace.resolve_all()


def measure_changes(lm, ids: list[int], ablations) -> list[dict]:
    """How switching `ablations` off moves the next-token probabilities after `ids`, as plain data
    ({text, before, after} per token)."""
    from ..interventions import prediction_changes

    display = lm.tokenizer.display
    return [{"text": display(c.token_id), "before": c.before, "after": c.after, "rank": c.rank}
            for c in prediction_changes(lm, ids, ablations)]


class Session:
    """The model, the trace on show and what was done to them; commands that run the model."""

    def __init__(
        self,
        options: RunOptions | None = None,
        lm=None,
        trace: Trace | None = None,
        *,
        deliver: Deliver,
        when_drawn: WhenDrawn | None = None,
        listener: Callable[[SessionEvent], None] = lambda event: None,
    ) -> None:
        self.options = options or RunOptions()
        self.lm = lm
        self.trace = trace
        self.prompt = trace.prompt if trace is not None else self.options.prompt
        self.listener = listener
        self.jobs = JobService(deliver, self._job_failed, when_drawn)
        self.generation_settings = GenerationSettings.from_options(self.options)
        self.ablations: list[Ablation] = []  # parts of the model switched off (what if), in order
        self.changes: list[dict] | None = None  # what they did to the prediction
        self.verification = None  # gpt2viz.verify.Verification, once checked
        self.lab_result = None  # what the cost lab measured (or a replayed trace recorded)
        # What the attribution screen worked out for a trace (its AttributionKept), for the next
        # time it opens on the same trace: a patching run is minutes of work on a large model.
        self.attribution_kept = None
        self.downloading = False  # a hub download is under way
        self.lesson = None  # the lesson under way (tui/lesson_run.py): --lesson, or the palette's
        if self.options.lesson is not None:
            self.start_lesson(self.options.lesson)
        self._stop_download = threading.Event()
        if trace is not None and trace.cost_lab is not None:
            from ..cost_lab import LabResult

            self.lab_result = LabResult.from_dict(trace.cost_lab)

    # -- what it is -------------------------------------------------------------------------------
    def start_lesson(self, lesson_id: str) -> None:
        """Opens lesson `lesson_id` at the page where the learner left it (gpt2viz/lessons)."""
        from ..lessons import load_lesson
        from .lesson_run import LessonRun

        self.lesson = LessonRun.start(load_lesson(lesson_id))

    @property
    def replay_path(self) -> str | None:
        """The trace file being replayed, if this is a replay."""
        return self.options.replay

    @property
    def is_replay(self) -> bool:
        """Whether there is no model to run (a trace given without a model)."""
        return self.lm is None and self.trace is not None

    def replay_name(self, otherwise: str) -> str:
        """The replayed file's name for a sentence, or `otherwise` when there is none."""
        return Path(self.replay_path).name if self.replay_path else otherwise

    @property
    def live(self) -> bool:
        """Whether there is a model to run."""
        return self.lm is not None

    @property
    def running(self) -> bool:
        """Whether a run (load, forward pass) is queued or under way."""
        return self.jobs.running(self, "run")

    def model_name(self) -> str:
        if self.lm is not None:
            return self.lm.name
        if self.options.model:
            return self.options.model
        return _("default: gpt2 if it is cached or downloadable, else the bundled tiny")

    def close(self) -> None:
        """No more model work: every job is dropped (the app is leaving)."""
        self._stop_download.set()
        self.jobs.close()

    def _tell(self, event: SessionEvent) -> None:
        self.listener(event)

    def _job_failed(self, text: str, exit_code: int) -> None:
        self._tell(Failed(_("The run failed"), text))

    # -- runs: the prompt's forward pass, loading the model first if needed ---------------------------
    def run(
        self, prompt: str | None = None, *, reload_from: str | None = None, then: str | None = None, in_place: bool = False
    ) -> Job:
        """Loads the model if needed (again from `reload_from`, in the options' number format, when
        given) and records the forward pass over `prompt` with the parts switched off. A run
        started while another is under way replaces it. `in_place`: the loaded model's pass again,
        which the screens show where the reader is (RunStarted says so)."""
        prompt = self.prompt if prompt is None else prompt
        options, ablations, first = self.options, tuple(self.ablations), self.trace is None
        lm_then = self.lm

        def work(job: Job):
            lm = lm_then
            if lm is None or reload_from is not None:
                job.report(RunProgressed(1, LOAD_STEPS, _("Loading the weights ({dtype})").format(dtype=options.dtype)))
                lm = self._load(job, reload_from if reload_from is not None else options.model)
            job.check()
            job.report(RunProgressed(2, LOAD_STEPS, _("Running the forward pass of {model}").format(model=lm.name)))
            trace = record_pass(lm, prompt, options.topk_logits, ablations=ablations)
            changes = measure_changes(lm, trace.token_ids, ablations) if ablations else None
            job.report(RunProgressed(3, LOAD_STEPS, _("Drawing")))
            return lm, trace, changes

        def done(result) -> None:
            self.downloading = False
            self.lm, self.trace, self.changes = result
            self.attribution_kept = None  # worked out for the pass before: let it and its trace go
            self.prompt = self.trace.prompt
            self._tell(TraceRecorded(self.trace, self.changes, then))

        def failed(text: str, code: int) -> None:
            self.downloading = False
            if not first:
                self.ablations = list(self.trace.ablations)
            self._tell(RunFailed(text, code, fatal=first))

        job = self.jobs.submit(self, "run", work, on_result=done, on_progress=self._tell, on_error=failed)
        name = self.model_name() if reload_from is None else _("{model} in {dtype}").format(
            model=self.model_name(), dtype=options.dtype
        )
        self._tell(RunStarted(name, prompt, can_cancel=not first, in_place=in_place and not first))
        return job

    def _load(self, job: Job, source: str | None):
        """The model from `source`, its download reported (and stopped by a cancel)."""
        from .. import load_model
        options = self.options
        show = throttled(lambda progress: job.report(DownloadProgressed(progress)))

        def progress(p) -> None:  # in the model thread, for each piece of a download
            if self._stop_download.is_set():
                raise DownloadCancelled()
            job.check()
            show(p)

        return load_model(source, device=options.device, dtype=options.dtype, progress=progress)

    def download_progressed(self, progress) -> None:
        """Keeps whether a download is under way (the quit key cancels it then)."""
        self.downloading = progress.done < progress.total

    def cancel_run(self) -> None:
        """Stops a re-run and goes back to the trace on show (and the parts switched off in it)."""
        self.jobs.cancel(self, "run")
        self.downloading = False
        if self.trace is not None:
            self.ablations = list(self.trace.ablations)

    def cancel_download(self) -> None:
        """Stops the hub download at its next piece: the bytes fetched so far stay in the cache."""
        self._stop_download.set()

    # -- what if: parts of the model switched off ---------------------------------------------------
    def switch_off(self, ablation: Ablation) -> Job | None:
        """Records the prompt's pass again with `ablation` switched off too."""
        return self._rerun([*self.ablations, ablation])

    def undo_switch_off(self) -> Job | None:
        return self._rerun(self.ablations[:-1]) if self.ablations else None

    def clear_switched_off(self) -> Job | None:
        return self._rerun([]) if self.ablations else None

    def _rerun(self, ablations: list[Ablation]) -> Job | None:
        if self.lm is None:
            return None
        self.ablations = list(ablations)
        return self.run(self.prompt, in_place=True)

    # -- another number format --------------------------------------------------------------------------
    def reload_in(self, settings: GenerationSettings) -> Job:
        """Loads the model again in `settings.precision`, records the prompt's pass, and asks for a
        generation view with `settings` after it (TraceRecorded.then)."""
        self.generation_settings = settings
        self.options = replace(self.options, dtype=settings.precision)
        source = str(self.lm.source.path) if self.lm is not None else self.options.model
        return self.run(self.prompt, reload_from=source, then="generate")

    def keep_generation_settings(self, settings: GenerationSettings) -> None:
        """The next generation view starts with the settings the user chose last."""
        self.generation_settings = settings

    # -- parity, checked on the user's checkpoint ----------------------------------------------------------
    def verify(self) -> Job | None:
        """gpt2viz against transformers on the prompt (gpt2viz.verify); tells `Verified`."""
        from ..verify import verify

        if self.lm is None or self.trace is None:
            return None
        lm, ids = self.lm, self.trace.all_token_ids

        def done(result) -> None:
            self.verification = result
            self._tell(Verified(result))

        return self.jobs.submit(self, "verify", lambda job: verify(lm, ids), on_result=done)

    # -- the cost lab ---------------------------------------------------------------------------------------
    def keep_lab_result(self, result) -> None:
        self.lab_result = result

    def lab_result_for_model(self):
        """The lab's last result, unless it was measured on the model in another number format."""
        if self.lm is not None and self.lab_result is not None and self.lab_result.precision != self.lm.precision:
            self.lab_result = None
        return self.lab_result

    def measure(
        self,
        owner: object,
        result,
        experiments: tuple[str, ...],
        prompt_ids: list[int],
        length: int,
        *,
        on_progress: Callable[[str, int, int], None],
        on_measured: Callable[[str, Any], None],
        on_end: Callable[[Any], None],
        on_error: OnError,
    ) -> Job:
        """Runs the lab's `experiments` one after the other (first this machine's rates, unless
        `result` has rates measured on a quiet machine). `on_measured(name, value)` gets each;
        stopping ends the experiment under way with what it measured, and no other starts."""
        from .. import cost_lab
        from ..cpu_share import disturbed

        lm = self.lm

        def work(job: Job) -> None:
            job.until_drawn()
            if result is None or disturbed(result.machine):  # rates measured on a busy machine: again
                job.report_drawn("machine", 0, 1)
                job.report("measured", "machine", cost_lab.new_result(lm))
            for name in experiments:
                if job.should_stop():
                    break

                def progress(done: int, total: int, name=name) -> None:
                    job.report_drawn(name, done, total)  # the next piece is timed with the UI idle

                progress(0, 1)
                stop = job.should_stop
                if name == "context":
                    value = cost_lab.context_sweep(lm, prompt_ids, length, on_progress=progress, should_stop=stop)
                elif name == "batch":
                    value = cost_lab.batch_sweep(lm, prompt_ids, on_progress=progress, should_stop=stop)
                else:
                    value = cost_lab.precision_sweep(lm, prompt_ids, on_progress=progress, should_stop=stop)
                job.report("measured", name, value)

        def report(kind: str, *args) -> None:
            if kind == "measured":
                on_measured(*args)
            else:
                on_progress(kind, *args)

        return self.jobs.submit(owner, "measure", work, on_result=on_end, on_progress=report, on_error=on_error)

    # -- generation ---------------------------------------------------------------------------------------
    def generate(
        self,
        owner: object,
        ids: list[int],
        max_new: int,
        settings: GenerationSettings,
        topk: int,
        ablations,
        *,
        rng=None,
        every_s: float,
        on_steps: Callable[[list[dict]], None],
        on_end: Callable[[dict], None],
        on_error: OnError,
        name: str = "generate",
    ) -> Job:
        """Generates up to `max_new` tokens after `ids` with `ablations` switched off; `on_steps`
        gets the steps' plain records, those made since the last handover every `every_s` seconds
        and the rest at the end (jobs.Batches), each list drawn before the next step is timed;
        `on_end` gets the generation's record. Stopping keeps the steps made so far; sampling draws
        from `rng`, so a resumed run goes on where it stopped."""
        from ..trace import record_generation

        lm = self.lm

        def work(job: Job) -> dict:
            job.until_drawn()  # the first step (the prefill) is timed with the UI idle too
            steps = Batches(job, every_s)
            try:
                with applied(lm.hooks, ablations):
                    return record_generation(
                        lm, ids, max_new, settings.sampling, settings.use_cache, topk,
                        on_step=steps.add, should_stop=job.should_stop, generator=rng,
                    )
            finally:
                steps.flush()  # before the generation's record: every step arrives first

        return self.jobs.submit(owner, name, work, on_result=on_end, on_progress=on_steps, on_error=on_error)

    def trace_step(
        self, owner: object, ids: str | list[int], topk: int, decode: bool, ablations, *, prompt_length: int | None,
        on_result: Callable[[Trace], None], on_error: OnError, reserve: int | None = None,
    ) -> Job:
        """Records the forward pass that chose a generation step's token: a decode step's (one new
        position against the cache) or a full pass (a prefill, or a step without the cache), over
        `ids`, whose first `prompt_length` are the generation's prompt (step 0: the prompt itself,
        as text, and no `prompt_length`)."""
        lm = self.lm
        return self.jobs.submit(
            owner, "trace-step",
            lambda job: record_pass(lm, ids, topk, decode=decode, ablations=ablations, prompt_length=prompt_length,
                                    reserve=reserve),
            on_result=on_result, on_error=on_error,
        )

    # -- which parts wrote the answer -----------------------------------------------------------------------
    def attribute(self, owner: object, ids: list[int], token_ids: list[int], *, on_each: Callable[[int, Any], None], on_error: OnError,
                  ablations: tuple[Ablation, ...] = ()) -> Job:
        """Direct logit attribution of each of `token_ids` at the end of `ids`, one after the other,
        with `ablations` switched off (the pass on show: its logits are the ones split)."""
        from ..attribution import direct_logit_attribution

        lm = self.lm

        def work(job: Job) -> None:
            for index, token in enumerate(token_ids):
                if job.should_stop():
                    return
                with applied(lm.hooks, ablations):
                    attribution = direct_logit_attribution(lm, ids, token)
                job.report(index, attribution)

        return self.jobs.submit(owner, "attribute", work, on_progress=on_each, on_error=on_error)

    def detect_heads(self, owner: object, *, on_result: Callable[[Any], None], on_error: OnError,
                     ablations: tuple[Ablation, ...] = ()) -> Job:
        """Scores every head at three known jobs (gpt2viz.head_detector) on DETECTOR_TOKENS random
        tokens repeated once, after the end-of-text token, with `ablations` switched off; the result
        is a `HeadScores`."""
        from ..head_detector import repeated_random_tokens, score_heads

        lm = self.lm

        def work(job: Job):
            tokens = repeated_random_tokens(detector_tokens(lm.config.n_ctx), lm.config.vocab_size, seed=0, first=lm.eos_id)
            with applied(lm.hooks, ablations):
                return score_heads(lm.model, tokens.to(lm.model.device))

        return self.jobs.submit(owner, "detect-heads", work, on_result=on_result, on_error=on_error)

    def patch(
        self,
        owner: object,
        clean: list[int],
        corrupted: list[int],
        *,
        on_progress: Callable[[int, int], None],
        on_result: Callable[[Any], None],
        on_error: OnError,
        ablations: tuple[Ablation, ...] = (),
    ) -> Job:
        """Activation patching of `clean` into `corrupted` at every block and position, every pass
        with `ablations` switched off. The result is a `PatchRun`, None when stopped, or
        `SameAnswer` when both prompts predict one token."""
        from ..patching import PatchingError, patch_residual_stream, residuals

        lm = self.lm

        def work(job: Job):
            with applied(lm.hooks, ablations):
                answer = int(residuals(lm, clean)[1].argmax())
                if int(residuals(lm, corrupted)[1].argmax()) == answer:
                    return SameAnswer(lm.tokenizer.display(answer))
                try:
                    result = patch_residual_stream(lm, clean, corrupted, progress=job.report, cancelled=job.should_stop)
                except PatchingError as err:  # a request patching cannot run: said as it is
                    raise Gpt2VizError(str(err)) from err
            if result is None:
                return None
            answers = (lm.tokenizer.display(result.clean_answer), lm.tokenizer.display(result.corrupted_answer))
            return PatchRun(result, corrupted, answers)

        return self.jobs.submit(owner, "patch", work, on_progress=on_progress, on_result=on_result, on_error=on_error)


# Random tokens the head detector repeats once: 101 positions with the end-of-text token in front,
# under a second on SmolLM2 here.
DETECTOR_TOKENS = 50


def detector_tokens(n_ctx: int) -> int:
    """How many random tokens the detector repeats for a model of context `n_ctx` (both copies and
    the end-of-text token must fit)."""
    return max(1, min(DETECTOR_TOKENS, (n_ctx - 1) // 2))


@dataclass(frozen=True)
class PatchRun:
    """A finished patching run and what it is read with."""

    result: Any  # gpt2viz.patching.PatchingResult
    corrupted_ids: list[int]
    answers: tuple[str, str]  # display texts of the clean and the corrupted answer


@dataclass(frozen=True)
class SameAnswer:
    """Both prompts make the model predict `token`: there is no difference to restore."""

    token: str
