"""Seeded fuzz of the command line (issue 19): hostile configs, shard indexes, tokenizers, prompts,
option values and output paths, each class from its own seeded generator, through the real CLI.

Each case runs `gpt2viz ... --json OUT` in a process of its own (tests/fuzz_runner.py forks it
from a server that has imported torch once, so a case costs what gpt2viz does with it, not a
Python start) and must end one of two ways:
- refused: the exit status the class expects (2 for options and prompts, 1 for files), exactly
  one line on stderr, `gpt2viz: error: ...`, naming what is wrong, and no trace written;
- or, for the few generated inputs that are legal after all (odd but valid prompts, say):
  exit status 0, a trace that `gpt2viz.trace.load` reads back, and no error said.
Never a traceback or "unexpected error, a bug", never past TIME_BOUND (a hang), never more than
PEAK_BOUND of resident memory (the child's own peak, os.wait4), and no input changed: every file
of the case's model directory, prompt file and the bundled model hash the same after the run.

A failure lists every case of its class that failed, by seed and number (the same seed makes the
same cases again); tests/test_hostile_inputs.py names the cases issue 19 lists.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from fuzz_runner import PEAK_BOUND, shared_server

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "assets" / "tiny"
# Fixed, so CI runs the same cases every time; to explore further, run e.g.
# GPT2VIZ_FUZZ_SEED=7 GPT2VIZ_FUZZ_SCALE=10 pytest tests/test_fuzz_cli.py
SEED = int(os.environ.get("GPT2VIZ_FUZZ_SEED", "19"))
SCALE = float(os.environ.get("GPT2VIZ_FUZZ_SCALE", "1"))


@dataclass
class Case:
    """One generated run: its arguments, and what it must end in."""

    what: str
    argv: list[str | bytes]
    code: int | None  # the exit status a refusal has; None: a legal input, exit 0 expected
    needle: str = ""  # what the error line must say
    stdin: bytes | None = None
    inputs: list[Path] = field(default_factory=list)  # files and directories that must not change


@pytest.fixture(scope="module")
def server():
    return shared_server()


@pytest.fixture(scope="module")
def tiny_digest():
    """The bundled model, hashed before the module's cases and checked after them all."""
    before = _digests(TINY)
    yield
    assert _digests(TINY) == before, "a case changed the bundled model"


def _digests(*roots: Path) -> dict[str, str]:
    """Every entry under `roots`: a regular file's sha256, a link's target, the kind of the rest."""
    out = {}
    for root in roots:
        entries = [root] if not root.is_dir() or root.is_symlink() else sorted(root.rglob("*"))
        for path in entries:
            if path.is_symlink():
                out[str(path)] = "-> " + os.readlink(path)
            elif path.is_file():
                size = path.stat().st_size
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() if size < 10**8 else f"{size} bytes"
            else:
                out[str(path)] = "directory" if path.is_dir() else "special"
    return out


def _model_dir(root: Path, name: str) -> Path:
    """A checkpoint directory whose files are links to the bundled model's, to be replaced."""
    directory = root / name
    directory.mkdir()
    for file in ("config.json", "model.safetensors", "tokenizer.json"):
        os.symlink(TINY / file, directory / file)
    return directory


