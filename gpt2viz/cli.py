"""Command line: arguments -> the TUI, a headless `--json` trace, or `--replay` of a saved trace."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rich.cells import cell_len

from .crash_log import unexpected_error_line
from .i18n import N_, MissingCatalog, _, check_catalogs, count, language_from_env, ngettext, parse_language, set_language
from .i18n.layout import wrap_wide
from .errors import DownloadCancelled, Gpt2VizError, OutputError, SettingError, UsageError
from .batch import MAX_BATCH
from .generate import TOP_K_OVER_VOCAB
from .interventions import AblationError, parse_ablations
from .lessons import LESSON_IDS
from .options import DEFAULT_PROMPT, DEFAULT_TOPK, RunOptions
from .input_files import MAX_PROMPT_BYTES, FileRefused, read_limited, read_regular, shown
from .model.config import LIMITS
from . import output_files
from .output_files import STDIN, check_output
from .trace.document import MAX_TOPK
from .text_safety import safe_line

# The flag that sets each setting the core names in its errors (SettingError.setting).
FLAG_OF_SETTING = {
    "temperature": "--temperature",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "seed": "--seed",
    "max_new_tokens": "--generate",
    "dtype": "--dtype",
    "device": "--device",
}


# argparse's own words: the ones this parser can say (usage, --help, its errors), as argparse
# writes them, marked so that Babel extracts them into our catalog. argparse takes them from
# gettext's default domain, for which Python ships no Chinese (no catalogs at all), so a
# Chinese run would print "usage:" and "unrecognized arguments". It looks its `_` and `ngettext`
# up as module globals each time it speaks, so `argparse_in_our_language` points those at our
# catalog while our parser is built and run: every string argparse says goes through one
# catalog, and nothing changes for other parsers or other times. (A HelpFormatter subclass
# could reach the usage prefix only: group titles are set in ArgumentParser.__init__ and errors
# deep inside parse_known_args; a catalog of our own for gettext's global domain would change
# what every other library's gettext calls return.) The placeholders are argparse's, %-style.
ARGPARSE_TEXTS = (
    N_("usage: "),
    N_("positional arguments"),
    N_("options"),
    N_("show this help message and exit"),
    N_("argument %(argument_name)s: %(message)s"),
    N_("expected one argument"),
    N_("ignored explicit argument %r"),
    N_("unrecognized arguments: %s"),
)


@contextmanager
def argparse_in_our_language() -> Iterator[None]:
    """argparse's own texts from our catalog, in the current language, for the duration."""
    saved = argparse._, argparse.ngettext
    argparse._, argparse.ngettext = _, ngettext
    try:
        yield
    finally:
        argparse._, argparse.ngettext = saved


# Set by the process's entry point (gpt2viz.startup), which exits once `main` returns: an interrupt
# that has been answered may then stay ignored to the end. Run in-process (a test), it may not.
ENDS_THE_PROCESS = False


@contextmanager
def _second_interrupt_ignored() -> Iterator[None]:
    """SIGINT ignored for the `with` block: a second Ctrl-C while the first is answered changes
    nothing. When the process ends with `main`, it stays ignored (restoring it would leave a moment
    where a second one raises after the answer); else it is put back. Only the main thread can set
    a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        if not ENDS_THE_PROCESS:
            signal.signal(signal.SIGINT, previous)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        raise UsageError(_("{message} (see gpt2viz --help)").format(message=message))

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """argparse's, with the option a mistyped one was likely meant to be (--generat: --generate)."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            names = [name for name in self._option_string_actions if name.startswith("--")]
            # After '--' every word is an argument, never an option: nothing there was mistyped.
            for word in extra if "--" not in (args or ()) else ():
                if word.startswith("--"):
                    close = difflib.get_close_matches(word.split("=", 1)[0], names, n=1, cutoff=0.75)
                    if close:
                        self.error(_("unrecognized arguments: {arguments}; did you mean {option}?").format(
                            arguments=" ".join(extra), option=close[0]))
            self.error(_("unrecognized arguments: %s") % " ".join(extra))
        return parsed


