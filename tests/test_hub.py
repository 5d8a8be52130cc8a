"""The hub path through the real `huggingface_hub` client, against a local stand-in for the hub
(tests/hub_server.py, loopback only). Each run is a subprocess: the client reads HF_ENDPOINT once,
when it is imported."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hub_server import HubServer, Repo

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "assets" / "tiny"


def run(args: list[str], endpoint: str, home: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    environ = {
        **os.environ,
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(home),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "NO_PROXY": "127.0.0.1",
        **env,
    }
    environ.pop("HF_HUB_OFFLINE", None)
    return subprocess.run(
        [sys.executable, "-m", "gpt2viz", *args], env=environ, capture_output=True, text=True, timeout=timeout
    )


def free_port_url() -> str:
    """An address where nothing listens (the hub unreachable)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def tiny_repo() -> Repo:
    return Repo.from_dir(TINY)


def wrote_trace(result: subprocess.CompletedProcess, path: Path) -> bool:
    return result.returncode == 0 and json.loads(path.read_text())["model"]["name"] == "org/tiny"


def test_first_download_then_the_cache_without_asking_the_hub(tmp_path, tiny_repo):
    out = tmp_path / "t.json"
    tiny_repo.files["pytorch_model.bin"] = b"\x80\x02 a pickle, never to be fetched"
    with HubServer({"org/tiny": tiny_repo}) as hub:
        first = run(["--model", "org/tiny", "--json", str(out)], hub.url, tmp_path / "hf")
        assert wrote_trace(first, out), first.stderr
        fetched = {path.rsplit("/", 1)[-1] for method, path, _ in hub.requests if method == "GET" and "/resolve/" in path}
        assert fetched == {"config.json", "model.safetensors", "tokenizer.json"}  # not heldout.txt, MODEL_CARD.md
        hub.requests.clear()
        second = run(["--model", "org/tiny", "--json", str(out)], hub.url, tmp_path / "hf")
        assert wrote_trace(second, out) and hub.requests == []  # from the cache: the hub is not asked
    third = run(["--model", "org/tiny", "--json", str(out)], free_port_url(), tmp_path / "hf")  # hub gone
    assert wrote_trace(third, out), third.stderr
    assert "hub" not in third.stderr.lower()


def test_an_interrupted_download_goes_on_from_where_it_stopped(tmp_path, tiny_repo):
    """The connection drops near the end of the weights: the client asks for the rest (a Range
    request from the last whole chunk it kept: it reads 10 MB at a time) and the run completes,
    with nothing said but gpt2viz's own lines."""
    out = tmp_path / "t.json"
    size = len(tiny_repo.files["model.safetensors"])
    cut = size - 1_000_000
    with HubServer({"org/tiny": tiny_repo}, cut_after=cut) as hub:
        result = run(["--model", "org/tiny", "--json", str(out)], hub.url, tmp_path / "hf")
        ranges = [r for method, path, r in hub.requests if path.endswith("model.safetensors") and method == "GET"]
    assert wrote_trace(result, out), result.stderr
    assert ranges[0] is None and ranges[-1] is not None
    assert 0 < int(ranges[-1].removeprefix("bytes=").rstrip("-")) <= cut
    assert all(line.startswith("gpt2viz: ") for line in result.stderr.splitlines())
    assert "downloaded 3 files" in result.stderr


def test_a_repo_without_safetensors_is_refused(tmp_path, tiny_repo):
    files = {"config.json": tiny_repo.files["config.json"], "pytorch_model.bin": b"\x80\x02pickle", "tokenizer.json": b"{}"}
    with HubServer({"org/pickled": Repo(files)}) as hub:
        result = run(["--model", "org/pickled", "--json", str(tmp_path / "t.json")], hub.url, tmp_path / "hf")
        assert result.returncode == 1
        assert "no safetensors weights" in result.stderr and result.stderr.count("\n") == 1
        assert not any(path.endswith(".bin") for _, path, _ in hub.requests)  # never even downloaded


def test_an_unknown_repo_is_one_line(tmp_path):
    with HubServer({}) as hub:
        result = run(["--model", "org/nothing", "--json", str(tmp_path / "t.json")], hub.url, tmp_path / "hf")
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "no such model on the Hugging Face hub" in result.stderr


def test_a_server_that_hangs_mid_file_ends_in_an_error_not_a_hang(tmp_path, tiny_repo):
    with HubServer({"org/tiny": tiny_repo}, hang_after=1000) as hub:
        result = run(
            ["--model", "org/tiny", "--json", str(tmp_path / "t.json")], hub.url, tmp_path / "hf",
            timeout=120, HF_HUB_DOWNLOAD_TIMEOUT="2",
        )
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "download failed" in result.stderr


def test_with_the_hub_unreachable_the_default_falls_back_to_tiny_in_one_line(tmp_path):
    result = run(["--json", str(tmp_path / "t.json")], free_port_url(), tmp_path / "hf")
    assert result.returncode == 0
    assert json.loads((tmp_path / "t.json").read_text())["model"]["name"] == "tiny"
    lines = result.stderr.strip().split("\n")
    assert len(lines) == 2 and "unreachable" in lines[0]  # the notice, then "wrote the trace ..."
