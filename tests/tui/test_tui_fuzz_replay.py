"""Seeded fuzz of `gpt2viz --replay` (issue 19): hostile traces through the command line and, when
the trace is read, through the TUI under Pilot.

Each case edits a real trace (a fresh dump of the bundled model with a generation, and the
committed cost-lab trace) at a place chosen by a seeded generator: a value of another type, a
value of the same type at an extreme (0, 1e15, 5e-324, a string of escape codes, markup, format
braces, a lone surrogate, a wide script), an entry dropped, a list emptied or made ragged, a
NaN/Infinity/1e999 literal or a 5,000-digit integer written into the text; or it is no trace at
all (bytes that are not JSON, nesting 100,000 deep, a FIFO, /dev/zero, a directory, a sparse file
over the size bound). Then `gpt2viz --replay FILE` runs in a process of its own (tests/fuzz_runner.py)
with the app driven by Pilot: it shows every stage of the block the edit is in (or those outside
the blocks), the generation view or the cost lab when the edit is there, and switches language.

Every case ends one of two ways: refused, exit status 1 and one line naming the file; or shown,
exit status 0 with nothing on stderr. Never a traceback, never "unexpected error, a bug", within
bounded memory and time, with the trace file unchanged and nothing new beside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz_runner import PEAK_BOUND, shared_server  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LAB_TRACE = REPO / "tests" / "data" / "tiny-lab-trace.json"
# Fixed, so CI runs the same cases every time; to explore further, run e.g.
# GPT2VIZ_FUZZ_SEED=7 GPT2VIZ_FUZZ_SCALE=10 pytest tests/tui/test_tui_fuzz_replay.py
SEED = int(os.environ.get("GPT2VIZ_FUZZ_SEED", "19"))
CASES = max(1, round(44 * float(os.environ.get("GPT2VIZ_FUZZ_SCALE", "1"))))

HOSTILE_STRINGS = [
    "", " ", "\x00", "\n\n\n", "\t\r", "\x1b[31mred\x1b[0m\x1b]0;T\x07", "[bold]x[/bold] [/]", "[@click=app.quit]q",
    "\u202eevil\u2066", "\u200b", "e\u0301\u0301\u0301", "漢字" * 40, "🙂" * 20, "\ud800", "x" * 4096,
    "{0} {name} %s %(x)s", "{", "}}", "\\", '"', "∅",
]
OTHER_TYPES = [None, True, False, 0, -1, 1.5, "x", [], {}, [1], {"a": 1}]
EXTREME_INTS = [0, -1, 1, 2, 2**31, 2**53, 2**63, 10**15, 10**16]
EXTREME_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1.0000001, 1e15, -1e15, 1e16, 5e-324, 1e-300, 1e-7]
LITERALS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "9" * 5000]


def _random_path(rng: random.Random, doc) -> tuple:
    """A path into `doc`: a part chosen first (an event or a top-level field), then down at random."""
    top = rng.choice([k for k in doc if k != "schema"] + ["events"] * 4)
    path, node = (top,), doc[top]
    if top == "events":
        i = rng.randrange(len(node))
        path, node = path + (i,), node[i]
    while isinstance(node, (dict, list)) and node and rng.random() < 0.75:
        step = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path, node = path + (step,), node[step]
    return path


def _parent(doc, path: tuple):
    for step in path[:-1]:
        doc = doc[step]
    return doc


def _same_type_extreme(rng: random.Random, value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice(EXTREME_INTS)
    if isinstance(value, float):
        return rng.choice(EXTREME_FLOATS)
    if isinstance(value, str):
        return rng.choice(HOSTILE_STRINGS)
    if isinstance(value, list):
        return rng.choice([[], value[:1], value + value[:1], value[::-1], [value[0]] * len(value) if value else []])
    if isinstance(value, dict):
        if value and rng.random() < 0.5:
            return {k: v for k, v in value.items() if k != rng.choice(list(value))}
        return {**value, rng.choice(["x", "", "\x1b"]): rng.choice(OTHER_TYPES)}
    return rng.choice(OTHER_TYPES)


def _hostile_texts(rng: random.Random, value):
    if isinstance(value, str):
        return rng.choice(HOSTILE_STRINGS) + value if rng.random() < 0.5 else rng.choice(HOSTILE_STRINGS)
    if isinstance(value, list):
        return [_hostile_texts(rng, v) for v in value]
    if isinstance(value, dict):
        return {k: _hostile_texts(rng, v) for k, v in value.items()}
    return value


def _edit(rng: random.Random, doc: dict) -> tuple[str, tuple, str | None]:
    """Edits `doc` in place (or says what to write instead); returns (what was done, where, the
    text to write when it is a text edit)."""
    path = _random_path(rng, doc)
    parent, key = _parent(doc, path), path[-1]
    kind = rng.choice(["type", "extreme", "extreme", "texts", "texts", "drop", "literal"])
    if kind == "texts":  # every text under `path`, hostile (names, token texts, notices' words)
        parent[key] = _hostile_texts(rng, parent[key])
    elif kind == "type":
        parent[key] = rng.choice([v for v in OTHER_TYPES if type(v) is not type(parent[key])])
    elif kind == "extreme":
        parent[key] = _same_type_extreme(rng, parent[key])
    elif kind == "drop":
        del parent[key]
    else:  # a literal JSON does not have, or cannot hold, in place of a number
        parent[key] = 12345.678
        text = json.dumps(doc).replace("12345.678", rng.choice(LITERALS), 1)
        return kind, path, text
    return kind, path, None


def _not_a_trace(rng: random.Random, base: str, directory: Path) -> tuple[str, Path]:
    """A file that is no trace at all, or something that is not a file."""
    path = directory / "trace.json"
    kind = rng.choice(["bytes", "truncated", "nested", "fifo", "dev", "directory", "sparse", "empty", "bom"])
    if kind == "bytes":
        path.write_bytes(rng.randbytes(rng.randrange(1, 400)))
    elif kind == "truncated":
        path.write_text(base[: rng.randrange(1, len(base))], encoding="utf-8")
    elif kind == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev":
        os.symlink(rng.choice(["/dev/zero", "/dev/urandom", "/dev/null"]), path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(400 * 1024**2)  # over the 384 MiB bound, and no disk taken
    elif kind == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(b"\xef\xbb\xbf" + base.encode("utf-8"))
    return kind, path


def _keys_for(doc: dict, path: tuple, rng: random.Random) -> list[str]:
    """What to look at for an edit at `path`: its block's stages, or the views that show it."""
    top = path[0]
    if top == "events" and len(path) > 1 and isinstance(doc["events"], list) and path[1] < len(doc["events"]):
        event = doc["events"][path[1]]
        layer = event.get("layer") if isinstance(event, dict) else None
        keys = [f"layer:{layer}" if type(layer) is int else "layer:-"]
        if isinstance(event, dict) and "attn" in str(event.get("stage")):
            keys += ["home", f"layer:{layer}" if type(layer) is int else "layer:-", "a", "full_stop", "comma"]
    elif top in ("generation", "batch"):
        keys = ["g", "right", "right", "left", "b", "enter", "escape", "escape"]
    elif top == "cost_lab":
        keys = ["m", "right", "escape"]
    else:  # the model, the prompt and its tokens, notices, timings, quality, interventions
        keys = ["layer:-", "question_mark", "escape"]
    if rng.random() < 0.5:
        keys.append("L")  # the same in Chinese
    return keys