HEADING_COLON = re.compile(r"^(\S[^\n]*[^\x00-\x7f]):$", re.M)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse lays --help out by characters; a Chinese character takes two terminal cells, so
    this one measures in cells where that shows: wrapped help texts, the usage's indent, and the
    help column after an option whose metavar is Chinese. Text without wide characters is laid
    out by argparse itself, as before."""

    def format_help(self) -> str:
        # argparse writes a section heading's colon itself, half-width; after a Chinese heading
        # ("选项") the full-width one belongs.
        return HEADING_COLON.sub("\\1：", super().format_help())

    def add_argument(self, action) -> None:
        super().add_argument(action)  # makes room for the longest option, counted in characters
        if action.help is not argparse.SUPPRESS:
            width = cell_len(self._format_action_invocation(action)) + self._current_indent
            self._action_max_length = max(self._action_max_length, width)

    def _split_lines(self, text: str, width: int) -> list[str]:
        if cell_len(text) == len(text):
            return super()._split_lines(text, width)
        return wrap_wide(" ".join(text.split()), width).split("\n")

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if cell_len(text) == len(text):
            return super()._fill_text(text, width, indent)
        lines = wrap_wide(" ".join(text.split()), width - len(indent)).split("\n")
        return "\n".join(indent + line for line in lines)

    def _format_usage(self, usage, actions, groups, prefix) -> str:
        # argparse indents the usage's next lines by the prefix's length: give it blanks as wide
        # as the prefix, then put the prefix in their place. It fills lines by characters: narrow
        # the width it fills to until the lines fit in cells.
        prefix = _("usage: ") if prefix is None else prefix
        blank = " " * cell_len(prefix)
        width = self._width
        try:
            text = super()._format_usage(usage, actions, groups, blank)
            while self._width > 20 and any(cell_len(line) > width for line in text.splitlines()):
                self._width -= 1
                text = super()._format_usage(usage, actions, groups, blank)
        finally:
            self._width = width
        return prefix + text[len(blank) :]

    def _format_action(self, action) -> str:
        # argparse pads an option to the help column by characters: take out what wide ones add.
        text = super()._format_action(action)
        start = " " * self._current_indent + self._format_action_invocation(action)
        extra = cell_len(start) - len(start)
        if extra and text.startswith(start + " " * (extra + 2)):
            text = start + text[len(start) + extra :]
        return text


def _plain(text: str) -> str:
    """`text` if it is written in ASCII without digit-group underscores; else ValueError. Python's
    int() and float() also read '٣', '２' and '5_0', which no one means on a command line."""
    if not text.isascii() or "_" in text:
        raise ValueError(text)
    return text


def integer(text: str) -> int:
    """An integer option's value. (Given `type=int`, argparse would name the Python type in its
    error, "invalid int value", which has no translation: this says the same through our catalog.)"""
    try:
        return int(_plain(text))
    except ValueError:
        raise argparse.ArgumentTypeError(_("invalid int value: {value}").format(value=shown(text))) from None


def number(text: str) -> float:
    """A number option's value (see `integer`)."""
    try:
        return float(_plain(text))
    except ValueError:
        raise argparse.ArgumentTypeError(_("invalid float value: {value}").format(value=shown(text))) from None


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser, its texts in the current language (build it after
    `choose_language`, inside `argparse_in_our_language`). Flags and values stay Latin."""
    p = _Parser(
        prog="gpt2viz",
        formatter_class=_HelpFormatter,
        description=_("See, step by step and with real numbers, how GPT-2 turns a prompt into its next token."),
        # No prefix matching: `--prompt` must not quietly mean `--prompt-file`.
        allow_abbrev=False,
    )
    p.add_argument(
        "prompt", nargs="?", metavar=_("prompt"),
        help=_('text to run through the model (default: "{prompt}")').format(prompt=DEFAULT_PROMPT),
    )
    p.add_argument("--prompt", dest="prompt_option", metavar=_("TEXT"), help=_("the same, as an option"))
    p.add_argument(
        "--prompt-file", metavar=_("FILE"),
        help=_("read the prompt from a UTF-8 file ('-' for stdin); a final newline is dropped"),
    )
    p.add_argument(
        "--model",
        metavar="M",
        help=_(
            "'tiny' (bundled), a checkpoint directory, or a hub id such as gpt2 "
            "(default: gpt2 if cached or downloadable, else tiny)"
        ),
    )
    p.add_argument(
        "--json", metavar=_("PATH"), dest="json_path", help=_("write the trace as JSON to PATH ('-' for stdout), no TUI")
    )
    p.add_argument("--replay", metavar=_("TRACE"), help=_("open a saved trace in the TUI, without a model"))
    p.add_argument("--lesson", metavar=_("ID"), choices=LESSON_IDS,
                   help=_("open a guided lesson beside the step-through ({ids})").format(ids=", ".join(LESSON_IDS)))
    p.add_argument(
        "--generate", metavar="N", type=integer, default=None,
        help=_("new tokens to generate (default: 0 with --json, 40 in the app)"),
    )
    p.add_argument("--temperature", metavar="T", type=number, default=0.0, help=_("0 = greedy (default); > 0 samples"))
    p.add_argument("--top-k", metavar="K", type=integer, default=None, help=_("sample only from the K most likely tokens"))
    p.add_argument("--top-p", metavar="P", type=number, default=None, help=_("sample only from the nucleus of mass P"))
    p.add_argument("--seed", metavar="S", type=integer, default=None, help=_("random seed for sampling (reproducible runs)"))
    p.add_argument("--no-cache", action="store_true", help=_("generate without the KV cache (recompute everything)"))
    p.add_argument(
        "--sequences", metavar="B", type=integer, default=1,
        help=_("with --json and --generate: B continuations decoded together, row r sampling with seed + r"),
    )
    p.add_argument(
        "--batch-prompt", metavar=_("TEXT"), action="append", default=None, dest="batch_prompts",
        help=_(
            "with --json and --generate: also continue TEXT in the same batch (repeat for more); prompts of "
            "different lengths are padded on the left with an attention mask"
        ),
    )
    p.add_argument(
        "--verify", action="store_true",
        help=_("check the model against transformers on the prompt (max |Δlogit|, top-1 agreement, 20 greedy "
               "tokens) and exit: 0 when they agree to 1e-4"),
    )
    p.add_argument(
        "--ablate", metavar=_("PART"), action="append", default=None,
        help=_("with --json: switch a part of the model off for every pass (repeat for more): L3H5 a head, "
               "L3.heads, L3.mlp, L3 a whole block, L3.n12,40 MLP neurons at the last position; :mean for "
               "the mean over positions instead of zero"),
    )
    p.add_argument(
        "--cost-lab", action="store_true",
        help=_("with --json: also run the cost lab's three experiments (cache, batch size, number formats) and record them"),
    )
    p.add_argument("--device", default="cpu", metavar=_("DEVICE"), help=_("cpu (default), cuda, cuda:N or mps"))
    p.add_argument(
        "--dtype", default="float32", metavar=_("DTYPE"),
        help=_("number format: float32 (default), bfloat16, float16 or int8 (int8 weights, CPU only)"),
    )
    p.add_argument(
        "--topk-logits", metavar="K", type=integer, default=DEFAULT_TOPK,
        help=_("top tokens kept per position (default: {k})").format(k=DEFAULT_TOPK),
    )
    p.add_argument(
        "--lang", metavar=_("LANG"), default=None,
        help=_("language of the app and its messages: en or zh (default: from LC_ALL, LC_MESSAGES or LANG, else en)"),
    )
    p.add_argument(
        "--version", action="version", version=f"gpt2viz {_version()}", help=_("show program's version number and exit")
    )
    return p


def _version() -> str:
    from . import __version__

    return __version__


def read_prompt_file(name: str) -> str:
    """The text of a prompt file ('-': standard input): a regular file of at most
    MAX_PROMPT_BYTES (gpt2viz.input_files); invalid UTF-8 is an error that says where."""
    try:
        if name != "-":
            data = read_regular(name, MAX_PROMPT_BYTES)
        elif sys.stdin is None:
            raise FileRefused(_("standard input is closed"))
        else:
            data = read_limited(sys.stdin.buffer.read, MAX_PROMPT_BYTES)
    except FileRefused as err:
        raise UsageError(_("--prompt-file {name}: {problem}").format(name=name, problem=err.problem)) from None
    except OSError as err:  # reading standard input
        raise UsageError(_("--prompt-file {name}: cannot read ({error})").format(name=name, error=err.strerror)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            _("--prompt-file {name}: not valid UTF-8 (byte {byte} at offset {offset})").format(
                name=name, byte=f"0x{data[err.start]:02x}", offset=err.start
            )
        ) from None
    # Editors and `echo` end a file with a newline nobody meant as part of the prompt.
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def choose_language(argv: list[str]) -> None:
    """Sets the language before anything is said, --help included: `--lang` if given (checked),
    else the locale's, which is also the language that reports a bad `--lang`."""
    set_language(language_from_env())
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--lang" or arg.startswith("--lang="):
            if arg == "--lang" and i + 1 == len(argv):
                raise UsageError(_("--lang needs a language: en or zh"))
            value = arg.partition("=")[2] if "=" in arg else argv[i + 1]
            try:
                set_language(parse_language(value))
            except ValueError:
                raise UsageError(_("--lang {value!r}: choose en or zh").format(value=value)) from None


