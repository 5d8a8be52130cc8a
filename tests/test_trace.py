"""The Trace and its JSON dump: checked from the JSON alone, and against transformers."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gpt2viz
from gpt2viz.trace import events as ev
from gpt2viz.trace import SCHEMA, TraceFileError, dump, dumps, load, trace_prompt

REPO = Path(__file__).resolve().parent.parent
SCHEMA_FILE = REPO / "docs" / "trace.schema.json"
PROMPT = "The meaning of life is"


def dumped(trace) -> dict:
    return json.loads(dumps(trace))


@pytest.fixture(scope="module")
def tiny_doc(tiny_lm) -> dict:
    return dumped(trace_prompt(tiny_lm, "Alice was beginning to get very tired", generate_tokens=8))


def test_dump_validates_against_the_json_schema_for_two_models(ckpts, tiny_doc):
    import jsonschema

    import trace_schema

    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_FILE.read_text()))
    trace_schema.validate(tiny_doc)
    other = dumped(trace_prompt(ckpts.lm("odd-heads"), PROMPT, generate_tokens=3, settings=gpt2viz.SamplingSettings(0.8, seed=1)))
    trace_schema.validate(other)
    assert other["schema"] == tiny_doc["schema"] == SCHEMA
    # The schema is not vacuous: a broken event fails it.
    broken = json.loads(json.dumps(other))
    pattern = next(e for e in broken["events"] if e["stage"].endswith("hook_pattern"))
    del pattern["heads"]
    with pytest.raises(trace_schema.SchemaError):
        trace_schema.validate(broken)


def events_named(doc: dict, suffix: str) -> list[dict]:
    return [e for e in doc["events"] if e["stage"].endswith(suffix)]


def test_attention_rows_sum_to_one_and_the_future_is_zero(tiny_doc):
    patterns = events_named(tiny_doc, "attn.hook_pattern")
    assert len(patterns) == 2
    for event in patterns:
        for head in event["heads"]:
            T = len(head)
            for i, row in enumerate(head):
                assert abs(sum(row) - 1) < 1e-5
                assert all(v == 0 for v in row[i + 1 :]), "future positions must be exactly 0"
                assert len(row) == T
    scores = events_named(tiny_doc, "attn.hook_attn_scores")
    for event in scores:
        for head in event["heads"]:
            for i, row in enumerate(head):
                assert all(v is None for v in row[i + 1 :]), "masked scores are marked null"
                assert all(v is not None for v in row[: i + 1])


def test_layer_norm_statistics(tiny_doc):
    lns = events_named(tiny_doc, "hook_normalized")
    assert [e["stage"] for e in lns][-1] == "ln_final.hook_normalized"
    assert len(lns) == 2 * 2 + 1
    for event in lns:
        for mean, std, in_std in zip(event["normalized_mean"], event["normalized_std"], event["input_std"]):
            assert abs(mean) < 1e-5
            # std 1, pulled just under by eps: sigma / sqrt(sigma^2 + eps).
            assert std == pytest.approx(in_std / math.sqrt(in_std**2 + 1e-5), abs=2e-6)
            assert 0.9 < std <= 1
        # The learned affine moves the output away from mean 0 / std 1 (LayerNorms are perturbed).
        assert any(abs(s - 1) > 0.01 for s in event["output_std"])
    scales = events_named(tiny_doc, "hook_scale")
    for scale_event, ln_event in zip(scales, lns):
        for scale, std in zip(scale_event["scale"], ln_event["input_std"]):
            assert scale == pytest.approx(math.sqrt(std**2 + 1e-5), rel=1e-4)


def test_kv_cache_bytes_follow_the_formula_and_grow_one_position_per_step(tiny_doc):
    cfg = tiny_doc["model"]["config"]
    T = len(tiny_doc["tokens"])
    head_dim = cfg["n_embd"] // cfg["n_head"]
    per_position = 2 * cfg["n_layer"] * cfg["n_head"] * head_dim * 4
    (prefill,) = [e for e in tiny_doc["events"] if e["stage"] == "kv_cache"]
    assert prefill["total_bytes"] == per_position * T
    assert prefill["bytes_per_position"] == per_position
    assert prefill["layers"][0]["k_shape"] == [1, cfg["n_head"], T, head_dim]
    # The recorded pass's cache holds what the pass needs, not the whole context.
    assert per_position * T <= prefill["allocated_bytes"] < per_position * cfg["n_ctx"]
    steps = tiny_doc["generation"]["steps"]
    assert len(steps) == 8
    # Generation reserves the prompt and its new tokens once.
    assert {step["kv_cache"]["allocated_bytes"] for step in steps} == {per_position * (T + 8)}
    for n, step in enumerate(steps):
        # Step n's forward pass has just cached positions up to T + n.
        assert step["kv_cache"]["length"] == T + n
        assert step["kv_cache"]["total_bytes"] == per_position * (T + n)
        assert step["kv_cache"]["layers"][-1]["v_shape"] == [1, cfg["n_head"], T + n, head_dim]


def test_top_k_lists_are_sorted(tiny_doc):
    (logits,) = events_named(tiny_doc, "unembed.hook_out")
    assert len(logits["positions"]) == len(tiny_doc["tokens"])
    lists = logits["positions"] + next(e for e in tiny_doc["events"] if e["stage"] == "logit_lens")["layers"]
    for entry in lists:
        assert len(entry["ids"]) == 10
        assert entry["probs"] == sorted(entry["probs"], reverse=True)
        assert entry["logits"] == sorted(entry["logits"], reverse=True)
    for step in tiny_doc["generation"]["steps"]:
        assert step["candidates"]["probs"] == sorted(step["candidates"]["probs"], reverse=True)


def test_patterns_and_top1_match_transformers(ckpts):
    lm, hf = ckpts.lm("odd-heads"), ckpts.hf("odd-heads")
    doc = dumped(trace_prompt(lm, PROMPT))
    ids = [t["id"] for t in doc["tokens"]]
    hf.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = hf(torch.tensor([ids]), output_attentions=True)
    finally:
        hf.set_attn_implementation("sdpa")
    for layer, ref in enumerate(out.attentions):
        (event,) = [e for e in doc["events"] if e["stage"] == f"blocks.{layer}.attn.hook_pattern"]
        ours = torch.tensor(event["heads"], dtype=torch.float64)
        assert ours.shape == ref[0].shape
        assert torch.allclose(ours, ref[0].double(), atol=2e-6)
    (logits,) = events_named(doc, "unembed.hook_out")
    assert [p["ids"][0] for p in logits["positions"]] == out.logits[0].argmax(-1).tolist()
    lens = next(e for e in doc["events"] if e["stage"] == "logit_lens")
    assert lens["final_id"] == int(out.logits[0, -1].argmax())
    assert lens["layers"][-1]["ids"][0] == lens["final_id"]
    assert lens["layers"][-1]["final_rank"] == 1


def test_generation_ids_equal_generate(tiny_lm, tiny_doc):
    out = tiny_lm.generate("Alice was beginning to get very tired", 8)
    gen = tiny_doc["generation"]
    assert gen["ids"] == out.token_ids
    assert [s["id"] for s in gen["steps"]] == out.token_ids
    assert gen["stop_reason"] == out.stop_reason
    assert gen["text"] == tiny_lm.tokenizer.decode(out.token_ids)


def test_sampled_generation_in_the_trace_is_reproducible(tiny_lm):
    settings = gpt2viz.SamplingSettings(temperature=1.0, top_k=50, seed=7)
    a = trace_prompt(tiny_lm, PROMPT, generate_tokens=6, settings=settings).generation
    b = trace_prompt(tiny_lm, PROMPT, generate_tokens=6, settings=settings).generation
    assert a["ids"] == b["ids"]
    for step in a["steps"]:
        assert len(step["candidates"]["ids"]) == 10
        assert step["chosen_prob"] > 0


def _without_cache_fields(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc.pop("timings")
    doc["events"] = [e for e in doc["events"] if e["stage"] != "kv_cache"]
    gen = doc["generation"]
    # others_cpu and stream_gb_s are measured with the times (a rate measured busy is measured again)
    for key in ("cache", "ttft_ms", "mean_decode_ms", "tokens_per_s", "others_cpu", "stream_gb_s"):
        gen.pop(key)
    for step in gen["steps"]:
        for key in ("ms", "used_cache", "kv_cache"):
            step.pop(key)
    return doc


def test_json_is_the_same_with_and_without_the_cache(tiny_lm):
    cached = dumped(trace_prompt(tiny_lm, PROMPT, generate_tokens=10, use_cache=True))
    naive = dumped(trace_prompt(tiny_lm, PROMPT, generate_tokens=10, use_cache=False))
    assert cached["generation"]["cache"] is True and naive["generation"]["cache"] is False
    assert not any(e["stage"] == "kv_cache" for e in naive["events"])
    # The same record, number for number: a cached step attends over the cached keys and values
    # with one query row where a full pass uses every row, so a probability may differ in its
    # last (sixth) significant digit, never more. Ids, tokens and every other field are equal.
    _assert_same(_without_cache_fields(cached), _without_cache_fields(naive), "trace")


def _assert_same(a, b, where: str) -> None:
    """`a` equals `b`, floats within a relative 1e-5 (their rounding to 6 significant digits)."""
    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-12), (where, a, b)
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}.{k}")
    else:
        assert a == b, (where, a, b)


def test_load_of_dump_round_trips(tmp_path, tiny_lm):
    trace = trace_prompt(tiny_lm, "round trip ✓ 🤖", generate_tokens=2)
    path = tmp_path / "trace.json"
    dump(trace, path)
    back = load(path)
    assert back.to_dict() == dumped(trace)
    assert back.event("blocks.1.attn.hook_pattern") == trace.event("blocks.1.attn.hook_pattern")
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"], "no temporary files left behind"
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's private 0600


def test_dump_writes_through_a_symlink_and_refuses_a_pipe(tmp_path, tiny_lm):
    from gpt2viz.errors import OutputError

    trace = trace_prompt(tiny_lm, PROMPT)
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    dump(trace, link)
    assert link.is_symlink(), "the link is kept"
    assert json.loads(target.read_text(encoding="utf-8")) == dumped(trace)

    # A pipe with no reader would block the writer forever: refused at once ('-' writes to stdout).
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="not a regular file"):
        dump(trace, fifo)
    assert fifo.is_fifo(), "the pipe is not replaced by a file"
    # A 255-byte name is a name the file system takes: its temporary name fits beside it.
    longest = tmp_path / ("n" * 255)
    dump(trace, longest)
    assert json.loads(longest.read_text(encoding="utf-8")) == dumped(trace)


def test_dump_to_a_full_device_fails_and_keeps_the_device(tiny_lm):
    from gpt2viz.errors import Gpt2VizError

    with pytest.raises(Gpt2VizError, match="not a regular file"):
        dump(trace_prompt(tiny_lm, PROMPT), "/dev/full")
    assert Path("/dev/full").is_char_device()


def test_load_rejects_what_is_not_a_trace(tmp_path, tiny_lm):
    doc = dumped(trace_prompt(tiny_lm, PROMPT))
    cases = {
        "not json": "{",
        "wrong schema": json.dumps({**doc, "schema": "gpt2viz.trace/99"}),
        "missing events": json.dumps({k: v for k, v in doc.items() if k != "events"}),
        "bad layer": json.dumps({**doc, "events": [{"stage": "x", "layer": "one"}]}),
        "bad config": json.dumps({**doc, "model": {**doc["model"], "config": {"n_layer": 0}}}),
        "array": "[]",
    }
    for name, text in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        with pytest.raises(TraceFileError, match=str(path)):
            load(path)
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(TraceFileError, match="UTF-8"):
        load(bad)


def test_long_prompts_keep_the_last_row_and_a_downsampled_map(tiny_lm, monkeypatch):
    words = " ".join(["the"] * 20)
    full = trace_prompt(tiny_lm, words)
    monkeypatch.setattr(ev, "FULL_ATTENTION_MAX", 8)
    monkeypatch.setattr(ev, "DOWNSAMPLED_SIZE", 4)
    reduced = trace_prompt(tiny_lm, words)
    stage = "blocks.1.attn.hook_pattern"
    small, big = reduced.event(stage), full.event(stage)
    assert big["reduced"] is False and small["reduced"] is True
    assert small["downsampled"] == [4, 4]
    assert small["last_row"] == [head[-1] for head in big["heads"]]
    # Each coarse cell is the mean over its block of allowed cells; the first block is 5x5.
    block = torch.tensor(big["heads"][0])[:5, :5]
    allowed = torch.ones(5, 5, dtype=torch.bool).tril()
    assert small["heads"][0][0][0] == pytest.approx(float(block[allowed].mean()), abs=1e-5)
    scores = reduced.event("blocks.0.attn.hook_attn_scores")
    assert scores["heads"][0][0][3] is None, "a block entirely in the future is marked masked"


def test_cli_dump_writes_the_same_trace(tmp_path, tiny_dir, tiny_lm):
    out = tmp_path / "t.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gpt2viz", PROMPT, "--model", str(tiny_dir), "--json", str(out), "--generate", "4", "--topk-logits", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads(out.read_text())
    assert [t["id"] for t in doc["tokens"]] == [464, 3616, 286, 1204, 318]
    assert doc["generation"]["ids"] == tiny_lm.generate(PROMPT, 4).token_ids
    assert len(events_named(doc, "unembed.hook_out")[0]["positions"][0]["ids"]) == 3
    assert doc["model"]["n_params"] == tiny_lm.config.n_params


@pytest.mark.parametrize("key, value", [("activation_function", "gelu"), ("layer_norm_epsilon", 0), ("eos_token_id", None)])
def test_a_replayed_config_is_checked_like_a_config_json(tmp_path, key, value):
    """A trace whose config no model could have is refused at load, not when a screen draws it."""
    import json

    from gpt2viz.trace import TraceFileError, load

    doc = json.loads((Path(__file__).parent / "data" / "tiny-trace.json").read_text(encoding="utf-8"))
    doc["model"]["config"][key] = value
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(TraceFileError, match=f"model.config.*{key}"):
        load(path)


def test_a_decode_steps_pass_is_one_position_against_the_cache(tmp_path, tiny_lm):
    """⏎ on a generated step records the step as generation ran it: one query row against the
    cached keys and values, with the numbers of the full pass's last position."""
    from gpt2viz.trace import trace_decode_step

    ids = tiny_lm.tokenizer.encode("The meaning of life is not")
    step = trace_decode_step(tiny_lm, ids).resolve_all()
    full = trace_prompt(tiny_lm, ids).resolve_all()
    L = len(ids)
    assert step.past == L - 1 and [t["position"] for t in step.tokens] == [L - 1]
    assert step.all_token_ids == ids and step.context == full.tokens[:-1]
    n_head, head_dim = tiny_lm.config.n_head, tiny_lm.config.head_dim
    assert step.event("blocks.0.attn.hook_q")["shape"] == [1, n_head, 1, head_dim]
    assert step.event("blocks.0.attn.hook_attn_scores")["shape"] == [1, n_head, 1, L]
    assert step.event("kv_cache")["length"] == L
    # The same numbers up to float rounding (the kernels sum in another order).
    ours, theirs = step.event("unembed.hook_out")["positions"][-1], full.event("unembed.hook_out")["positions"][-1]
    assert ours["ids"] == theirs["ids"]
    assert ours["logits"] == pytest.approx(theirs["logits"], rel=1e-5) and ours["probs"] == pytest.approx(theirs["probs"], rel=1e-4)
    lens = [e["ids"] for e in step.event("logit_lens")["layers"]]
    assert lens == [e["ids"] for e in full.event("logit_lens")["layers"]]
    path = tmp_path / "step.json"
    dump(step, path)
    back = load(path)
    assert back.past == L - 1 and back.event("kv_cache")["length"] == L