def _digests(directory: Path) -> dict[str, str]:
    out = {}
    for path in sorted(directory.iterdir()):
        if path.is_symlink() or not path.is_file():
            out[path.name] = "not read"
        elif path.stat().st_size < 10**8:
            out[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[path.name] = str(path.stat().st_size)
    return out


@pytest.fixture(scope="module")
def server():
    return shared_server()


@pytest.fixture(scope="module")
def bases(server, tmp_path_factory) -> list[str]:
    """A fresh dump of the bundled model (a generation of 4 tokens, 5 candidates a position, so
    every field today's recorder writes), and the committed trace with a cost-lab result."""
    target = tmp_path_factory.mktemp("base") / "base.json"
    made = server.run(["--model", "tiny", "--json", str(target), "--generate", "4", "--topk-logits", "5"])
    assert made.code == 0, made.stderr
    return [target.read_text(encoding="utf-8"), LAB_TRACE.read_text(encoding="utf-8")]


# The corpus's first cases run in the fast tier; the rest (the same seeded stream, so every case is
# the one it always was) in the slow tier, which CI runs too: 12 + 32 replays of the app.
FAST_CASES = min(12, CASES)


@pytest.mark.parametrize("part", ["first", pytest.param("rest", marks=pytest.mark.slow)])
def test_hostile_replays_are_refused_in_one_line_or_shown_without_error(server, bases, tmp_path, part):
    rng = random.Random(SEED)
    runs = range(FAST_CASES) if part == "first" else range(FAST_CASES, CASES)
    failures, shown, refused, peak, slowest = [], 0, 0, 0, 0.0
    for n in range(CASES):
        directory = tmp_path / f"case-{n}"
        directory.mkdir()
        base = bases[n % len(bases)]
        keys: list[str] = []
        if rng.random() < 0.15:
            what, path = _not_a_trace(rng, base, directory)
        else:
            doc = json.loads(base)
            kind, where, text = _edit(rng, doc)
            what = f"{kind} at {'.'.join(map(str, where))}"
            path = directory / "trace.json"
            path.write_text(text if text is not None else json.dumps(doc), encoding="utf-8")
            keys = _keys_for(json.loads(base), where, rng)
        if n not in runs:  # drawn all the same: the stream stays the one every case was made from
            continue
        before = _digests(directory)
        result = server.run(["--replay", str(path)], pilot=keys)
        peak, slowest = max(peak, result.peak), max(slowest, result.seconds)
        lines = result.lines()
        problem = None
        if result.timed_out:
            problem = "did not finish"
        elif "Traceback" in result.stderr or "unexpected error" in result.stderr:
            problem = "a bug"
        elif result.code == 0 and result.stderr:
            problem = "shown, but said something"
        elif result.code == 1 and not (len(lines) == 1 and lines[0].startswith(f"gpt2viz: error: {path}: ")):
            problem = "refused, but not in one line naming the file"
        elif result.code not in (0, 1):
            problem = f"exit status {result.code}"
        elif result.peak >= PEAK_BOUND:
            problem = f"{result.peak / 2**20:.0f} MiB resident"
        elif _digests(directory) != before:
            problem = "the trace's directory changed"
        shown += result.code == 0
        refused += result.code == 1
        if problem:
            failures.append(f"case {n} of seed {SEED} ({what}; keys {keys}): {problem}: exit {result.code}: {result.stderr[:500]}")
    print(f"\n{len(runs)} replays: {shown} shown, {refused} refused; peak {peak / 2**20:.0f} MiB; slowest {slowest:.1f} s")
    assert not failures, "\n".join(failures)
    # The generator reaches both outcomes: a fuzz that only ever refused would not test the TUI.
    assert shown >= len(runs) // 5 and refused >= len(runs) // 5


# -- named cases of issue 19 in the app ------------------------------------------------------------


def test_a_generation_whose_candidate_lists_are_empty_is_shown(server, bases, tmp_path):
    """Empty top-k lists are what a step records when the model's numbers were not finite
    (docs/trace.md): the generation view and its steps show them, without an error."""
    doc = json.loads(bases[0])
    for step in doc["generation"]["steps"]:
        step["raw"] = {"ids": [], "tokens": [], "probs": []}
        step["candidates"] = {"ids": [], "tokens": [], "probs": []}
    path = tmp_path / "empty-candidates.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = server.run(["--replay", str(path)], pilot=["g", "right", "right", "left", "b", "enter", "escape", "L", "escape"])
    assert (result.code, result.stderr) == (0, "")


def test_the_app_refuses_a_prompt_longer_than_a_model_at_the_limits_records(server, tmp_path):
    """64 blocks of 64 heads: the app's first pass over 46 positions would keep more attention
    numbers than a trace holds, so the app ends at once with the one line that says so."""
    from helpers import random_checkpoint, words

    from gpt2viz.model.config import LIMITS

    directory = random_checkpoint(tmp_path / "limits", LIMITS["n_layer"], LIMITS["n_head"], 64, 256)
    result = server.run(["--model", str(directory), words(46)], pilot=["right"])
    assert result.code == 2 and not result.timed_out
    assert result.lines() == [
        "gpt2viz: error: a recorded pass over 46 positions would make larger attention maps than gpt2viz records "
        "(n_layer 64 × n_head 64 heads); this model records at most 45 positions"
    ]
    assert result.peak < PEAK_BOUND
