"""Bad input through the command line: one clear line on stderr, the right exit status, no
traceback, and no file left half-written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzz_runner import shared_server

PROMPT = "The meaning of life is"


def gpt2viz(*args: str, timeout: float = 120, env: dict | None = None, stdin: bytes | None = None):
    """`gpt2viz args` in a process of its own, forked from the shared server (tests/fuzz_runner.py),
    with the environment variables `env` set: (exit status, stderr, stdout bytes)."""
    result = shared_server().run(list(args), stdin=stdin, timeout=timeout, env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result.code, result.stderr, result.stdout


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("gpt2viz: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--temperature", "-0.5"], "--temperature"),
        (["--temperature", "nan"], "--temperature"),
        (["--top-p", "0"], "--top-p"),
        (["--top-p", "1.5"], "--top-p"),
        (["--top-k", "0"], "--top-k"),
        (["--generate", "-3"], "--generate"),
        (["--device", "toaster"], "--device"),
        (["--device", "cuda:7"], "--device"),
        (["--dtype", "int4"], "--dtype"),
        (["--topk-logits", "0"], "--topk-logits"),
        (["--sequences", "3"], "--generate"),  # several sequences of no new tokens
        (["--sequences", "0", "--generate", "2"], "--sequences"),
        (["--sequences", "2", "--generate", "2", "--no-cache"], "--no-cache"),
        (["--temperature", "warm"], "--temperature"),
        (["--no-such-option"], "--no-such-option"),
        (["a", "--prompt-file", "x.txt"], "give the prompt once"),
        (["a", "--prompt", "b"], "give the prompt once"),
        (["--prompt-f", "x.txt"], "--prompt-f"),  # no prefix matching of option names
        (["--replay", "t.json", "--generate", "3"], "--generate"),  # nothing a replay would ignore
        (["--replay", "t.json", "--temperature", "0.7"], "--temperature"),
        (["--replay", "t.json", "a prompt"], "a prompt"),
        (["--replay", ""], "--replay needs the name of a trace file"),  # it said '.: is a directory'
    ],
)
def test_bad_options_exit_2_naming_the_option(args, needle):
    code, stderr, _ = gpt2viz(*args, "--json", "-")
    assert code == 2
    assert needle in one_error_line(stderr)


def test_prompt_as_an_option_equals_the_argument():
    from gpt2viz.cli import parse_args

    assert parse_args(["--prompt", "Hello there"]).prompt == "Hello there"
    assert parse_args(["Hello there"]).prompt == "Hello there"
    assert parse_args([]).prompt == "The meaning of life is"


def test_model_sources_that_cannot_load(tmp_path, tiny_dir):
    cases = {}
    cases["missing"] = tmp_path / "nope"
    empty = tmp_path / "empty"
    empty.mkdir()
    cases["no config"] = empty
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    shutil.copy(tiny_dir / "config.json", no_weights)
    shutil.copy(tiny_dir / "tokenizer.json", no_weights)
    cases["no weights"] = no_weights
    pickled = tmp_path / "pickled"
    shutil.copytree(no_weights, pickled)
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04 not to be unpickled")
    cases["only pytorch_model.bin"] = pickled
    expected = {
        "missing": "no such directory",
        "no config": "config.json",
        "no weights": "no model.safetensors",
        "only pytorch_model.bin": "never unpickles",
    }
    for name, path in cases.items():
        code, stderr, _ = gpt2viz("--model", str(path), "--json", "-")
        assert code == 1, name
        assert expected[name] in one_error_line(stderr), name


def _broken_copies(tmp_path: Path, tiny_dir: Path) -> dict[str, Path]:
    data = (tiny_dir / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    name = next(k for k in header if k != "__metadata__")
    header[name]["data_offsets"][1] += 10**9
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    variants = {
        "truncated": data[: len(data) // 2],
        "garbled header": data[:8] + b"{oops" + data[13:],
        "offsets beyond the file": struct.pack("<Q", len(raw)) + raw + data[8 + n :],
        "empty": b"",
    }
    dirs = {}
    for label, content in variants.items():
        d = tmp_path / label.replace(" ", "-")
        d.mkdir()
        shutil.copy(tiny_dir / "config.json", d)
        shutil.copy(tiny_dir / "tokenizer.json", d)
        (d / "model.safetensors").write_bytes(content)
        dirs[label] = d
    return dirs


def test_broken_safetensors_files(tmp_path, tiny_dir):
    for label, d in _broken_copies(tmp_path, tiny_dir).items():
        code, stderr, _ = gpt2viz("--model", str(d), "--json", "-")
        assert code == 1, label
        assert "safetensors" in one_error_line(stderr), label


def test_unreachable_hub_fails_fast(tmp_path):
    start = time.monotonic()
    code, stderr, _ = gpt2viz(
        "--model", "someone/some-model", "--json", "-", env={"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    )
    assert code == 1
    assert "someone/some-model" in one_error_line(stderr)
    assert time.monotonic() - start < 20


def test_a_cache_that_is_no_directory_is_not_blamed_on_the_hub(tmp_path):
    """HF_HOME=/dev/null (or a file in its place) once read "cannot reach the Hugging Face hub
    (NotADirectoryError)": the hub was never asked."""
    in_the_way = tmp_path / "hf"
    in_the_way.write_text("")
    for home in ("/dev/null", str(in_the_way)):
        code, stderr, _ = gpt2viz("--model", "someone/some-model", "--json", "-",
                                  env={"HF_HOME": home, "HF_ENDPOINT": "http://127.0.0.1:9"})
        line = one_error_line(stderr)
        assert code == 1 and "must be a directory" in line and home in line and "hub (" not in line, line