def parse_args(argv: list[str] | None) -> RunOptions:
    argv = sys.argv[1:] if argv is None else list(argv)
    choose_language(argv)
    with argparse_in_our_language():
        parser = build_parser()
        args = parser.parse_args(argv)
    given = [x is not None for x in (args.prompt, args.prompt_option, args.prompt_file)]
    if sum(given) > 1:
        raise UsageError(_("give the prompt once: as an argument, with --prompt or with --prompt-file"))
    if args.prompt_file is not None:
        prompt = read_prompt_file(args.prompt_file)
    else:
        prompt = args.prompt if args.prompt is not None else args.prompt_option
    if prompt is None:
        prompt = DEFAULT_PROMPT
    if args.prompt_file is None:
        check_argument_text(prompt, _("the prompt") if args.prompt is not None else "--prompt")
    for text in args.batch_prompts or ():
        check_argument_text(text, "--batch-prompt")
    if args.replay == "":  # '' is no file (the file system would read it as '.', a directory)
        raise UsageError(_("--replay needs the name of a trace file"))
    if args.replay is not None:
        # Everything else but the language describes a run of a model; a replay has none, so
        # nothing may be ignored.
        extra = [
            action.option_strings[0] if action.option_strings else _("a prompt")
            for action in parser._actions
            if action.dest not in ("help", "version", "replay", "lang", "lesson") and getattr(args, action.dest) != action.default
        ]
        if extra:
            raise UsageError(
                _("--replay shows a saved trace, without a model; these do not apply: {options}").format(
                    options=", ".join(extra)
                )
            )
    if args.generate is not None and not 0 <= args.generate <= LIMITS["n_ctx"]:
        # No model gpt2viz loads holds more positions than that.
        raise UsageError(
            _("--generate must be from 0 to {max}, got {value}").format(max=count(LIMITS["n_ctx"]), value=shown(args.generate))
        )
    if args.sequences != 1:
        if not 1 <= args.sequences <= MAX_BATCH:
            raise UsageError(
                _("--sequences must be from 1 to {max}, got {value}").format(max=MAX_BATCH, value=args.sequences)
            )
        if args.json_path is None:
            raise UsageError(_("--sequences works with --json (the app's generation view shows one sequence)"))
        if not args.generate:
            raise UsageError(_("--sequences needs --generate N (how many new tokens each sequence gets)"))
        if args.no_cache:
            raise UsageError(_("--sequences decodes through the KV cache; it does not go with --no-cache"))
    if args.batch_prompts:
        if args.json_path is None:
            raise UsageError(_("--batch-prompt works with --json (the app's generation view shows one sequence)"))
        if not args.generate:
            raise UsageError(_("--batch-prompt needs --generate N (how many new tokens each prompt gets)"))
        if args.no_cache:
            raise UsageError(_("--batch-prompt decodes through the KV cache; it does not go with --no-cache"))
        if args.sequences != 1:
            raise UsageError(
                _(
                    "--batch-prompt and --sequences do not go together: one batches prompts, the other "
                    "continuations of one prompt"
                )
            )
        if len(args.batch_prompts) + 1 > MAX_BATCH:
            raise UsageError(
                _("--batch-prompt: at most {n} of them (a batch holds {rows} rows)").format(n=MAX_BATCH - 1, rows=MAX_BATCH)
            )
        if any(not text for text in args.batch_prompts):
            raise UsageError(_("--batch-prompt needs a non-empty TEXT"))
    if args.verify and (args.json_path is not None or args.generate is not None or args.ablate):
        raise UsageError(_("--verify checks the model and exits; it does not go with --json, --generate or --ablate"))
    if args.ablate and args.json_path is None:
        raise UsageError(_("--ablate works with --json (in the app, interventions are made on the stages)"))
    try:
        ablations = tuple(parse_ablations(args.ablate or []))
    except AblationError as err:
        raise UsageError(_("--ablate {problem}").format(problem=err)) from None
    if args.cost_lab and args.json_path is None:
        # The app's default key: the command line cannot know a key map the app would load.
        raise UsageError(_("--cost-lab works with --json (in the app, {key} opens the cost lab)").format(key="m"))
    if not 1 <= args.topk_logits <= MAX_TOPK:
        # A trace holds at most MAX_TOPK tokens a list; a vocabulary smaller than K gives all of it.
        raise UsageError(
            _("--topk-logits must be from 1 to {max}, got {value}").format(max=count(MAX_TOPK), value=shown(args.topk_logits))
        )
    if args.json_path == "":  # a bad option, not a file gpt2viz could not write
        raise UsageError(_("--json needs a file name (or - for standard output)"))
    if args.lesson is not None and (args.json_path is not None or args.verify):
        raise UsageError(_("--lesson opens the app beside the step-through; it does not apply with --json or --verify"))
    if args.json_path is not None and output_files.names_standard_output(args.json_path):
        args.json_path = "-"  # /dev/stdout and its aliases: written through stdout as it is (`>>` appends)
    if args.json_path is not None:  # before any work: never a file the run reads, never a pipe
        try:
            check_output(args.json_path, prompt_inputs(args.prompt_file))
        except OutputError as err:
            raise OutputError(err.message, f"--json {err.path}", **err.params) from None
    options = RunOptions(
        prompt=prompt,
        prompt_file=args.prompt_file,
        model=args.model,
        json_path=args.json_path,
        replay=args.replay,
        lesson=args.lesson,
        generate=args.generate,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        use_cache=not args.no_cache,
        device=args.device,
        dtype=args.dtype,
        topk_logits=args.topk_logits,
        sequences=args.sequences,
        batch_prompts=tuple(args.batch_prompts or ()),
        cost_lab=args.cost_lab,
        verify=args.verify,
        ablations=ablations,
    )
    options.sampling()  # checks temperature, top-k, top-p now, before any loading
    from .model.placement import parse_device
    from .model.precision import parse_precision

    parse_precision(options.dtype)
    parse_device(options.device)
    return options