def _replace(path: Path, content: bytes | str | None = None, kind: str = "file") -> None:
    """Puts `content` (or a FIFO, a directory, a link) where `path` was."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "link":
        os.symlink(content, path)
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(content)
    elif kind == "missing":
        pass
    else:
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)


def _file_kind(rng: random.Random, path: Path, too_big: int) -> str:
    """Makes `path` something that is not a readable file of its kind; says what."""
    kind = rng.choice(["fifo", "directory", "dev", "dangling", "loop", "sparse", "missing"])
    if kind == "dev":
        _replace(path, rng.choice(["/dev/zero", "/dev/urandom", "/dev/null"]), "link")
    elif kind == "dangling":
        _replace(path, "nowhere.json", "link")
    elif kind == "loop":
        _replace(path, path.name, "link")
    elif kind == "sparse":
        _replace(path, too_big + 1, "sparse")
    else:
        _replace(path, None, kind)
    return kind


def _not_json(rng: random.Random, real: str) -> tuple[str, bytes]:
    """Bytes that are no JSON document of the expected kind."""
    kind = rng.choice(["empty", "truncated", "bytes", "not utf-8", "bom", "nested", "digits", "array", "string"])
    data = {
        "empty": b"",
        "truncated": real[: rng.randrange(1, max(2, min(len(real), 5000)))].encode("utf-8"),
        "bytes": rng.randbytes(rng.randrange(1, 300)) + b"\xff",
        "not utf-8": real[:200].encode("utf-8") + b"\xc3\x28" + real[200:400].encode("utf-8"),
        "bom": b"\xef\xbb\xbf" + real.encode("utf-8"),
        "nested": b"[" * 100_000 + b"]" * 100_000,
        "digits": b'{"x": ' + b"7" * rng.randrange(4400, 9000) + b"}",
        "array": b"[]",
        "string": b'"gpt2"',
    }[kind]
    return kind, data


# -- configs ------------------------------------------------------------------------------------

TINY_CONFIG = json.loads((TINY / "config.json").read_text(encoding="utf-8"))
SIZE_KEYS = ["n_layer", "n_head", "n_embd", "n_positions", "n_ctx", "vocab_size", "n_inner"]
BAD_SIZES = [0, -1, -(2**63), 2**31, 2**63, 2**64 + 1, 10**40, 65, 4097, 262_145, 1.5, 7.0, "7", True, False, [], {},
             [7], None, float("inf"), float("nan"), 1e308]
OTHER_FIELDS = {
    "model_type": ["gpt_neox", "", 5, None, "GPT2", ["gpt2"]],
    "activation_function": ["relu", "gelu", "", None, 5, "gelu_new ", "tanh"],
    "layer_norm_epsilon": [0, -1e-5, 1, 2, "1e-5", None, True, float("nan"), float("inf"), []],
    "scale_attn_by_inverse_layer_idx": [True, "yes", 1, None],
    "reorder_and_upcast_attn": [True, "no", 2],
    "add_cross_attention": [True, "x"],
    "scale_attn_weights": [False, 0, "true", None],
    "eos_token_id": ["x", 1.5, {}, [], True, [{}], -1, 2**31],
}


def _is_bad_size(key: str, value) -> bool:
    """Whether `value` for `key` cannot load with the bundled model's files."""
    if key == "n_inner" and value is None:
        return False
    if key == "n_head" and type(value) is int and 1 <= value <= 64:
        return TINY_CONFIG["n_embd"] % value != 0  # another divisor of n_embd is a legal (other) model
    return not (type(value) is int and value == TINY_CONFIG.get(key))


def config_case(rng: random.Random, root: Path, n: int) -> Case:
    directory = _model_dir(root, f"config-{n}")
    path = directory / "config.json"
    roll = rng.random()
    if roll < 0.15:
        kind = _file_kind(rng, path, 1024**2)
        return Case(f"config.json: {kind}", ["--model", str(directory)], 1, "config.json", inputs=[directory])
    if roll < 0.35:
        kind, data = _not_json(rng, json.dumps(TINY_CONFIG, indent=2))
        _replace(path, data)
        return Case(f"config.json: {kind}", ["--model", str(directory)], 1, "config.json", inputs=[directory])
    config = dict(TINY_CONFIG)
    changes = []
    for _ in range(rng.randint(1, 2)):
        if rng.random() < 0.6:
            key = rng.choice(SIZE_KEYS)
            if key == "n_ctx":  # what old configs call n_positions: read when n_positions is missing
                config.pop("n_positions", None)
            checked = "n_positions" if key == "n_ctx" else key
            value = rng.choice([v for v in BAD_SIZES + [int("9" * rng.randrange(100, 4300))] if _is_bad_size(checked, v)])
        else:
            key = rng.choice(sorted(OTHER_FIELDS))
            value = rng.choice(OTHER_FIELDS[key])
        config[key] = value
        changes.append(f"{key}={str(value)[:30]}")
    path.unlink()
    path.write_text(json.dumps(config), encoding="utf-8")  # NaN and Infinity as Python writes them
    return Case(f"config.json: {', '.join(changes)}", ["--model", str(directory)], 1, "", inputs=[directory])