def test_empty_prompt_starts_from_endoftext(tiny_dir):
    code, stderr, out = gpt2viz("", "--model", str(tiny_dir), "--json", "-")
    assert code == 0
    assert "<|endoftext|>" in stderr
    assert [t["id"] for t in json.loads(out)["tokens"]] == [50256]


def test_prompt_longer_than_the_context_keeps_the_last_tokens(tiny_dir):
    n_ctx = json.loads((tiny_dir / "config.json").read_text())["n_positions"]
    prompt = " hello" * (n_ctx + 20)
    code, stderr, out = gpt2viz(prompt, "--model", str(tiny_dir), "--json", "-", "--generate", "3")
    assert code == 0
    assert f"only the last {n_ctx}" in stderr
    doc = json.loads(out)
    assert len(doc["tokens"]) == n_ctx
    assert doc["generation"]["stop_reason"] == "context"
    assert doc["generation"]["ids"] == []


def test_generation_stops_at_the_context_limit(tiny_dir):
    n_ctx = json.loads((tiny_dir / "config.json").read_text())["n_positions"]
    prompt = " hello" * (n_ctx - 4)
    code, _, out = gpt2viz(prompt, "--model", str(tiny_dir), "--json", "-", "--generate", "50")
    assert code == 0
    gen = json.loads(out)["generation"]
    assert gen["stop_reason"] == "context"
    assert len(gen["ids"]) == 4


def test_prompt_file_with_invalid_utf8_and_control_characters(tmp_path, tiny_dir):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9 au lait")
    code, stderr, _ = gpt2viz("--prompt-file", str(bad), "--model", str(tiny_dir), "--json", "-")
    assert code == 2
    assert "offset 3" in one_error_line(stderr)
    ctrl = tmp_path / "ctrl.txt"
    ctrl.write_text("bell\x07 escape\x1b[31m nul\x00\nend\n", encoding="utf-8")
    code, _, out = gpt2viz("--prompt-file", str(ctrl), "--model", str(tiny_dir), "--json", "-")
    assert code == 0
    doc = json.loads(out)
    assert doc["prompt"] == ctrl.read_text(encoding="utf-8")[:-1]  # the file's final newline is dropped
    texts = "".join(t["text"] for t in doc["tokens"])
    assert "\\x07" in texts and "\\x1b" in texts and "↵" in texts