def tell(message: str) -> None:
    """One line for the user on stderr, after the program's name. Messages quote what the user
    gave (paths, prompts, model names), so the line is shown by gpt2viz.text_safety's rule: no
    control character reaches the terminal. With stderr closed nothing is said (print would
    write to stdout instead, into a trace written there)."""
    if sys.stderr is None:
        return
    print(f"gpt2viz: {safe_line(message)}", file=sys.stderr, flush=True)


def check_argument_text(text: str, source: str) -> None:
    """Refuses a prompt from the command line that is not text: bytes that are not UTF-8 reach
    Python as lone surrogates (U+DC80 to U+DCFF), which no tokenizer, file or terminal takes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(text[err.start])
        if 0xDC80 <= code <= 0xDCFF:
            offset = len(text[: err.start].encode("utf-8", "surrogateescape"))
            raise UsageError(
                _("{source}: not valid UTF-8 (byte {byte} at offset {offset})").format(
                    source=source, byte=f"0x{code - 0xDC00:02x}", offset=offset
                )
            ) from None
        raise UsageError(
            _("{source}: holds {char}, a lone surrogate, which is not a character").format(source=source, char=f"U+{code:04X}")
        ) from None


def files_read(lm, options: RunOptions) -> list[Path]:
    """The files a run reads: the checkpoint's config, weights (and shard index) and tokenizer,
    and the prompt file."""
    from .model.tokenizer import tokenizer_files
    from .model.weights import find_weight_files

    directory = lm.source.path
    if lm.source.kind in ("gguf", "package"):  # one file holds the config, the weights and the tokenizer
        return [directory] + prompt_inputs(options.prompt_file)
    files = [directory / "config.json", directory / "model.safetensors.index.json"]
    files += find_weight_files(directory) + tokenizer_files(directory)
    return files + prompt_inputs(options.prompt_file)


def prompt_inputs(prompt_file: str | None) -> list:
    """What the run reads its prompt from, for the output check: the prompt file, or standard
    input for '-' (`--prompt-file - --json p.txt < p.txt` would write over its own input)."""
    if prompt_file is None:
        return []
    return [STDIN] if prompt_file == "-" else [Path(prompt_file)]


def write_trace(trace, name: str) -> None:
    """`dump` of the trace to `name`, its failures as OutputError naming --json. Writing to
    standard output fails as a file does (a full disk, /dev/full): one line, and what could not
    be written is dropped rather than tried again at exit."""
    from .trace import dump

    try:
        dump(trace, name)
    except OutputError as err:
        # The flag before the file, as typed: "--json out.json: is a directory".
        raise OutputError(err.message, f"--json {err.path}", **err.params) from None
    except (OSError, ValueError) as err:
        if name != "-":
            raise
        _drop_stdout()
        if isinstance(err, BrokenPipeError):
            raise
        raise OutputError(
            N_("{path}: cannot write to standard output ({error})"), "--json -",
            error=getattr(err, "strerror", None) or str(err),
        ) from None


def _drop_stdout() -> None:
    """Points descriptor 1 at /dev/null and lets sys.stdout flush there: what it still holds is
    dropped, and nothing is tried (and failed) again when Python exits."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass


def standard_descriptors_opened() -> None:
    """Opens /dev/null on descriptors 0, 1 and 2 where they were closed when gpt2viz started
    (Python has already set sys.stdin, sys.stdout or sys.stderr to None for them). Otherwise the
    next file opened would get that number, and whatever a library writes to stderr would go into
    it: a model file, or the trace."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                opened = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)


def load_with_progress(options: RunOptions):
    """Loads the model for a run without the TUI, a download's progress on one stderr line."""
    from . import load_model
    from .download_display import DownloadDisplay
    from .model import package_index

    shown = DownloadDisplay(tell, package_index=options.model == package_index.NAME)
    try:
        lm = load_model(options.model, device=options.device, dtype=options.dtype, progress=shown.report)
    except KeyboardInterrupt:
        shown.finish(completed=False)
        if shown.under_way:  # Ctrl-C stopped a download: its bytes stay in the cache for the next run
            raise DownloadCancelled() from None
        raise
    except BaseException:
        shown.finish(completed=False)
        raise
    shown.finish(completed=True)
    return lm


def run_verify(options: RunOptions) -> int:
    """Loads the model and compares it with transformers on the prompt; 0 when they agree."""
    from .verify import BOUND, verify

    lm = load_with_progress(options)
    ids = lm.encode_prompt(options.prompt) or [lm.eos_id]
    result = verify(lm, ids)
    lines = [
        ngettext("{model} against transformers {version}, float32, over {positions} position:",
                 "{model} against transformers {version}, float32, over {positions} positions:", result.positions).format(
            model=lm.name, version=result.transformers_version, positions=result.positions
        ),
        _("max |Δlogit| {diff} (bound {bound})").format(diff=f"{result.max_abs_diff:.2e}", bound=f"{BOUND:.0e}"),
        ngettext("top-1 agreement {agree} of {positions} position", "top-1 agreement {agree} of {positions} positions",
                 result.positions).format(agree=result.top1_agree, positions=result.positions),
        (_("greedy: the same {n} tokens") if result.ours == result.theirs else _("greedy: different tokens ({n} asked)")).format(
            n=len(result.ours)
        ),
        _("verify: the same model") if result.ok else _("verify: NOT the same model"),
    ]
    if not result.read_by_transformers:
        lines.insert(1, _("(transformers ran on the weights gpt2viz read from the GGUF file: this checks the forward "
                          "pass, not the file's reading)"))
    for line in lines:
        tell(line)
    return 0 if result.ok else 1


