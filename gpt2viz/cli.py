"""Command line: arguments -> the TUI, a headless `--json` trace, or `--replay` of a saved trace."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .crash_log import unexpected_error_line
from .i18n import language_from_env, parse_language, set_language
from .errors import Gpt2VizError, OutputError, SettingError, UsageError
from .batch import MAX_BATCH
from .options import DEFAULT_PROMPT, DEFAULT_TOPK, RunOptions

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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        raise UsageError(f"{message} (see gpt2viz --help)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="gpt2viz",
        description="See, step by step and with real numbers, how GPT-2 turns a prompt into its next token.",
        # No prefix matching: `--prompt` must not quietly mean `--prompt-file`.
        allow_abbrev=False,
    )
    p.add_argument("prompt", nargs="?", help=f'text to run through the model (default: "{DEFAULT_PROMPT}")')
    p.add_argument("--prompt", dest="prompt_option", metavar="TEXT", help="the same, as an option")
    p.add_argument(
        "--prompt-file", metavar="FILE", help="read the prompt from a UTF-8 file ('-' for stdin); a final newline is dropped"
    )
    p.add_argument(
        "--model",
        metavar="M",
        help="'tiny' (bundled), a checkpoint directory, or a hub id such as gpt2 "
        "(default: gpt2 if cached or downloadable, else tiny)",
    )
    p.add_argument("--json", metavar="PATH", dest="json_path", help="write the trace as JSON to PATH ('-' for stdout), no TUI")
    p.add_argument("--replay", metavar="TRACE", help="open a saved trace in the TUI, without a model")
    p.add_argument("--generate", metavar="N", type=int, default=None, help="new tokens to generate (default: 0 with --json, 40 in the app)")
    p.add_argument("--temperature", metavar="T", type=float, default=0.0, help="0 = greedy (default); > 0 samples")
    p.add_argument("--top-k", metavar="K", type=int, default=None, help="sample only from the K most likely tokens")
    p.add_argument("--top-p", metavar="P", type=float, default=None, help="sample only from the nucleus of mass P")
    p.add_argument("--seed", metavar="S", type=int, default=None, help="random seed for sampling (reproducible runs)")
    p.add_argument("--no-cache", action="store_true", help="generate without the KV cache (recompute everything)")
    p.add_argument(
        "--sequences", metavar="B", type=int, default=1,
        help="with --json and --generate: B continuations decoded together, row r sampling with seed + r",
    )
    p.add_argument(
        "--batch-prompt", metavar="TEXT", action="append", default=None, dest="batch_prompts",
        help="with --json and --generate: also continue TEXT in the same batch (repeat for more); prompts of "
        "different lengths are padded on the left with an attention mask",
    )
    p.add_argument(
        "--cost-lab", action="store_true",
        help="with --json: also run the cost lab's three experiments (cache, batch size, number formats) and record them",
    )
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or mps")
    p.add_argument("--dtype", default="float32", help="number format: float32 (default), bfloat16, float16 or int8 (int8 weights, CPU only)")
    p.add_argument(
        "--topk-logits", metavar="K", type=int, default=DEFAULT_TOPK, help=f"top tokens kept per position (default: {DEFAULT_TOPK})"
    )
    p.add_argument(
        "--lang", metavar="LANG", default=None,
        help="language of the app and its messages: en or zh (default: from LC_ALL, LC_MESSAGES or LANG, else en)",
    )
    p.add_argument("--version", action="version", version=f"gpt2viz {_version()}")
    return p


def _version() -> str:
    from . import __version__

    return __version__


def read_prompt_file(name: str) -> str:
    """The text of a prompt file; invalid UTF-8 is an error that says where."""
    try:
        data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"--prompt-file {name}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"--prompt-file {name}: is a directory") from None
    except OSError as err:
        raise UsageError(f"--prompt-file {name}: cannot read ({err.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"--prompt-file {name}: not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})"
        ) from None
    # Editors and `echo` end a file with a newline nobody meant as part of the prompt.
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def choose_language(argv: list[str]) -> None:
    """Sets the language before anything is said, --help included: `--lang` if given (checked),
    else the locale's."""
    code = language_from_env()
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--lang" or arg.startswith("--lang="):
            value = arg.partition("=")[2] if "=" in arg else (argv[i + 1] if i + 1 < len(argv) else "")
            try:
                code = parse_language(value)
            except ValueError:
                raise UsageError(f"--lang {value!r}: choose en or zh") from None
    set_language(code)