@pytest.mark.parametrize(
    "content, prompt",
    [("a prompt\n", "a prompt"), ("a prompt\r\n", "a prompt"), ("two\n\n", "two\n"), ("none", "none"), ("\n", "")],
)
def test_prompt_file_drops_one_final_newline(tmp_path, content, prompt):
    from gpt2viz.cli import read_prompt_file

    path = tmp_path / "p.txt"
    path.write_bytes(content.encode("utf-8"))
    assert read_prompt_file(str(path)) == prompt


def test_unwritable_output_paths(tmp_path, tiny_dir):
    a_file = tmp_path / "file"
    a_file.write_text("precious")
    for target, needle in [
        (tmp_path / "no" / "dir" / "t.json", "--json"),
        (a_file / "t.json", "--json"),
        (tmp_path, f"gpt2viz: error: --json {tmp_path}: is a directory"),  # the flag, then the whole sentence
    ]:
        code, stderr, _ = gpt2viz(PROMPT, "--model", str(tiny_dir), "--json", str(target))
        assert code == 1, target
        assert needle in one_error_line(stderr)
    assert a_file.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_full_disk_keeps_the_old_file(tmp_path, tiny_dir, monkeypatch):
    """A write that fails part-way (ENOSPC) leaves the old file and no temporary file."""
    import errno

    from gpt2viz.errors import Gpt2VizError
    from gpt2viz.trace import jsonio

    target = tmp_path / "t.json"
    target.write_text("precious")
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            self.f.write(text[:10])
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonio.os, "fdopen", lambda fd, *a, **k: FullDisk(real_fdopen(fd, *a, **k)))
    with pytest.raises(Gpt2VizError, match="No space left"):
        jsonio.write_atomic(target, "{}" * 1000)
    assert target.read_text() == "precious"
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