def run_headless(options: RunOptions) -> int:
    """Loads the model, records the trace, writes the JSON."""
    from .process import freeze_startup_objects
    from .threads import ThreadPolicy
    from .trace import trace_prompt
    from .trace.notices import notice_text

    start = time.perf_counter()
    # torch's threads follow the CPUs other processes leave free, as in the TUI: two threads on
    # two CPUs that another process keeps half busy made every step of a trace ~10x slower.
    threads = ThreadPolicy()
    lm = load_with_progress(options)
    freeze_startup_objects()
    for notice in lm.notices:
        tell(notice_text(notice))
    check_loaded(lm, options)
    threads.apply()
    try:  # trace_prompt checks the ablations against this model's blocks, heads and neurons first
        trace = trace_prompt(
            lm,
            options.prompt,
            generate_tokens=options.generate or 0,
            settings=options.sampling(),
            use_cache=options.use_cache,
            topk=options.topk_logits,
            quality=True,
            sequences=options.sequences,
            batch_prompts=list(options.batch_prompts),
            ablations=options.ablations,
        )
    except AblationError as err:
        raise UsageError(_("--ablate {problem}").format(problem=err)) from None
    for notice in trace.notices[len(lm.notices) :]:
        tell(notice_text(notice))
    if options.cost_lab:
        trace.cost_lab = run_cost_lab(lm, trace.all_token_ids, threads)
    write_trace(trace, options.json_path)
    tell(wrote_line(trace, options.json_path, time.perf_counter() - start))
    return 0


