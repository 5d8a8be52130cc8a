"""Untrusted text never reaches the terminal raw (gpt2viz.text_safety): every display helper, on
random strings full of control, bidi and zero-width characters and terminal escape sequences,
and every message the command line writes on stderr."""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz_runner import shared_server, with_env
from helpers import state_home

from gpt2viz.text_safety import (
    EMPTY,
    escaped,
    is_hidden,
    one_cell_mark,
    safe_field,
    safe_line,
    safe_text,
    token_label,
    visible_token,
)

# Escape sequences a hostile prompt, trace or path may carry: set the window title, blink, red,
# write the clipboard (OSC 52), a C1 CSI, leave the alternate screen; bidi overrides and
# isolates, zero-width characters, a lone surrogate, DEL, NUL, line and paragraph separators.
NASTY = [
    "\x1b]0;PWNED\x07",
    "\x1b[5m",
    "\x1b[31m",
    "\x1b[0m",
    "\x1b]52;c;SGVsbG8=\x07",
    "\x9b31m",
    "\x1b[?1049l",
    "\x1bP+q\x1b\\",
    "\x90",
    "\x9d0;T\x9c",
    "\x7f",
    "\x00",
    "\r",
    "\r\n",
    "\n",
    "\t",
    "\x08",
    "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
    "\u2066", "\u2067", "\u2068", "\u2069",
    "\u200e", "\u200f", "\u061c",
    "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad",
    "\u2028", "\u2029",
    "\ud800", "\udfff",
    "\U000e0041",  # a tag character: invisible ASCII smuggling
    "[red]x[/red]", "[@click=app.quit]", "[/]", "[b", "\\",
    "␣", "↵", "\u0301", "\u00a0", "\u3000", "中文", "e\u0301", "\U0001f642",
]
BIDI_AND_ZERO_WIDTH = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u200b\u200c\u200d\u2060\ufeff"

nasty_text = st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=4)), max_size=12).map("".join)


def raw(text: str, allow: str = "") -> list[str]:
    """The characters of `text` that must never reach a terminal as they are."""
    return [ch for ch in text if is_hidden(ch) and ch not in allow]


def test_the_rule_names_what_it_hides():
    for ch in "\x00\x07\x08\x1b\x7f\x80\x9b\x9f\ud800\u2028\u2029" + BIDI_AND_ZERO_WIDTH + "\U000e0041":
        assert is_hidden(ch), hex(ord(ch))
    for ch in " a中é␣↵\u0301\u00a0\u3000\U0001f642[":
        assert not is_hidden(ch), hex(ord(ch))
    assert [escaped(ch) for ch in "\x1b\x9b\u202e\U000e0041"] == ["\\x1b", "\\x9b", "\\u202e", "\\U000e0041"]


def test_examples():
    assert safe_line("Hello \x1b]0;PWNED\x07 \x1b[31mred\x1b[0m") == "Hello \\x1b]0;PWNED\\x07 \\x1b[31mred\\x1b[0m"
    assert safe_line("a\r\nb\nc\rd\te") == "a↵b↵c↵d⇥e"
    assert safe_text("a\r\nb\n\x1b[5mc\td") == "a\nb\n\\x1b[5mc⇥d"
    assert safe_line("abc\u202edef") == "abc\\u202edef"  # the override cannot turn "fed" around
    assert safe_line("[red]x[/red]") == "[red]x[/red]"  # markup is the drawing code's business
    assert safe_line("中文 ok") == "中文 ok"
    assert visible_token(" \x1b") == "␣\\x1b" and visible_token("\u0301") == "◌\u0301"
    assert token_label("") == EMPTY and token_label(" ") == "␣"
    assert one_cell_mark("\x1b") == "␛" and one_cell_mark("\x7f") == "␡" and one_cell_mark("\u202e") == "\ufffd"