def resident_mib(pid: int) -> float:
    """The memory a process holds (0 where /proc does not say)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def test_ctrl_c_during_a_headless_run_exits_130_and_writes_nothing(tmp_path, ckpts):
    # GPT-2 small's shape and a long generation: still running when the interrupt comes.
    model_dir = ckpts.path("gpt2-small")
    target = tmp_path / "t.json"
    target.write_text("precious")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpt2viz", PROMPT, "--model", str(model_dir), "--json", str(target), "--generate", "1000"],
        stderr=subprocess.PIPE,
    )
    # Interrupted once the weights are in memory (the process holds more than GPT-2 small's 474
    # MiB of float32 weights): while it loads or generates, not while Python starts.
    for _ in range(1200):
        if proc.poll() is not None or resident_mib(proc.pid) > 500:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    stderr = err.decode()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    assert target.read_text() == "precious"
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


def test_the_tui_without_a_terminal_says_so(tiny_dir):
    """Keys come from the terminal; with stdin a pipe and no controlling terminal at all
    (a new session), the TUI cannot start and says why instead of ignoring every key."""
    proc = subprocess.run(
        [sys.executable, "-m", "gpt2viz", "--model", str(tiny_dir), "--prompt-file", "-"],
        input=b"a piped prompt\n",
        capture_output=True,
        timeout=60,
        start_new_session=True,
    )
    stderr = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 2
    assert "not a terminal" in one_error_line(stderr)


def test_a_prompt_that_fills_the_context_says_why_nothing_was_generated(tmp_path, tiny_dir):
    prompt = tmp_path / "long.txt"
    prompt.write_text("word " * 400, encoding="utf-8")
    code, stderr, out = gpt2viz("--prompt-file", str(prompt), "--model", str(tiny_dir), "--json", "-", "--generate", "3")
    assert code == 0
    assert json.loads(out)["generation"]["ids"] == []
    assert "generation stopped after 0 of 3 new tokens" in stderr


def test_core_errors_name_settings_and_the_cli_names_its_flags(capsys):
    """The core says what is wrong in its own words; only the CLI knows its flags."""
    from gpt2viz.cli import main
    from gpt2viz.errors import SettingError
    from gpt2viz.generate import SamplingSettings
    from gpt2viz.model.precision import parse_precision

    with pytest.raises(SettingError) as err:
        SamplingSettings(top_k=0)
    assert str(err.value) == "top_k must be an integer >= 1, got 0" and "--" not in str(err.value)
    with pytest.raises(SettingError) as err:
        parse_precision("float64")
    assert err.value.setting == "dtype" and "--" not in str(err.value)
    assert main(["--top-k", "0", "--json", "-"]) == 2
    assert "gpt2viz: error: --top-k must be an integer >= 1, got 0" in capsys.readouterr().err
    assert main(["--dtype", "float64", "--json", "-"]) == 2
    assert "gpt2viz: error: --dtype 'float64' is not supported" in capsys.readouterr().err


def test_an_unexpected_error_is_one_line_naming_its_logged_traceback(tmp_path, monkeypatch, capsys):
    from gpt2viz import cli

    def broken(options):
        raise ZeroDivisionError("a bug")

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(cli, "run_headless", broken)
    assert cli.main(["--json", "-"]) == 1
    err = capsys.readouterr().err.strip()
    log = tmp_path / "gpt2viz" / "errors.log"
    assert err == f"gpt2viz: error: unexpected error, a bug in gpt2viz: ZeroDivisionError: a bug (traceback in {log})"
    assert "Traceback (most recent call last)" in log.read_text(encoding="utf-8")


def test_json_to_standard_output_carries_no_hidden_character_raw(tiny_dir):
    """C1 controls, a bidi override and DEL in the prompt reach `--json -` as \\u escapes (JSON
    escapes only C0 itself): a trace printed onto a terminal cannot control or reorder it. The
    document still reads back to the same prompt, and Chinese stays readable."""
    from gpt2viz.text_safety import is_hidden

    prompt = "a\x85b\x9b31mc\u202ed\x7fe 中文"
    code, stderr, raw = gpt2viz(prompt, "--model", str(tiny_dir), "--json", "-")
    assert code == 0, stderr
    out = raw.decode("utf-8")
    assert not [ch for ch in out if is_hidden(ch) and ch != "\n"], out[:300]
    assert json.loads(out)["prompt"] == prompt and "中文" in out


@pytest.mark.parametrize("args, meant", [(["--generat", "3"], "--generate"), (["--mod", "tiny"], "--model"),
                                         (["--temprature=0.7"], "--temperature"), (["--xyz"], None),
                                         (["--", "--json", "--model", "tiny"], None)])  # after '--': arguments
def test_a_mistyped_option_names_the_one_it_likely_meant(args, meant):
    """One line still, the unknown words as typed, and the option meant where one is close
    (argparse's own prefix matching stays off: --prompt-f above is refused, not taken)."""
    from gpt2viz.cli import parse_args
    from gpt2viz.errors import UsageError
    from gpt2viz.i18n import set_language

    set_language("en")
    with pytest.raises(UsageError) as raised:
        parse_args(["Hi", *args])
    message = str(raised.value)
    typed = [word for word in args if word != "--"]
    assert message.startswith(f"unrecognized arguments: {' '.join(typed)}") and "\n" not in message
    assert (f"did you mean {meant}?" in message) if meant else ("did you mean" not in message)


def test_lang_with_nothing_after_it_asks_for_a_language():
    """'--lang' last used to quote a value nobody typed: "--lang '': choose en or zh"."""
    from gpt2viz.cli import parse_args
    from gpt2viz.errors import UsageError

    with pytest.raises(UsageError, match="^--lang needs a language: en or zh$"):
        parse_args(["Hi", "--lang"])