# -- shard indexes --------------------------------------------------------------------------------

SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
BAD_SHARD_NAMES = [5, None, [], {}, "", ".", "..", "../model.safetensors", "/dev/zero", "a/b.safetensors",
                   "a\\b.safetensors", "x\u0000y", "x" * 256, "\udcff.safetensors", "model-00003-of-00002.safetensors",
                   "model.safetensors.index.json", "config.json"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    """The bundled model's tensors split into two shards, and a second shard missing a tensor."""
    directory = tmp_path_factory.mktemp("shards")
    tensors = load_file(str(TINY / "model.safetensors"))
    names = sorted(tensors)
    first, second = names[: len(names) // 2], names[len(names) // 2 :]
    save_file({k: tensors[k] for k in first}, str(directory / SHARDS[0]))
    save_file({k: tensors[k] for k in second}, str(directory / SHARDS[1]))
    save_file({k: tensors[k] for k in second[1:]}, str(directory / "short.safetensors"))
    (directory / "map.json").write_text(json.dumps({**{k: SHARDS[0] for k in first}, **{k: SHARDS[1] for k in second}}))
    return directory


def index_case(rng: random.Random, root: Path, n: int, shards: Path) -> Case:
    directory = _model_dir(root, f"index-{n}")
    (directory / "model.safetensors").unlink()
    for shard in SHARDS:
        os.symlink(shards / shard, directory / shard)
    weight_map = json.loads((shards / "map.json").read_text())
    index = directory / "model.safetensors.index.json"
    doc = {"metadata": {"total_size": 13_000_000}, "weight_map": weight_map}
    argv = ["--model", str(directory)]
    roll = rng.random()
    if roll < 0.15:
        kind = _file_kind(rng, index, 8 * 1024**2)
        if kind == "missing":  # then the directory has no weights at all
            return Case("no weights, shards alone", argv, 1, "no model.safetensors", inputs=[directory])
        return Case(f"index: {kind}", argv, 1, "index.json", inputs=[directory])
    if roll < 0.3:
        kind, data = _not_json(rng, json.dumps(doc))
        _replace(index, data)
        return Case(f"index: {kind}", argv, 1, "index.json", inputs=[directory])
    if roll < 0.45:
        kind = rng.choice(["no weight_map", "weight_map list", "weight_map empty", "weight_map string", "many"])
        doc = {
            "no weight_map": {"metadata": {}},
            "weight_map list": {"weight_map": list(weight_map)},
            "weight_map empty": {"weight_map": {}},
            "weight_map string": {"weight_map": SHARDS[0]},
            "many": {"weight_map": {f"h.{i}.x": SHARDS[0] for i in range(rng.randrange(10**4, 10**5))}},
        }[kind]
        index.write_text(json.dumps(doc), encoding="utf-8")
        return Case(f"index: {kind}", argv, 1, "index.json", inputs=[directory])
    if roll < 0.7:
        value = rng.choice(BAD_SHARD_NAMES)
        weight_map[rng.choice(sorted(weight_map))] = value
        index.write_text(json.dumps(doc), encoding="utf-8")
        # A file beside the index by that name is read as a shard, and refused as one.
        needle = value if value in ("config.json", "model.safetensors.index.json") else "index.json"
        return Case(f"index names {str(value)[:40]!r}", argv, 1, needle, inputs=[directory])
    # The index is fine; a shard is not.
    shard = directory / rng.choice(SHARDS)
    kind = rng.choice(["fifo", "directory", "dev", "dangling", "empty", "bytes", "truncated", "huge header",
                       "twice", "short"])
    real = (shards / shard.name).read_bytes()
    if kind in ("fifo", "directory"):
        _replace(shard, None, kind)
    elif kind == "dev":
        _replace(shard, "/dev/zero", "link")
    elif kind == "dangling":
        _replace(shard, "gone.safetensors", "link")
    elif kind == "empty":
        _replace(shard, b"")
    elif kind == "bytes":
        _replace(shard, rng.randbytes(rng.randrange(1, 64)))
    elif kind == "truncated":
        _replace(shard, real[: rng.randrange(1, len(real))])
    elif kind == "huge header":
        _replace(shard, rng.choice([10**12, 2**63, 9 * 1024**2]).to_bytes(8, "little") + real[8:200])
    elif kind == "twice":  # both shards hold the same tensors
        _replace(shard, shards / (set(SHARDS) - {shard.name}).pop(), "link")
    else:  # the second shard lacks a tensor
        _replace(directory / SHARDS[1], shards / "short.safetensors", "link")
    index.write_text(json.dumps(doc), encoding="utf-8")
    return Case(f"shard: {kind}", argv, 1, "", inputs=[directory])


# -- tokenizers ---------------------------------------------------------------------------------

TOKENIZER_TEXT = (TINY / "tokenizer.json").read_text(encoding="utf-8")


def _tokenizer_edit(rng: random.Random, doc: dict) -> str:
    kind = rng.choice(["model type", "model", "id too big", "negative id", "float id", "huge id", "vocab type",
                       "merges", "added id", "added type", "component"])
    model = doc["model"]
    if kind == "model type":
        model["type"] = rng.choice(["Nope", 5, None, "bpe"])
    elif kind == "model":
        doc["model"] = rng.choice([[], "BPE", None, 5])
    elif kind == "id too big":
        model["vocab"]["zzqx"] = rng.randrange(50_257, 2**31)
    elif kind == "negative id":
        model["vocab"]["zzqx"] = -rng.randrange(1, 2**31)
    elif kind == "float id":
        model["vocab"]["zzqx"] = 17.5
    elif kind == "huge id":
        model["vocab"]["zzqx"] = 2**rng.randrange(33, 80)
    elif kind == "vocab type":
        model["vocab"] = rng.choice([[], "x", None, 5])
    elif kind == "merges":
        model["merges"] = rng.choice(["x", [5], ["a"], [["a"]], [["zzz", "qqq"]], [None]])
    elif kind == "added id":  # a new special token (an existing token's text keeps its id in the vocabulary)
        doc["added_tokens"][0].update(content="<|zz|>", id=rng.choice([10**6, -1, 2**40, 50_257, 1.5, None]))
    elif kind == "added type":
        doc["added_tokens"] = rng.choice(["x", 5, [5], [{}]])
    else:
        doc[rng.choice(["normalizer", "pre_tokenizer", "decoder", "post_processor"])] = rng.choice(
            [{"type": "Nope"}, {"type": 5}, [], 5, "x"])
    return kind


def tokenizer_case(rng: random.Random, root: Path, n: int) -> Case:
    directory = _model_dir(root, f"tokenizer-{n}")
    path = directory / "tokenizer.json"
    argv = ["--model", str(directory)]
    roll = rng.random()
    if roll < 0.2:
        kind = _file_kind(rng, path, 64 * 1024**2)
        if kind == "missing":
            return Case("no tokenizer", argv, 1, "no tokenizer.json", inputs=[directory])
        return Case(f"tokenizer.json: {kind}", argv, 1, "tokenizer.json", inputs=[directory])
    if roll < 0.4:
        kind, data = _not_json(rng, TOKENIZER_TEXT)
        _replace(path, data)
        return Case(f"tokenizer.json: {kind}", argv, 1, "tokenizer.json", inputs=[directory])
    if roll < 0.5:  # vocab.json and merges.txt instead
        path.unlink()
        vocab = json.loads(TOKENIZER_TEXT)["model"]["vocab"]
        kind = rng.choice(["vocab not json", "vocab list", "vocab id too big", "merges bytes", "merges fifo"])
        (directory / "vocab.json").write_text(
            "{" if kind == "vocab not json" else json.dumps(list(vocab) if kind == "vocab list" else
                                                            {**vocab, "zzqx": 60_000} if kind == "vocab id too big" else vocab),
            encoding="utf-8")
        if kind == "merges fifo":
            os.mkfifo(directory / "merges.txt")
        else:
            (directory / "merges.txt").write_bytes(b"#version: 0.2\n" + (rng.randbytes(200) + b"\xff" if kind == "merges bytes"
                                                                           else "Ġ t\nĠ a\n".encode("utf-8")))
        return Case(f"vocab.json + merges.txt: {kind}", argv, 1, "vocab.json", inputs=[directory])
    doc = json.loads(TOKENIZER_TEXT)
    kind = _tokenizer_edit(rng, doc)
    _replace(path, json.dumps(doc))
    return Case(f"tokenizer.json: {kind}", argv, 1, "tokenizer.json", inputs=[directory])


# -- prompts ------------------------------------------------------------------------------------

ODD_CHARACTERS = ["\x00", "\x01", "\x1b[2J", "\x7f", "\x85", "\u200b", "\u202e", "\u2066", "\ufeff", "\ufffe", "\uffff",
                  "\U0010ffff", "\ue000", "e\u0301", "👩‍👩‍👧", "漢字", "\r", "\r\n", "\t", " ", "<|endoftext|>", "[b]", "{x}",
                  "\\", "ﬀ", "İ"]


def prompt_case(rng: random.Random, root: Path, n: int) -> Case:
    directory = root / f"prompt-{n}"
    directory.mkdir()
    prompt = directory / "prompt.txt"
    roll = rng.random()
    if roll < 0.2:  # odd text that is still text: it runs
        text = "".join(rng.choice(ODD_CHARACTERS + ["a", "Hello", " world"]) for _ in range(rng.randrange(1, 40)))
        prompt.write_text(text, encoding="utf-8", newline="")
        return Case(f"odd prompt {text[:30]!r}", ["--prompt-file", str(prompt), "--generate", "2"], None,
                    inputs=[directory])
    if roll < 0.45:
        kind = _file_kind(rng, prompt, 1024**2)
        return Case(f"prompt file: {kind}", ["--prompt-file", str(prompt)], 2, "--prompt-file", inputs=[directory])
    bad = rng.choice([
        b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\x80",
        b"\xe2\x82", b"\xfe\xff",
    ])
    text = "".join(rng.choice(ODD_CHARACTERS[1:]) for _ in range(rng.randrange(0, 10))).encode("utf-8")
    at = rng.randrange(len(text) + 1)
    data = text[:at] + bad + text[at:]
    where = rng.choice(["file", "stdin", "argument", "--prompt", "--batch-prompt", "too big"])
    if where == "file":
        prompt.write_bytes(data)
        return Case(f"prompt file {data[:40]!r}", ["--prompt-file", str(prompt)], 2, "not valid UTF-8", inputs=[directory])
    if where == "stdin":
        return Case(f"stdin {data[:40]!r}", ["--prompt-file", "-"], 2, "--prompt-file -", stdin=data)
    if where == "too big":
        return Case("stdin of 1 MiB and more", ["--prompt-file", "-"], 2, "--prompt-file -",
                    stdin=b"a " * (512 * 1024 + rng.randrange(1, 1000)))
    if where == "argument":
        return Case(f"argument {data[:40]!r}", [data], 2, "not valid UTF-8")
    if where == "--prompt":
        return Case(f"--prompt {data[:40]!r}", ["--prompt", data], 2, "--prompt")
    return Case(f"--batch-prompt {data[:40]!r}", ["--batch-prompt", data, "--generate", "1"], 2, "--batch-prompt")


# -- option values ------------------------------------------------------------------------------

BAD_OPTIONS = {
    "--generate": ["-1", "4097", "1000000000000", "nan", "1.5", "", "0x10", "9" * 5000, " 3x", "1e3", "٣", "２", "5_0"],
    "--temperature": ["nan", "inf", "-inf", "-1", "1e400", "1e300", "", "abc", "1,5", "1000001", "-1e-310", "０.５", "0_5"],
    "--top-k": ["0", "-5", "60000", "100000000000000000000", "1.0", "nan", ""],
    "--top-p": ["0", "-0.1", "1.5", "nan", "inf", "1e-400", "", "2", "-0"],
    "--seed": ["-1", str(2**64), str(2**63), "9" * 5000, "1.0", "", "nan"],
    "--topk-logits": ["0", "1001", "-3", "1000000000", "", "1e3"],
    "--sequences": ["0", "-1", "257", "1000000000", "x"],
    "--dtype": ["float64", "", "int4", "float", "torch.float32", "fp8", "\u0000"],
    "--device": ["tpu", "", "cuda", "cuda:99", "mps", "gpu", "cpu:x", "cuda:-1"],
    "--lang": ["fr", "", "klingon", "e n", "english"],
    "--ablate": ["L99H0", "L0H99", "Lx", "", "L0.n99999", "L0H0:median", "L-1", "H3", "L0.mlp:mean:mean", "L" + "9" * 5000],
}
# Needed for the option to apply at all (so that the refusal is of its value, not of its context).
COMPANIONS = {"--sequences": ["--generate", "1"]}


def option_case(rng: random.Random, root: Path, n: int) -> Case:
    flag = rng.choice(sorted(BAD_OPTIONS))
    value = rng.choice(BAD_OPTIONS[flag])
    if flag == "--dtype" and value == "\u0000":
        value = "\udc80"  # a byte that is not UTF-8, as Python gives it (an argument cannot hold NUL)
    argv = [flag, value, *COMPANIONS.get(flag, [])]
    if rng.random() < 0.2:  # the same value glued to the flag
        argv = [f"{flag}={value}", *COMPANIONS.get(flag, [])]
    return Case(f"{' '.join(argv)[:80]}", argv, 2, flag)


# -- output paths -------------------------------------------------------------------------------


def output_case(rng: random.Random, root: Path, n: int) -> Case:
    directory = _model_dir(root, f"output-{n}")
    prompt = root / f"output-{n}.txt"
    prompt.write_text("Hello", encoding="utf-8")
    kind = rng.choice(["input", "input", "directory", "slash", "fifo", "device", "loop", "empty", "long", "no parent",
                       "parent is a file"])
    args = ["--model", str(directory), "--prompt-file", str(prompt)]
    if kind == "input":
        target = rng.choice([directory / "config.json", directory / "model.safetensors", directory / "tokenizer.json", prompt])
        how = rng.choice(["itself", "link", "dotted"])
        if how == "link":
            link = root / f"output-{n}-link.json"
            os.symlink(target, link)
            target = link
        elif how == "dotted":
            target = target.parent / ".." / target.parent.name / target.name
        return Case(f"--json an input ({how}): {target.name}", [*args, "--json", str(target)], 1, "never written over",
                    inputs=[directory, prompt])
    target = {
        "directory": str(directory),
        "slash": str(root / f"new-{n}") + "/",
        "device": rng.choice(["/dev/full", "/dev/zero"]),  # not /dev/null: written into, as `>` does
        "empty": "",
        "long": str(root / ("x" * rng.randrange(256, 400))),
        "no parent": str(root / f"nowhere-{n}" / "t.json"),
        "parent is a file": str(prompt / "t.json"),
    }.get(kind)
    if kind == "fifo":
        target = str(root / f"fifo-{n}")
        os.mkfifo(target)
    elif kind == "loop":
        target = str(root / f"loop-{n}")
        os.symlink(f"loop-{n}", target)
    return Case(f"--json {kind}", [*args, "--json", target], 2 if kind == "empty" else 1, "--json", inputs=[directory, prompt])


# -- the runs -----------------------------------------------------------------------------------

GENERATORS = {
    "config": (config_case, 24),
    "index": (index_case, 18),
    "tokenizer": (tokenizer_case, 16),
    "prompt": (prompt_case, 18),
    "option": (option_case, 30),
    "output": (output_case, 10),
}


def _judge(case: Case, result, out: Path) -> str | None:
    """What is wrong with how `case` ended, if anything."""
    lines = result.lines()
    if result.timed_out:
        return "did not finish"
    if "Traceback" in result.stderr or "unexpected error" in result.stderr:
        return "a bug"
    if result.peak >= PEAK_BOUND:
        return f"{result.peak / 2**20:.0f} MiB resident"
    if case.code is None:
        if result.code != 0:
            return f"a legal input refused (exit {result.code})"
        if any("error" in line for line in lines):
            return "ran, but said an error"
        from gpt2viz.errors import Gpt2VizError
        from gpt2viz.trace import load

        try:
            load(out)
        except Gpt2VizError as err:
            return f"wrote a trace that does not load: {err}"
        return None
    if result.code != case.code:
        return f"exit status {result.code}, expected {case.code}"
    if len(lines) != 1 or not lines[0].startswith("gpt2viz: error: "):
        return "not exactly one error line"
    if case.needle not in lines[0]:
        return f"the error does not say {case.needle!r}"
    if os.path.lexists(out):
        return "wrote a trace anyway"
    return None


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_hostile_command_lines_end_in_one_line_or_a_valid_trace(server, tiny_digest, shards, tmp_path, kind):
    make, count = GENERATORS[kind]
    count = max(1, round(count * SCALE))
    rng = random.Random(f"{SEED}:{kind}")
    failures, peak = [], 0
    for n in range(count):
        case = make(rng, tmp_path, n, shards) if kind == "index" else make(rng, tmp_path, n)
        out = tmp_path / f"out-{n}.json"
        argv = list(case.argv)
        if "--json" not in argv:
            argv += ["--json", str(out)]
        if "--model" not in argv:
            argv += ["--model", "tiny"]
        before = _digests(*case.inputs)
        result = server.run(argv, stdin=case.stdin, cwd=tmp_path)
        peak = max(peak, result.peak)
        problem = _judge(case, result, out)
        if problem is None and _digests(*case.inputs) != before:
            problem = "an input changed"
        if problem:
            failures.append(f"{kind} case {n} of seed {SEED} ({case.what}): {problem}: exit {result.code}: {result.stderr[:400]}")
    print(f"\n{kind}: {count} cases, peak {peak / 2**20:.0f} MiB")
    assert not failures, "\n".join(failures)


# Each found once by a person, not left to the generators' draw: (what, argv, exit status, needle).
NAMED = [
    ("Arabic-Indic digit", ["--generate", "٣"], 2, "--generate"),
    ("full-width digit", ["--generate", "２"], 2, "--generate"),
    ("digit-group underscore", ["--generate", "5_0"], 2, "--generate"),
    ("full-width number", ["--temperature", "０.５"], 2, "--temperature"),
    ("a home of no user", ["--model", "~nosuchuser/x"], 1, "no user nosuchuser"),
]


@pytest.mark.parametrize("what, argv, code, needle", NAMED, ids=[n[0] for n in NAMED])
def test_named_hostile_command_lines(server, tmp_path, what, argv, code, needle):
    out = tmp_path / "out.json"
    result = server.run([*argv, *(["--model", "tiny"] if "--model" not in argv else []), "--json", str(out)], cwd=tmp_path)
    assert _judge(Case(what, argv, code, needle), result, out) is None, result.stderr


def test_a_config_whose_end_of_text_id_a_replay_would_refuse_does_not_load(server, tmp_path):
    """eos_token_id -1 once loaded and traced, and then that trace's own --replay refused it."""
    directory = _model_dir(tmp_path, "eos")
    config = {**TINY_CONFIG, "eos_token_id": -1}
    (directory / "config.json").unlink()
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    out = tmp_path / "out.json"
    result = server.run(["--model", str(directory), "--json", str(out)], cwd=tmp_path)
    assert _judge(Case("eos -1", [], 1, "eos_token_id"), result, out) is None, result.stderr