def parse_args(argv: list[str] | None) -> RunOptions:
    argv = sys.argv[1:] if argv is None else list(argv)
    choose_language(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    given = [x is not None for x in (args.prompt, args.prompt_option, args.prompt_file)]
    if sum(given) > 1:
        raise UsageError("give the prompt once: as an argument, with --prompt or with --prompt-file")
    if args.prompt_file is not None:
        prompt = read_prompt_file(args.prompt_file)
    else:
        prompt = args.prompt if args.prompt is not None else args.prompt_option
    if prompt is None:
        prompt = DEFAULT_PROMPT
    if args.replay is not None:
        # Everything else describes a run of a model; a replay has none, so nothing may be ignored.
        extra = [
            action.option_strings[0] if action.option_strings else "a prompt"
            for action in parser._actions
            if action.dest not in ("help", "version", "replay") and getattr(args, action.dest) != action.default
        ]
        if extra:
            raise UsageError(f"--replay shows a saved trace, without a model; these do not apply: {', '.join(extra)}")
    if args.generate is not None and args.generate < 0:
        raise UsageError(f"--generate must be >= 0, got {args.generate}")
    if args.sequences != 1:
        if not 1 <= args.sequences <= MAX_BATCH:
            raise UsageError(f"--sequences must be from 1 to {MAX_BATCH}, got {args.sequences}")
        if args.json_path is None:
            raise UsageError("--sequences works with --json (the app's generation view shows one sequence)")
        if not args.generate:
            raise UsageError("--sequences needs --generate N (how many new tokens each sequence gets)")
        if args.no_cache:
            raise UsageError("--sequences decodes through the KV cache; it does not go with --no-cache")
    if args.batch_prompts:
        if args.json_path is None:
            raise UsageError("--batch-prompt works with --json (the app's generation view shows one sequence)")
        if not args.generate:
            raise UsageError("--batch-prompt needs --generate N (how many new tokens each prompt gets)")
        if args.no_cache:
            raise UsageError("--batch-prompt decodes through the KV cache; it does not go with --no-cache")
        if args.sequences != 1:
            raise UsageError("--batch-prompt and --sequences do not go together: one batches prompts, the other "
                             "continuations of one prompt")
        if len(args.batch_prompts) + 1 > MAX_BATCH:
            raise UsageError(f"--batch-prompt: at most {MAX_BATCH - 1} of them (a batch holds {MAX_BATCH} rows)")
        if any(not text for text in args.batch_prompts):
            raise UsageError("--batch-prompt needs a non-empty TEXT")
    if args.cost_lab and args.json_path is None:
        raise UsageError("--cost-lab works with --json (in the app, m opens the cost lab)")
    if args.topk_logits < 1:
        raise UsageError(f"--topk-logits must be >= 1, got {args.topk_logits}")
    options = RunOptions(
        prompt=prompt,
        model=args.model,
        json_path=args.json_path,
        replay=args.replay,
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
    )
    options.sampling()  # checks temperature, top-k, top-p now, before any loading
    from .model.placement import parse_device
    from .model.precision import parse_precision

    parse_precision(options.dtype)
    parse_device(options.device)
    return options


def say(message: str) -> None:
    print(f"gpt2viz: {message}" if not message.startswith("gpt2viz:") else message, file=sys.stderr, flush=True)


def run_headless(options: RunOptions) -> int:
    """Loads the model, records the trace, writes the JSON."""
    from . import load_model
    from .process import freeze_startup_objects
    from .trace import dump, trace_prompt

    start = time.perf_counter()
    lm = load_model(options.model, device=options.device, dtype=options.dtype)
    freeze_startup_objects()
    for notice in lm.notices:
        say(notice)
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
    )
    for notice in trace.notices[len(lm.notices) :]:
        say(notice)
    if options.cost_lab:
        trace.cost_lab = run_cost_lab(lm, trace.all_token_ids)
    try:
        dump(trace, options.json_path)
    except OutputError as err:
        raise OutputError(f"--json {err}") from None
    where = "stdout" if options.json_path == "-" else options.json_path
    n = len(trace.tokens)
    say(f"wrote the trace of {n} token{'' if n == 1 else 's'} to {where} in {time.perf_counter() - start:.1f} s")
    return 0


def run_cost_lab(lm, prompt_ids: list[int]) -> dict:
    """The cost lab's three experiments, each announced on stderr, as the trace's `cost_lab`."""
    from . import cost_lab

    result = cost_lab.new_result(lm)
    say(f"cost lab: this machine streams {result.machine.stream_gb_s:.1f} GB/s and computes "
        f"{result.machine.compute_gflop_s:.0f} GFLOP/s")
    say("cost lab: per-token time against position, without and with the cache")
    result.context = cost_lab.context_sweep(lm, prompt_ids, lm.config.n_ctx)
    say("cost lab: decode step time against batch size")
    result.batch = cost_lab.batch_sweep(lm, prompt_ids)
    say("cost lab: decode step time and quality in each number format")
    result.precision_formats = cost_lab.precision_sweep(lm, prompt_ids)
    return result.to_dict()


def run_tui(options: RunOptions) -> int:
    from .tui.app import run_app
    from .tui.background import busy

    keys_from_the_terminal()
    code, error = run_app(options)
    if error:
        say(f"error: {error}")
    if busy():  # quit while the model was loading or running: do not wait for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def describe(err: Gpt2VizError) -> str:
    """The one line the CLI prints for `err`, naming the flag behind a bad setting."""
    if isinstance(err, SettingError) and err.setting in FLAG_OF_SETTING:
        return f"{FLAG_OF_SETTING[err.setting]} {err.problem}"
    return str(err)


def keys_from_the_terminal() -> None:
    """The TUI reads keys from standard input. When that is a pipe (`... | gpt2viz --prompt-file -`)
    the keys come from the controlling terminal instead, as in `less` or `vim -`."""
    try:
        if os.isatty(0):
            return
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        raise UsageError("standard input is not a terminal, so the TUI cannot read keys; use --json") from None
    os.dup2(tty, 0)
    os.close(tty)


def main(argv: list[str] | None = None) -> int:
    try:
        options = parse_args(argv)
        if options.json_path is not None:
            return run_headless(options)
        return run_tui(options)
    except Gpt2VizError as err:
        say(f"error: {describe(err)}")
        return err.exit_code
    except KeyboardInterrupt:
        say("interrupted; nothing was written")
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (e.g. `| head`); not an error worth a traceback.
        try:
            sys.stdout = None  # type: ignore[assignment]
        finally:
            return 1
    except Exception as err:  # a bug: one line here, the traceback in the log it names
        say(f"error: {unexpected_error_line(err)}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
