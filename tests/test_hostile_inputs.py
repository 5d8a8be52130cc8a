"""Absurd and hostile inputs through the real command line (issue 19): each class of them ends in
one line on stderr and a non-zero exit, within bounded memory and time, with every input file
unchanged, or, where the input is legal after all, in a clean run.

Each case runs the command line in a process of its own, forked from a server that imported torch
once (tests/fuzz_runner.py; with a standard descriptor closed, a real `python -m gpt2viz`), which
measures the child's own peak memory (os.wait4), caps its address space and kills it past a time
bound, so that a regression fails the test instead of exhausting the machine. The bounds are
generous: a plain run of the bundled model peaks near 300 MB; the cases below used to take 2.5 to
17 GB, or to hang. tests/test_fuzz_cli.py generates many more of each class from a seed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from fuzz_runner import ADDRESS_SPACE, PEAK_BOUND, TIME_BOUND, shared_server
from helpers import random_checkpoint, words

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "assets" / "tiny"

LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-m", "gpt2viz", *sys.argv[2:]])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss * 1024))
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""
class Run:
    def __init__(self, code: int, stderr: str, stdout: bytes, peak: int) -> None:
        self.code, self.stderr, self.stdout, self.peak = code, stderr, stdout, peak

    def error_line(self) -> str:
        """The one line gpt2viz said: exactly one, an error, and no traceback."""
        lines = self.stderr.splitlines()
        assert "Traceback" not in self.stderr, self.stderr
        assert len(lines) == 1 and lines[0].startswith("gpt2viz: error: "), self.stderr
        return lines[0]


def gpt2viz(*args: str | bytes, tmp_path: Path, stdin: bytes | None = b"", close: tuple[int, ...] = (),
            stdout=None, cwd: Path | None = None) -> Run:
    """Runs the CLI in a process of its own; `stdout` a file it writes to instead of a capture
    (/dev/full); `close` lists descriptors (1, 2) closed before it starts: then it is a real
    `python -m gpt2viz`, since what Python makes of a closed descriptor at its start is the point."""
    if close:
        return _launched(args, tmp_path, stdin, close)
    result = shared_server().run(  # a fresh process per run, forked (tests/fuzz_runner.py)
        list(args), cwd=cwd, stdin=stdin, stdout_to=None if stdout is None else stdout.name)
    if result.timed_out:
        pytest.fail(f"gpt2viz {args!r} did not finish within {TIME_BOUND} s")
    assert result.peak < PEAK_BOUND, f"{result.peak / 2**20:.0f} MiB resident for {args!r}"
    return Run(result.code, result.stderr, result.stdout, result.peak)


def _launched(args, tmp_path: Path, stdin: bytes | None, close: tuple[int, ...]) -> Run:
    peak_file = tmp_path / ".peak"

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
        for fd in close:
            os.close(fd)

    stderr_file = tmp_path / ".stderr"
    with open(stderr_file, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, str(peak_file), *args],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=err, preexec_fn=limits, start_new_session=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "",
                 "OMP_NUM_THREADS": "1"},  # errors, memory and hangs are asserted here, not speed
        )
        try:
            out, _ = proc.communicate(stdin, timeout=TIME_BOUND)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"gpt2viz {args!r} did not finish within {TIME_BOUND} s")
    stderr = stderr_file.read_text(encoding="utf-8", errors="replace").strip()
    peak = int(peak_file.read_text())
    assert peak < PEAK_BOUND, f"{peak / 2**20:.0f} MiB resident for {args!r}"
    return Run(proc.returncode, stderr, out or b"", peak)


def digests(*roots: Path) -> dict[str, str]:
    """The sha256 of every regular file under `roots` (links followed), by path."""
    out = {}
    for root in roots:
        for path in sorted([root] if root.is_file() else root.rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def checkpoint(tmp_path: Path, name: str = "ck", config: dict | None = None, tensors: dict | None = None) -> Path:
    """A copy of the bundled model: unchanged files linked, a changed config or tensors written."""
    directory = tmp_path / name
    directory.mkdir()
    for file in ("config.json", "model.safetensors", "tokenizer.json"):
        os.symlink(TINY / file, directory / file)
    if config is not None:
        (directory / "config.json").unlink()
        (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if tensors is not None:
        (directory / "model.safetensors").unlink()
        save_file(tensors, str(directory / "model.safetensors"))
    return directory


def tiny_config() -> dict:
    return json.loads((TINY / "config.json").read_text(encoding="utf-8"))


def tiny_tensors() -> dict[str, torch.Tensor]:
    return load_file(str(TINY / "model.safetensors"))


# -- 1. memory is bounded before anything is built ----------------------------------------------

HUGE_CONFIG_CASES = {
    "n_layer ten million": ({"n_layer": 10**7}, "n_layer"),
    "n_layer within the limit but beyond the file": ({"n_layer": 60}, "n_layer"),
    "a 600k vocabulary": ({"vocab_size": 600_000}, "vocab_size"),
    "n_positions 2**22": ({"n_positions": 2**22}, "n_positions"),
    "n_embd a million": ({"n_embd": 2**20, "n_head": 1}, "n_embd"),
    "n_inner a billion": ({"n_inner": 10**9}, "n_inner"),
    "n_head a million": ({"n_head": 10**6}, "n_head"),
}


@pytest.mark.parametrize("case", sorted(HUGE_CONFIG_CASES))
def test_sizes_config_json_claims_are_checked_before_memory_is_committed(tmp_path, case):
    change, setting = HUGE_CONFIG_CASES[case]
    directory = checkpoint(tmp_path, config={**tiny_config(), **change})
    before = digests(directory)
    run = gpt2viz("--model", str(directory), "--json", str(tmp_path / "t.json"), tmp_path=tmp_path)
    assert run.code == 1
    assert setting in run.error_line()
    assert digests(directory) == before and not (tmp_path / "t.json").exists()


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--topk-logits", "1000000000"], "--topk-logits"),
        (["--topk-logits", "9" * 5000], "--topk-logits"),  # more digits than Python converts
        (["--generate", "1000000000000"], "--generate"),
        (["--top-k", "60000", "--temperature", "1"], "--top-k"),  # beyond the vocabulary of 50,257
    ],
)
def test_counts_are_bounded_by_what_they_can_mean(tmp_path, args, flag):
    run = gpt2viz("--model", "tiny", "--json", str(tmp_path / "t.json"), *args, tmp_path=tmp_path)
    assert run.code == 2
    line = run.error_line()
    assert flag in line and len(line) < 300
    assert not (tmp_path / "t.json").exists()


def test_file_sizes_are_bounded_before_they_are_read(tmp_path):
    """A prompt of more than a megabyte (a file or standard input), a safetensors header that
    claims a terabyte, a shard index listing a hundred thousand tensors."""
    big = tmp_path / "big.txt"
    big.write_bytes(b"word " * 420_000)
    run = gpt2viz("--model", "tiny", "--prompt-file", str(big), "--json", "-", tmp_path=tmp_path)
    assert run.code == 2 and "--prompt-file" in run.error_line() and "bytes" in run.error_line()
    run = gpt2viz("--model", "tiny", "--prompt-file", "-", "--json", "-", stdin=b"word " * 420_000, tmp_path=tmp_path)
    assert run.code == 2 and "--prompt-file -" in run.error_line()

    header = checkpoint(tmp_path, "header")
    (header / "model.safetensors").unlink()
    (header / "model.safetensors").write_bytes((10**12).to_bytes(8, "little") + b"{}" + b"\0" * 1000)
    run = gpt2viz("--model", str(header), "--json", "-", tmp_path=tmp_path)
    assert run.code == 1 and "header" in run.error_line()

    index = checkpoint(tmp_path, "index")
    (index / "model.safetensors").unlink()
    weight_map = {f"h.{i}.x": "model-1.safetensors" for i in range(100_000)}
    (index / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    run = gpt2viz("--model", str(index), "--json", "-", tmp_path=tmp_path)
    assert run.code == 1 and "100,000 tensors" in run.error_line()


# -- 2. inputs are never outputs ------------------------------------------------------------------


def test_no_input_of_the_run_is_ever_written_over(tmp_path):
    directory = tmp_path / "m"
    shutil.copytree(TINY, directory)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Hello", encoding="utf-8")
    os.symlink(directory / "model.safetensors", tmp_path / "link-to-weights")
    os.link(directory / "config.json", tmp_path / "hard-link-to-config")
    before = digests(directory, prompt)
    for target in ("m/model.safetensors", "m/config.json", "m/tokenizer.json", "prompt.txt", "link-to-weights",
                   "hard-link-to-config", "./m/../m/config.json"):
        run = gpt2viz("--model", "m", "--prompt-file", "prompt.txt", "--json", target, tmp_path=tmp_path, cwd=tmp_path)
        assert run.code == 1, target
        assert f"--json {target}" in run.error_line() and "never written over" in run.error_line()
        assert digests(directory, prompt) == before, target
    assert (tmp_path / "link-to-weights").is_symlink()


def test_a_symlink_at_json_is_followed_and_kept(tmp_path):
    """As `> link` in a shell: the file the link points to is written, the link stays a link; a
    dangling link creates its target; a loop of links is refused and left as it is."""
    (tmp_path / "old.json").write_text("old", encoding="utf-8")
    os.symlink("old.json", tmp_path / "link.json")
    os.symlink("new.json", tmp_path / "dangling.json")
    for link, target in (("link.json", "old.json"), ("dangling.json", "new.json")):
        run = gpt2viz("--model", "tiny", "--json", link, tmp_path=tmp_path, cwd=tmp_path)
        assert run.code == 0, run.stderr
        assert (tmp_path / link).is_symlink()
        assert json.loads((tmp_path / target).read_text(encoding="utf-8"))["schema"].startswith("gpt2viz.trace/")
    os.symlink("loop-b", tmp_path / "loop-a")
    os.symlink("loop-a", tmp_path / "loop-b")
    run = gpt2viz("--model", "tiny", "--json", "loop-a", tmp_path=tmp_path, cwd=tmp_path)
    assert run.code == 1 and "loop" in run.error_line()
    assert (tmp_path / "loop-a").is_symlink() and os.readlink(tmp_path / "loop-a") == "loop-b"


# -- 3. only regular files are read; nothing hangs --------------------------------------------


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def test_pipes_devices_and_directories_are_refused_without_blocking(tmp_path):
    def model_with(name: str, make) -> Path:
        directory = checkpoint(tmp_path, f"ck-{len(list(tmp_path.iterdir()))}")
        if (directory / name).is_symlink():
            (directory / name).unlink()
        make(directory / name)
        return directory

    cases = [
        (["--prompt-file", "/dev/zero"], 2, "--prompt-file /dev/zero"),
        (["--prompt-file", str(_fifo(tmp_path / "prompt-fifo"))], 2, "not a regular file"),
        (["--prompt-file", str(tmp_path)], 2, "is a directory"),
        (["--model", str(model_with("config.json", lambda p: os.symlink("/dev/zero", p)))], 1, "config.json"),
        (["--model", str(model_with("config.json", _fifo))], 1, "config.json"),
        (["--model", str(model_with("tokenizer.json", _fifo))], 1, "tokenizer.json"),
        (["--model", str(model_with("tokenizer.json", lambda p: os.symlink("/dev/urandom", p)))], 1, "tokenizer.json"),
        (["--model", str(model_with("model.safetensors", _fifo))], 1, "model.safetensors"),
        (["--model", str(model_with("model.safetensors", lambda p: p.mkdir()))], 1, "is a directory"),
    ]
    index_dev = checkpoint(tmp_path, "index-dev")
    (index_dev / "model.safetensors").unlink()
    os.symlink("/dev/zero", index_dev / "model.safetensors.index.json")
    cases.append((["--model", str(index_dev)], 1, "index.json"))
    for args, code, needle in cases:
        run = gpt2viz(*args, "--json", str(tmp_path / "t.json"), tmp_path=tmp_path)
        assert run.code == code, (args, run.stderr)
        assert needle in run.error_line(), args
    assert not (tmp_path / "t.json").exists()


def test_a_trace_is_never_written_into_a_pipe_or_a_device(tmp_path):
    for target in (str(_fifo(tmp_path / "out-fifo")), "/dev/zero"):
        run = gpt2viz("--model", "tiny", "--json", target, tmp_path=tmp_path)
        assert run.code == 1 and "not a regular file" in run.error_line(), target
    # but /dev/null, the universal discard, as `> /dev/null` does
    run = gpt2viz("--model", "tiny", "--json", "/dev/null", tmp_path=tmp_path)
    assert run.code == 0, run.stderr


# -- 4. no traceback after loading ------------------------------------------------------------


def _wordlevel_without_unk(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"Hello": 0, "world": 1}))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))


def _empty_vocabulary(path: Path) -> None:
    from tokenizers import Tokenizer, models

    Tokenizer(models.BPE({}, [])).save(str(path))


def test_files_that_load_badly_are_one_line(tmp_path):
    tensors = tiny_tensors()
    small = dict(tensors, **{"transformer.wte.weight": tensors["transformer.wte.weight"][:50_000].clone()})
    nested = '{"n_layer": ' + "[" * 100_000 + "]" * 100_000 + "}"
    cases = {
        "a tokenizer bigger than the model": (
            checkpoint(tmp_path, "vocab", config={**tiny_config(), "vocab_size": 50_000}, tensors=small), "50,256"),
        "config.json nested 100,000 deep": (checkpoint(tmp_path, "nested"), "nested too deeply"),
        "a 5,000-digit integer": (checkpoint(tmp_path, "digits"), "thousands of digits"),
        "a 4,000-digit integer": (checkpoint(tmp_path, "digits4000", config={**tiny_config(), "n_layer": int("7" * 4000)}),
                                   "n_layer"),
        "an empty vocabulary": (checkpoint(tmp_path, "empty"), "empty vocabulary"),
    }
    (tmp_path / "nested" / "config.json").unlink()
    (tmp_path / "nested" / "config.json").write_text(nested)
    (tmp_path / "digits" / "config.json").unlink()
    (tmp_path / "digits" / "config.json").write_text('{"n_layer": ' + "7" * 5000 + "}")
    (tmp_path / "empty" / "tokenizer.json").unlink()
    _empty_vocabulary(tmp_path / "empty" / "tokenizer.json")
    for case, (directory, needle) in cases.items():
        before = digests(directory)
        run = gpt2viz("--model", str(directory), "--json", "-", tmp_path=tmp_path)
        assert run.code == 1, case
        line = run.error_line()
        assert needle in line and len(line) < 400, case
        assert digests(directory) == before


@pytest.mark.parametrize(
    "index, needle",
    [
        ("{not json", "not valid JSON"),
        ('{"metadata": {}}', "weight_map"),
        ('{"weight_map": []}', "weight_map"),
        ('{"weight_map": {}}', "weight_map"),
        ('{"weight_map": {"wte.weight": 5}}', "weight_map names 5"),
        ('{"weight_map": {"wte.weight": "../../../etc/passwd"}}', "not the name of a file beside the index"),
        ('{"weight_map": {"wte.weight": "/dev/zero"}}', "not the name of a file beside the index"),
        ('{"weight_map": {"wte.weight": "' + "x" * 300 + '"}}', "not the name of a file beside the index"),
        ('{"weight_map": {"wte.weight": "model-2.safetensors"}}', "missing"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_a_broken_shard_index_is_one_line(tmp_path, index, needle):
    directory = checkpoint(tmp_path)
    (directory / "model.safetensors").unlink()
    (directory / "model.safetensors.index.json").write_text(index, encoding="utf-8")
    run = gpt2viz("--model", str(directory), "--json", "-", tmp_path=tmp_path)
    assert run.code == 1
    assert "model.safetensors.index.json" in run.error_line() and needle in run.error_line()


def test_a_tokenizer_that_cannot_encode_the_prompt_is_one_line(tmp_path):
    directory = checkpoint(tmp_path)
    (directory / "tokenizer.json").unlink()
    _wordlevel_without_unk(directory / "tokenizer.json")
    run = gpt2viz("--model", str(directory), "--json", "-", "Hello there", tmp_path=tmp_path)
    assert run.code == 1
    assert "tokenizer.json" in run.error_line() and "cannot encode" in run.error_line()


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--seed", str(2**64)], "--seed"),
        (["--seed", "-1"], "--seed"),
        (["--seed", "9" * 5000], "--seed"),
        (["--temperature", "1e400"], "--temperature"),  # inf
        (["--temperature", "1e300"], "--temperature"),  # beyond what a trace records
        ([b"caf\xff"], "not valid UTF-8 (byte 0xff at offset 3)"),  # a prompt that is not UTF-8
        ([b"a\xed\xa0\x80"], "not valid UTF-8 (byte 0xed at offset 1)"),  # a lone surrogate, U+D800 in CESU-8
        (["--prompt", b"\xc3"], "--prompt: not valid UTF-8"),
        (["--batch-prompt", b"a\x80", "--generate", "1"], "--batch-prompt: not valid UTF-8"),
    ],
)
def test_options_that_used_to_crash_later_are_refused_first(tmp_path, args, flag):
    run = gpt2viz("--model", "tiny", "--json", "-", *args, tmp_path=tmp_path)
    assert run.code == 2
    assert flag in run.error_line() and len(run.error_line()) < 300


@pytest.mark.parametrize(
    "args",
    [
        ["--temperature", "1e-310", "--generate", "4"],  # a subnormal temperature: all but the best -> 0
        ["--temperature", "1", "--top-p", "1e-10", "--generate", "4"],  # a nucleus of one token
        ["--temperature", "1000000", "--top-k", "50257", "--generate", "2", "--seed", str(2**63 - 1)],
    ],
)
def test_extreme_but_legal_sampling_settings_run(tmp_path, args):
    run = gpt2viz("--model", "tiny", "--json", "-", *args, tmp_path=tmp_path)
    assert run.code == 0, run.stderr
    assert "Traceback" not in run.stderr
    generation = json.loads(run.stdout)["generation"]
    assert len(generation["ids"]) == int(args[args.index("--generate") + 1])
    if "1e-310" in args or "1e-10" in args:  # both take the most likely token: greedy's choice
        greedy = gpt2viz("--model", "tiny", "--json", "-", "--generate", "4", tmp_path=tmp_path)
        assert generation["ids"] == json.loads(greedy.stdout)["generation"]["ids"]


@pytest.mark.parametrize("sampling", [[], ["--temperature", "0.8", "--seed", "1"]])
def test_nan_weights_stop_generation_with_one_line(tmp_path, sampling):
    tensors = tiny_tensors()
    tensors["transformer.h.3.mlp.c_fc.weight"][0, 0] = float("nan")
    directory = checkpoint(tmp_path, tensors=tensors)
    run = gpt2viz("--model", str(directory), "--json", str(tmp_path / "t.json"), "--generate", "3", *sampling,
                  tmp_path=tmp_path)
    assert run.code == 1
    notice, error = run.stderr.splitlines()  # the load's notice names the tensor, then the error
    assert "h.3.mlp.c_fc.weight" in notice
    assert error.startswith("gpt2viz: error: ") and "NaN" in error and "Traceback" not in run.stderr
    assert not (tmp_path / "t.json").exists()


def test_names_longer_than_the_file_system_allows(tmp_path):
    long = "x" * 300
    for args, code in (
        (["--model", long], 1),
        (["--model", str(tmp_path / long)], 1),
        (["--prompt-file", str(tmp_path / long)], 2),
        (["--json", str(tmp_path / long)], 1),
    ):
        run = gpt2viz(*args, *([] if "--json" in args else ["--json", "-"]), tmp_path=tmp_path)
        assert run.code == code, args
        assert "too long" in run.error_line() or "longer than" in run.error_line(), args
    # 255 bytes is a name the file system takes: the trace's temporary name beside it fits too.
    longest = tmp_path / ("y" * 255)
    assert gpt2viz("--model", "tiny", "--json", str(longest), tmp_path=tmp_path).code == 0 and longest.stat().st_size > 0


def test_standard_output_that_cannot_be_written(tmp_path):
    with open("/dev/full", "wb") as full:
        run = gpt2viz("--model", "tiny", "--json", "-", tmp_path=tmp_path, stdout=full)
    assert run.code == 1 and "--json -" in run.error_line() and "No space left" in run.error_line()
    run = gpt2viz("--model", "tiny", "--json", "-", tmp_path=tmp_path, close=(1,))
    assert run.code == 1 and "standard output is closed" in run.error_line()


def test_with_stderr_closed_stdout_holds_only_the_trace(tmp_path):
    run = gpt2viz("--model", "tiny", "--json", "-", "--generate", "2", tmp_path=tmp_path, close=(2,))
    assert run.code == 0 and run.stderr == ""
    assert b"wrote the trace" not in run.stdout
    assert len(json.loads(run.stdout)["generation"]["ids"]) == 2


# -- 5. small lies --------------------------------------------------------------------------


def test_messages_name_the_real_problem(tmp_path):
    run = gpt2viz("--model", "tiny", "--json", "", tmp_path=tmp_path, cwd=tmp_path)
    assert run.code == 2 and 'needs a file name' in run.error_line()
    run = gpt2viz("--model", "tiny", "--json", "newdir/", tmp_path=tmp_path, cwd=tmp_path)
    assert run.code == 1 and "names a directory" in run.error_line()
    assert not (tmp_path / "newdir").exists()
    run = gpt2viz("--model", "tiny", "--json", "nodir/t.json", tmp_path=tmp_path, cwd=tmp_path)
    assert run.code == 1 and "no such directory" in run.error_line()
    for repo_id in ("a..b", "bad name", "org/a b"):
        run = gpt2viz("--model", repo_id, "--json", "-", tmp_path=tmp_path, cwd=tmp_path)
        assert run.code == 1 and "not a valid hub model id" in run.error_line(), repo_id
        assert "reach" not in run.error_line() and "hub did not answer" not in run.error_line()
    directory = checkpoint(tmp_path)
    (directory / "model.safetensors").unlink()
    (directory / "model.safetensors").mkdir()
    run = gpt2viz("--model", str(directory), "--json", "-", tmp_path=tmp_path)
    assert run.code == 1 and "model.safetensors: is a directory" in run.error_line()


# -- generation never crashes on a degenerate distribution (in-process, seeded fuzz) ------------

scores = st.lists(
    st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e-300, 1e-300), st.sampled_from([0.0, -1e308, 1e308])),
    min_size=1, max_size=40,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    logits=scores,
    temperature=st.one_of(st.just(0.0), st.floats(5e-324, 1e-300), st.floats(1e-300, 1e6)),
    top_k=st.one_of(st.none(), st.integers(1, 60)),
    top_p=st.one_of(st.none(), st.floats(5e-324, 1.0, exclude_min=False)),
)
def test_any_scores_give_a_distribution_or_a_generation_error(logits, temperature, top_k, top_p):
    from gpt2viz.errors import GenerationError
    from gpt2viz.generate import SamplingSettings, choose_token, new_generator

    values = torch.tensor(logits, dtype=torch.float64)
    settings_ = SamplingSettings(temperature, top_k, top_p if top_p and top_p > 0 else None, 0)
    degenerate = bool(torch.isnan(values).any() or torch.isposinf(values).any() or torch.isneginf(values).all())
    try:
        token, probs = choose_token(values, settings_, new_generator(0))
    except GenerationError as err:
        assert degenerate, err  # NaN, +infinity, or nothing but -infinity: and only then
        return
    assert not degenerate
    assert math.isfinite(logits[token])
    assert 0 <= token < len(logits)
    if probs is not None:
        assert torch.isfinite(probs).all() and (probs >= 0).all()
        assert abs(float(probs.sum()) - 1) < 1e-9 and probs[token] > 0


def test_a_lone_surrogate_in_the_prompt_is_one_line(tmp_path, tiny_lm):
    """U+D800 alone is no character: from a file it is bytes that are not UTF-8; given to the
    library as a Python string, an error that names it, before the tokenizer sees it."""
    from gpt2viz.errors import InputError
    from gpt2viz.trace import trace_prompt

    prompt = tmp_path / "surrogate.txt"
    prompt.write_bytes(b"Hello \xed\xa0\x80 world")
    run = gpt2viz("--model", "tiny", "--prompt-file", str(prompt), "--json", "-", tmp_path=tmp_path)
    assert run.code == 2 and "not valid UTF-8 (byte 0xed at offset 6)" in run.error_line()
    with pytest.raises(InputError, match="U\\+D800 at character 6, a lone surrogate"):
        trace_prompt(tiny_lm, "Hello \ud800 world")


# -- 6. the TUI's traces: a hostile --replay is refused before the app starts -------------------

def _dump_of_the_bundled_model(tmp_path: Path) -> dict:
    data = REPO / "tests" / "data" / "tiny-lab-trace.json"  # a generation, a cost-lab result, a decode step
    return json.loads(data.read_text(encoding="utf-8"))


def _event(doc: dict, stage: str) -> dict:
    return next(e for e in doc["events"] if e["stage"] == stage)


# Each used to crash the app with a traceback, and exit status 0 (issue 19).
HOSTILE_REPLAYS = {
    "wrong types in notices": (lambda d: d.update(notices=[5, None]), "notices[0]"),
    "model.source a number": (lambda d: d["model"].update(source=5), "model.source"),
    "model.source a list": (lambda d: d["model"].update(source=["local", "/x"]), "model.source"),
    "a config field a string": (lambda d: d["model"]["config"].update(n_head="8"), "model.config.n_head"),
    "a config field null": (lambda d: d["model"]["config"].update(n_embd=None), "model.config.n_embd"),
    "an empty top-k list": (lambda d: _event(d, "unembed.hook_out")["positions"][0].update(ids=[], tokens=[], probs=[], logits=[]),
                            "positions[0].ids must not be empty"),
    "an empty logit lens list": (lambda d: _event(d, "logit_lens")["layers"][0].update(ids=[], tokens=[], probs=[], logits=[]),
                                 "layers[0].ids must not be empty"),
    "a ragged attention map": (lambda d: _event(d, "blocks.2.attn.hook_pattern")["heads"][1][3].append(0.0), "heads[1][3]"),
    "a head missing from a map": (lambda d: _event(d, "blocks.2.attn.hook_attn_scores")["heads"].pop(), "heads"),
    "NaN": ("NaN", "NaN is not a JSON number"),
    "Infinity": ("Infinity", "Infinity is not a JSON number"),
    "-Infinity": ("-Infinity", "-Infinity is not a JSON number"),
    "1e308": (lambda d: d["timings"].update(forward_ms=1e308), "timings.forward_ms"),
    "1e999": ("1e999", "got inf"),
    "n_layer ten million in a few KB": (lambda d: d["model"]["config"].update(n_layer=10**7), "model.config.n_layer"),
}


@pytest.mark.parametrize("case", list(HOSTILE_REPLAYS))
def test_a_hostile_replay_is_one_line_and_exit_status_1(tmp_path, capsys, case):
    """`--replay` reads and checks the whole trace before the app starts (tests/tui/test_tui_fuzz_replay.py
    drives the app itself on the traces that pass), so each of these is one line, exit status 1."""
    from gpt2viz.cli import main

    edit, says = HOSTILE_REPLAYS[case]
    doc = _dump_of_the_bundled_model(tmp_path)
    if isinstance(edit, str):  # a literal Python reads and JSON does not have
        doc["timings"]["forward_ms"] = 12345.678
        text = json.dumps(doc).replace("12345.678", edit, 1)
    else:
        edit(doc)
        text = json.dumps(doc)
    path = tmp_path / "hostile.json"
    path.write_text(text, encoding="utf-8")
    assert main(["--replay", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"gpt2viz: error: {path}: ") and says in err, err
    assert path.read_text(encoding="utf-8") == text


def test_replay_of_a_fifo_or_a_directory_is_one_line_without_blocking(tmp_path):
    fifo = _fifo(tmp_path / "trace.json")
    run = gpt2viz("--replay", str(fifo), tmp_path=tmp_path)  # blocking on the FIFO would reach TIME_BOUND
    assert run.code == 1 and f"{fifo}: " in run.error_line() and "not a regular file" in run.error_line()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


# -- 7. attention maps grow with n_layer x n_head, not with the checkpoint's bytes ---------------


# Slow: 256 positions of 24 blocks of 32 heads through the CLI (5-6 s). The fast tier guards the
# averaged maps (test_the_attention_numbers_a_pass_keeps_are_what_the_bound_counts) and the bound.
@pytest.mark.slow
def test_a_3_9_mb_checkpoint_of_24_blocks_of_32_heads_traces_256_tokens_in_bounded_memory(tmp_path):
    """It took 7.4 GB and wrote a 785 MB trace: every map was kept whole. Now maps past 64
    positions are averaged down, and a trace of it is tens of MB."""
    directory = random_checkpoint(tmp_path / "many-heads", 24, 32, 32, 256)
    assert (directory / "model.safetensors").stat().st_size < 4e6
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(words(300), encoding="utf-8")  # kept: the last 256 tokens
    before = digests(directory, prompt)
    out = tmp_path / "t.json"
    run = gpt2viz("--model", str(directory), "--prompt-file", str(prompt), "--json", str(out), tmp_path=tmp_path)
    assert run.code == 0, run.stderr
    assert out.stat().st_size < 100e6, out.stat().st_size  # measured: 56 MB
    doc = json.loads(out.read_bytes())
    assert len(doc["tokens"]) == 256 and _event(doc, "blocks.23.attn.hook_pattern")["reduced"] is True
    assert digests(directory, prompt) == before


def test_a_model_at_the_config_limits_is_traced_within_the_bounds_or_refused_first(tmp_path):
    """64 blocks of 64 heads (the most config.json may say) and 4,096 positions in a 13 MB file: a
    pass of P positions keeps 2 x 4,096 maps of P x P numbers, so a trace of 45 positions holds
    16.6 million (127 MB of JSON, 1.1 GB while written) and one of 46 would pass the bound of
    2**24 (gpt2viz.trace.recorder.MAX_ATTENTION_NUMBERS): refused before the pass, in one line,
    as is a prompt of the whole context (which would also hold 4 GiB maps while it runs)."""
    from gpt2viz.model.config import LIMITS

    directory = random_checkpoint(tmp_path / "limits", LIMITS["n_layer"], LIMITS["n_head"], 64, LIMITS["n_ctx"])
    prompt = tmp_path / "prompt.txt"
    before = digests(directory)
    for positions in (46, LIMITS["n_ctx"]):
        prompt.write_text(words(positions), encoding="utf-8")
        run = gpt2viz("--model", str(directory), "--prompt-file", str(prompt), "--json", str(tmp_path / "t.json"),
                      tmp_path=tmp_path)
        assert run.code == 2, run.stderr
        line = run.error_line()
        assert f"{positions:,} positions" in line and "n_layer 64 × n_head 64" in line and "at most 45 positions" in line
        assert not (tmp_path / "t.json").exists()
    # Within the bound it runs, a generation too (the KV cache of 64 blocks holds what it needs).
    run = gpt2viz("--model", str(directory), "--json", str(tmp_path / "t.json"), "--generate", "2", words(8),
                  tmp_path=tmp_path)
    assert run.code == 0, run.stderr
    assert (tmp_path / "t.json").stat().st_size < 20e6
    assert digests(directory) == before


@pytest.mark.parametrize("positions, past", [(5, 0), (64, 0), (65, 0), (70, 0), (1, 70)])
def test_the_attention_numbers_a_pass_keeps_are_what_the_bound_counts(tiny_lm, positions, past):
    """The bound is checked from the config before the pass: its count of the numbers the maps
    keep (whole maps, or averaged ones with their last rows; a decode step's one row) is the
    count a recorded pass has."""
    from gpt2viz.trace import trace_decode_step, trace_prompt
    from gpt2viz.trace.recorder import map_numbers

    ids = tiny_lm.tokenizer.encode(words(positions + past))
    trace = trace_decode_step(tiny_lm, ids) if past else trace_prompt(tiny_lm, ids)

    def numbers(value) -> int:
        return sum(numbers(v) for v in value) if isinstance(value, list) else 1

    config = tiny_lm.config
    for stage in ("attn.hook_attn_scores", "attn.hook_pattern"):
        event = trace.event(f"blocks.1.{stage}")
        kept = numbers(event["heads"]) + numbers(event.get("last_row", []))
        assert kept == config.n_head * map_numbers(positions, past + positions)


@pytest.mark.slow  # generates 1,048 tokens, a million candidates recorded (6 s)
def test_a_generation_that_would_record_too_many_candidates_is_refused_before_it_runs(tmp_path):
    """Issue 19's open case: `--generate 4095 --topk-logits 1000` on a model with a 4,096-token
    context would record 4 million candidates (~3 GB). Refused up front, naming both flags' values."""
    directory = random_checkpoint(tmp_path / "long", 1, 2, 16, 4096)
    out = tmp_path / "t.json"
    run = gpt2viz("--model", str(directory), "--json", str(out), "--generate", "4095", "--topk-logits", "1000",
                  tmp_path=tmp_path)
    assert run.code == 2
    line = run.error_line()
    assert "--generate 4,095" in line and "1,000 candidates" in line and "at most 1,048 tokens" in line
    assert not out.exists()
    fits = gpt2viz("--model", str(directory), "--json", str(out), "--generate", "1048", "--topk-logits", "1000",
                   "--prompt", "Hi", tmp_path=tmp_path)
    assert fits.code == 0, fits.error_line()


def test_standard_input_redirected_from_the_trace_s_file_is_never_written_over(tmp_path):
    """`--prompt-file - --json p.txt < p.txt` replaced p.txt by the trace."""
    prompt = tmp_path / "p.txt"
    prompt.write_text("ROMEO:")
    with open(prompt, "rb") as stdin:
        run = subprocess.run([sys.executable, "-m", "gpt2viz", "--model", "tiny", "--prompt-file", "-", "--json", str(prompt)],
                             stdin=stdin, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "standard input" in run.stderr and prompt.read_text() == "ROMEO:"


def test_a_file_of_two_names_gets_the_trace_under_both_as_with_a_redirection(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text("old")
    os.link(first, second)
    run = gpt2viz("--model", "tiny", "--json", str(first), tmp_path=tmp_path)
    assert run.code == 0, run.stderr
    assert first.stat().st_nlink == 2 and second.read_text() == first.read_text() != "old"


REWRITTEN = """
import os, sys, torch, gpt2viz
directory = sys.argv[1]
lm = gpt2viz.load_model(directory)
ids = torch.tensor([lm.tokenizer.encode("The meaning of life is")])
before = lm.model(ids)[0]
weights = os.path.join(directory, "model.safetensors")
with open(weights, "r+b") as f:  # what a training loop saving over its checkpoint does
    f.truncate(0)
    f.write(os.urandom(4096))
after = lm.model(ids)[0]
print("same" if torch.equal(before, after) else "changed")
"""


def test_a_checkpoint_rewritten_under_a_loaded_model_changes_nothing(ckpts, tmp_path):
    """A float32 file run in float32 once used the file's mapped pages in place: truncating the
    file killed the process with SIGBUS (exit -7, no message). The weights are read, not mapped."""
    directory = tmp_path / "rewritten"
    shutil.copytree(ckpts.path("tiny"), directory)
    assert {t.dtype for t in load_file(str(directory / "model.safetensors")).values()} == {torch.float32}
    out = subprocess.run([sys.executable, "-c", REWRITTEN, str(directory)], capture_output=True, text=True, timeout=300)
    assert (out.returncode, out.stdout.strip()) == (0, "same"), out.stderr[-2000:]


def test_ctrl_c_while_a_file_is_written_in_place_waits_until_it_is_whole(tmp_path):
    """A careless-use walk: Ctrl-C just after a hard-linked trace file (written in place, as `>`
    writes) was truncated left it empty, with 'nothing was written' said. The interrupt now waits
    for the write and comes after it; the CLI then names the file written whole."""
    import signal

    from gpt2viz import output_files
    from gpt2viz.trace import jsonio

    target, other = tmp_path / "a.json", tmp_path / "b.json"
    target.write_text("precious\n")
    os.link(target, other)
    real_write = jsonio._write_in_place

    def interrupted_midway(path, text):
        os.kill(os.getpid(), signal.SIGINT)  # arrives between the truncation and the write
        real_write(path, text)

    jsonio._write_in_place = interrupted_midway
    before = len(output_files.written)
    try:
        with pytest.raises(KeyboardInterrupt):
            jsonio.write_atomic(target, '{"whole": true}\n')
    finally:
        jsonio._write_in_place = real_write
    assert other.read_text() == '{"whole": true}\n' and output_files.written[before:] == [str(target)]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the process's handler is back


def test_a_kill_while_a_file_is_written_leaves_no_temporary_file(tmp_path):
    """SIGTERM between the temporary file and the rename left '.t.json.XXXX.tmp' behind (the walk):
    it waits for the rename, then ends the process as before (here a handler records it)."""
    import signal

    from gpt2viz.trace import jsonio

    terms = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: terms.append(signum))
    real_replace = os.replace

    def killed_before_the_rename(src, dst):
        os.kill(os.getpid(), signal.SIGTERM)
        real_replace(src, dst)

    os.replace = killed_before_the_rename
    try:
        jsonio.write_atomic(tmp_path / "t.json", "{}\n")
    finally:
        os.replace = real_replace
        signal.signal(signal.SIGTERM, previous)
    assert terms == [signal.SIGTERM] and sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_an_interrupt_after_the_trace_is_written_does_not_say_nothing_was(tmp_path, monkeypatch, capsys):
    from gpt2viz import cli, output_files

    target = str(tmp_path / "t.json")

    def written_then_interrupted(options):
        output_files.written.append(target)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run_headless", written_then_interrupted)
    monkeypatch.setattr(output_files, "written", [])
    assert cli.main(["--model", "tiny", "--json", target, "Hi"]) == 130
    assert capsys.readouterr().err == f"gpt2viz: interrupted; {target} had been written whole\n"


@pytest.mark.parametrize("name, value", [("HF_HUB_DOWNLOAD_TIMEOUT", "abc"), ("HF_HUB_DOWNLOAD_TIMEOUT", "1.5"),
                                         ("HF_HUB_ETAG_TIMEOUT", "-1")])
def test_a_hub_timeout_the_client_cannot_read_is_one_line_naming_it(monkeypatch, name, value):
    """A careless-use walk: HF_HUB_DOWNLOAD_TIMEOUT=abc failed the hub client's import, reported
    as 'a bug in gpt2viz' with a traceback in the log; -1 was taken."""
    from gpt2viz.errors import SettingError
    from gpt2viz.model.sources import resolve

    monkeypatch.setenv(name, value)
    with pytest.raises(SettingError, match=f"^{name} \\(in the environment\\) must be a whole number of seconds above 0, got '{value}'$"):
        resolve("gpt2")
    with pytest.raises(SettingError):
        resolve(None)  # no --model: the hub first, so the setting is checked too
    assert resolve("tiny").kind == "bundled"  # the bundled model needs no hub