def _helpers():
    """Every display helper of the app, as (name, function of one string, characters allowed)."""
    from gpt2viz.model.tokenizer import visible_text
    from gpt2viz.trace.notices import notice_text
    from gpt2viz.tui.formatting import clip, fit, prose, prose_line, quote
    from gpt2viz.tui.styled_text import styled

    return [
        ("safe_line", safe_line, ""),
        ("safe_text", safe_text, "\n"),
        ("safe_field", safe_field, ""),
        ("visible_token", visible_token, ""),
        ("token_label", token_label, ""),
        ("visible_text", visible_text, ""),
        ("clip", lambda s: clip(s, 30), ""),
        ("fit", lambda s: fit(s, 12), ""),
        ("quote", quote, ""),
        ("prose", prose, "\n"),
        ("prose_line", lambda s: prose_line([s, s]), ""),
        ("notice_text (a schema-1 sentence)", notice_text, ""),
        ("notice_text (a parameter)", lambda s: notice_text({"code": "non_finite_weights", "params": {"tensor": s}}), ""),
        ("styled", lambda s: styled("{a} and {b}", "bold", a=s, b=(s, "italic")).plain, ""),
    ]


@settings(max_examples=300, deadline=None)
@given(nasty_text)
def test_no_display_helper_lets_a_hidden_character_through(text):
    for name, helper, allow in _helpers():
        shown = helper(text)
        assert not raw(shown, allow), (name, text, shown)
        assert "\x1b" not in shown and "\x07" not in shown, (name, shown)
    # Hidden characters are shown, not dropped: each leaves its escape in the one-line form.
    shown = safe_line(text)
    for ch in set(text) - set("\r\n\t"):
        if is_hidden(ch):
            assert escaped(ch) in shown, (text, shown)


@settings(max_examples=300, deadline=None)
@given(nasty_text)
def test_the_rule_is_idempotent_and_keeps_what_is_safe(text):
    for rule in (safe_line, safe_text, safe_field, visible_token, token_label):
        assert rule(rule(text)) == rule(text), (rule.__name__, text)
    if not raw(text):
        assert safe_text(text.replace("\r", "").replace("\t", "")) == text.replace("\r", "").replace("\t", "")
    assert token_label(text).strip(), text  # a token never shows as nothing
    assert len(safe_field(text)) == len(text)  # one mark per character: a field's cursor stays put


def test_the_tokenizer_shows_tokens_by_the_same_rule():
    from gpt2viz.model.tokenizer import visible_text

    for text in NASTY + ["", " the", "\ud800x"]:
        assert visible_text(text) == visible_token(text)


def test_text_safety_imports_nothing_of_gpt2viz():
    """Every layer uses it (the core's tokenizer, the trace's notices, the TUI, the CLI)."""
    import gpt2viz.text_safety as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.startswith("gpt2viz") or m == ""], imported


# -- the command line ------------------------------------------------------------------------

ESC_PATH = "x\x1b]0;PWNED\x07\x1b[5m\u202e"


def run_cli(args: list[str], tmp_path: Path, stdin_tty: bool = False) -> tuple[int, bytes]:
    """gpt2viz `args` (stdin a pseudo-terminal when `stdin_tty`), its stderr as bytes."""
    env = {"XDG_STATE_HOME": str(state_home(tmp_path / "state")), "TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": None}
    if not stdin_tty:  # forked from the shared server (tests/fuzz_runner.py), standard input /dev/null
        result = shared_server().run(args, cwd=tmp_path, env=env, timeout=300)
        return result.code, result.stderr_bytes
    import pty

    env = with_env(dict(os.environ), env)
    script = "import sys\nfrom gpt2viz.cli import main\nsys.exit(main(sys.argv[1:]))\n"

    main, child = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script, *args], stdin=child, stdout=child, stderr=subprocess.PIPE, timeout=300, env=env
        )
    finally:
        os.close(main)
        os.close(child)
    return proc.returncode, proc.stderr


def assert_no_raw_escape(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "surrogateescape")
    assert b"\x1b" not in stderr and b"\x07" not in stderr, stderr
    assert not raw(text, "\n"), stderr
    assert "Traceback" not in text, text
    return text