def wrote_line(trace, path: str, seconds: float) -> str:
    """What the trace holds and where it went: 'wrote the trace of 5 tokens to t.json in 0.4 s',
    with the generated tokens counted apart where it holds a generation (or a batch's rows)."""
    n = len(trace.tokens)
    if trace.batch:
        made = sum(len(row["ids"]) for row in trace.batch["rows"])
    else:
        made = len(trace.generation["ids"]) if trace.generation else 0
    place = {"path": path, "seconds": f"{seconds:.1f}"}
    if made:
        prompt = ngettext("{n} token", "{n} tokens", n).format(n=count(n))
        generated = ngettext("{n} token", "{n} tokens", made).format(n=count(made))
        if path == "-":
            return _("wrote the trace to stdout in {seconds} s: the prompt's {prompt} and {generated} generated").format(
                prompt=prompt, generated=generated, **place)
        return _("wrote the trace to {path} in {seconds} s: the prompt's {prompt} and {generated} generated").format(
            prompt=prompt, generated=generated, **place)
    if path == "-":
        wrote = ngettext(
            "wrote the trace of {n} token to stdout in {seconds} s", "wrote the trace of {n} tokens to stdout in {seconds} s", n
        )
    else:
        wrote = ngettext(
            "wrote the trace of {n} token to {path} in {seconds} s", "wrote the trace of {n} tokens to {path} in {seconds} s", n
        )
    return wrote.format(n=count(n), **place)


def check_loaded(lm, options: RunOptions) -> None:
    """What can be checked only once the model is loaded: --json is none of its files, and
    --top-k is at most its vocabulary (a trace records no more)."""
    try:
        check_output(options.json_path, files_read(lm, options))
    except OutputError as err:
        raise OutputError(err.message, f"--json {err.path}", **err.params) from None
    vocab = lm.config.vocab_size
    if options.top_k is not None and options.top_k > vocab:
        raise UsageError(
            _(TOP_K_OVER_VOCAB).format(setting="--top-k", k=shown(options.top_k), vocab=count(vocab))
        )