def test_a_byte_order_mark_is_read_past_and_an_empty_file_is_said_to_be_empty(tmp_path):
    """An editor that saves with a BOM gave Python's 'Unexpected UTF-8 BOM (decode using
    utf-8-sig)'; an empty file 'Expecting value: line 1 column 1 (char 0)' (a careless-use walk)."""
    tiny = Path(__file__).resolve().parent / "data" / "tiny-trace.json"
    with_bom = tmp_path / "bom.json"
    with_bom.write_bytes(b"\xef\xbb\xbf" + tiny.read_bytes())
    assert load(with_bom).tokens == load(tiny).tokens
    for content in (b"", b" \n"):
        empty = tmp_path / "empty.json"
        empty.write_bytes(content)
        with pytest.raises(TraceFileError, match="empty.json: the file is empty, so not a gpt2viz trace"):
            load(empty)


def test_a_replaced_file_keeps_its_owner_and_a_writable_file_in_a_closed_directory_is_written(tmp_path, monkeypatch):
    """As `> PATH` keeps them: the owner of the file replaced (where this process may give it: root
    may), and a file that is writable though its directory is not (no temporary file can be made
    beside it) is written in place rather than refused (a careless-use walk)."""
    import errno
    import tempfile

    from gpt2viz.trace import jsonio

    tiny = load(Path(__file__).resolve().parent / "data" / "tiny-trace.json")
    owned = tmp_path / "owned.json"
    owned.write_text("{}")
    if os.geteuid() == 0:
        os.chown(owned, 65534, 65534)
        dump(tiny, owned)
        assert (owned.stat().st_uid, owned.stat().st_gid) == (65534, 65534) and load(owned).tokens == tiny.tokens

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    inode = owned.stat().st_ino
    owned.write_text("{}")
    dump(tiny, owned)
    assert owned.stat().st_ino == inode and load(owned).tokens == tiny.tokens  # the file itself, written in place
    with pytest.raises(jsonio.OutputError, match="cannot write there"):
        dump(tiny, tmp_path / "new.json")  # a new file needs the directory: refused, as before
