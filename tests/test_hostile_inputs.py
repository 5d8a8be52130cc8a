"""Absurd and hostile inputs through the real command line (issue 19): each class of them ends in
one line on stderr and a non-zero exit, within bounded memory and time, with every input file
unchanged, or, where the input is legal after all, in a clean run.

Each case runs `python -m gpt2viz` in a child process under a small launcher that measures the
child's own peak memory (os.wait4) and caps its address space, so that a regression fails the
test instead of exhausting the machine. The bounds are generous: a plain run of the bundled model
peaks near 300 MB; the cases below used to take 2.5 to 17 GB, or to hang.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "assets" / "tiny"
PEAK_BOUND = 1536 * 1024**2  # bytes of resident memory a refused (or legal) case may reach
ADDRESS_SPACE = 8 * 1024**3  # what the child may map at all: a runaway fails fast, not the machine
TIME_BOUND = 120  # seconds: far above the few a case takes; only a hang reaches it

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
            stdout=subprocess.PIPE, cwd: Path | None = None) -> Run:
    """Runs the CLI in a child; `close` lists descriptors (1, 2) closed before it starts."""
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
            stdout=stdout, stderr=err, preexec_fn=limits, start_new_session=True, cwd=cwd,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": ""},
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
    for target in (str(_fifo(tmp_path / "out-fifo")), "/dev/null", "/dev/zero"):
        run = gpt2viz("--model", "tiny", "--json", target, tmp_path=tmp_path)
        assert run.code == 1 and "not a regular file" in run.error_line(), target


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
    assert run.code == 1 and 'an empty file name' in run.error_line()
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