@pytest.mark.parametrize(
    "args",
    [
        ["--model", "/x\x1b]0;T\x07", "--json", "-"],
        ["--model", "gpt2\x1b[5m\u202e", "--json", "-"],
        ["--prompt-file", f"/nonexistent/{ESC_PATH}", "--json", "-"],
        ["--lang", "\x1b[31mzz"],
        ["--generate", "\x1b[5m"],
        ["--temperature", "\x9b31m"],
        ["--ablate", "L\x1b[5m", "--json", "-"],
        ["--device", "cu\x1b]52;c;SGVsbG8=\x07da", "--json", "-"],
        ["--dtype", "\u202efloat32", "--json", "-"],
        ["--replay", "t.json", "\x1b]0;PWNED\x07"],
        ["--no-such-\x1b[5moption"],
    ],
)
def test_cli_errors_never_write_a_raw_escape(tmp_path, args):
    code, stderr = run_cli(args, tmp_path)
    assert code != 0
    text = assert_no_raw_escape(stderr)
    assert text.startswith("gpt2viz: error: ") and text.count("\n") == 1, text


def test_a_replay_path_with_escapes_is_quoted_escaped(tmp_path):
    code, stderr = run_cli(["--replay", str(tmp_path / f"{ESC_PATH}.json")], tmp_path, stdin_tty=True)
    assert code == 1
    text = assert_no_raw_escape(stderr)
    assert "\\x1b]0;PWNED\\x07\\x1b[5m\\u202e.json" in text, text


def test_a_prompt_file_and_a_json_path_with_escapes(tmp_path):
    """A live run: the prompt file holds escape sequences and its path and the output's too."""
    folder = tmp_path / ESC_PATH
    folder.mkdir()
    prompt = folder / "prompt.txt"
    prompt.write_text("Hello \x1b]0;PWNED\x07 \x1b[31mred\x1b[0m world\n", encoding="utf-8")
    out = folder / "trace.json"
    code, stderr = run_cli(["--prompt-file", str(prompt), "--model", "tiny", "--json", str(out)], tmp_path)
    assert code == 0 and out.is_file()
    text = assert_no_raw_escape(stderr)
    assert "\\x1b]0;PWNED\\x07\\x1b[5m\\u202e/trace.json" in text, text
    # A prompt file that cannot be read names its path escaped too.
    code, stderr = run_cli(["--prompt-file", str(folder), "--model", "tiny", "--json", "-"], tmp_path)
    assert code == 2 and "is a directory" in assert_no_raw_escape(stderr)


def test_a_download_bar_shows_the_file_name_escaped():
    from gpt2viz.download_display import DownloadDisplay
    from gpt2viz.model.sources import DownloadProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    said: list[str] = []
    stream = Terminal()
    shown = DownloadDisplay(said.append, stream=stream)
    name = "model\x1b]0;PWNED\x07[red]x[/red].safetensors"
    shown.report(DownloadProgress(name, 10, 100, 10, 100, 1))
    shown.report(DownloadProgress(name, 100, 100, 100, 100, 1))
    shown.finish(completed=True)
    written = stream.getvalue()
    assert "\x1b]0;" not in written and "\x07" not in written and "PWNED" in written
    assert "[red]x[/red]" in written  # not read as markup


def test_a_file_name_that_is_not_utf8_shows_its_bytes(tmp_path):
    """Python holds a byte of a name that is not UTF-8 as a surrogate (U+DC9B for 0x9b): an error
    quotes the name's byte, as `ls -b` would, not Python's stand-in."""
    name = os.fsdecode(b"a\x9bb.json")
    assert safe_line(name) == "a\\x9bb.json" and safe_text(name) == "a\\x9bb.json"
    code, stderr = run_cli(["--replay", name], tmp_path)
    assert code == 1
    assert "a\\x9bb.json: no such file" in assert_no_raw_escape(stderr)