def run_cost_lab(lm, prompt_ids: list[int], threads) -> dict:
    """The cost lab's three experiments, each announced on stderr, as the trace's `cost_lab`
    (torch's thread count set by `threads` before each)."""
    from . import cost_lab

    threads.apply()
    result = cost_lab.new_result(lm)
    machine = _("cost lab: this machine streams {gb_s} GB/s and computes {gflop_s} GFLOP/s")
    tell(machine.format(gb_s=f"{result.machine.stream_gb_s:.1f}", gflop_s=f"{result.machine.compute_gflop_s:.0f}"))
    tell(_("cost lab: per-token time against position, without and with the cache"))
    threads.apply()
    result.context = cost_lab.context_sweep(lm, prompt_ids, cost_lab.default_sweep_length(lm.config.n_ctx))
    tell(_("cost lab: decode step time against batch size"))
    threads.apply()
    result.batch = cost_lab.batch_sweep(lm, prompt_ids)
    if lm.config.architecture == "llama":  # no other format to load it in yet
        tell(_("cost lab: no number-format experiment: LLaMA-family models load in float32 only so far"))
    else:
        tell(_("cost lab: decode step time and quality in each number format"))
        threads.apply()
        result.precision_formats = cost_lab.precision_sweep(lm, prompt_ids)
    return result.to_dict()


def run_tui(options: RunOptions) -> int:
    from .tui.app import run_app
    from .tui.jobs import busy

    code, error, note = run_app(options, before_run=keys_from_the_terminal)
    if error:
        tell(_("error: {message}").format(message=error))
    if note:  # not an error: a download the user cancelled
        tell(note)
    if busy():  # quit while the model was loading or running: do not wait for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def describe(err: Gpt2VizError) -> str:
    """The one line the CLI prints for `err`, naming the flag behind a bad setting."""
    if isinstance(err, SettingError):
        return err.naming(FLAG_OF_SETTING.get(err.setting, err.setting))
    return str(err)


def keys_from_the_terminal() -> None:
    """The TUI reads keys from standard input. When that is a pipe (`... | gpt2viz --prompt-file -`)
    the keys come from the controlling terminal instead, as in `less` or `vim -`."""
    try:
        if os.isatty(0):
            return
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        raise UsageError(_("standard input is not a terminal, so the TUI cannot read keys; use --json")) from None
    os.dup2(tty, 0)
    os.close(tty)


def main(argv: list[str] | None = None) -> int:
    standard_descriptors_opened()
    try:
        check_catalogs()  # a broken install says so at once, rather than mixing languages
        options = parse_args(argv)
        if options.verify:
            return run_verify(options)
        if options.json_path is not None:
            return run_headless(options)
        return run_tui(options)
    except DownloadCancelled as err:  # the user's choice, not an error
        tell(str(err))
        return err.exit_code
    except Gpt2VizError as err:
        tell(_("error: {message}").format(message=describe(err)))
        return err.exit_code
    except MissingCatalog as err:  # no catalog to say it in: English, as the error is
        tell(f"error: {err}")
        return err.exit_code
    except KeyboardInterrupt:
        with _second_interrupt_ignored():  # a second Ctrl-C while this is said changes nothing
            if output_files.written:  # the interrupt came once the trace was whole (output_files.signals_held)
                tell(_("interrupted; {path} had been written whole").format(path=output_files.written[-1]))
            else:
                tell(_("interrupted; nothing was written"))
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (e.g. `| head`); not an error worth a traceback.
        try:
            sys.stdout = None  # type: ignore[assignment]
        finally:
            return 1
    except Exception as err:  # a bug: one line here, the traceback in the log it names
        tell(_("error: {message}").format(message=unexpected_error_line(err)))
        return 1


if __name__ == "__main__":
    sys.exit(main())
