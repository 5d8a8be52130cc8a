"""The hub path through the real `huggingface_hub` client, against a local stand-in for the hub
(tests/hub_server.py, loopback only). Each run is a process of its own (forked from a server that
never imported the client: it reads HF_ENDPOINT once, when it is imported)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpt2viz.model.sources import DOWNLOAD_PIECE, PARTIAL_SUFFIX
from fuzz_runner import shared_server, with_env
from hub_server import HubServer, Repo

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "assets" / "tiny"


def hub_variables(endpoint: str, home: Path, **env: str) -> dict[str, str | None]:
    """What a run against the hub at `endpoint` sets in its environment (None: removes)."""
    return {"HF_ENDPOINT": endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1", "NO_PROXY": "127.0.0.1",
            "HF_HUB_OFFLINE": None, **env}


def environment(endpoint: str, home: Path, **env: str) -> dict[str, str]:
    """The environment of a process started afresh against the hub at `endpoint`."""
    return with_env(dict(os.environ), hub_variables(endpoint, home, **env))


def run(args: list[str], endpoint: str, home: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """`gpt2viz args` against the hub at `endpoint`, forked from the shared server
    (tests/fuzz_runner.py): a fresh process to the client, which it imports and configures anew."""
    result = shared_server().run(args, timeout=timeout, env=hub_variables(endpoint, home, **env))
    assert not result.timed_out, f"gpt2viz {args} ran past {timeout} s"
    return subprocess.CompletedProcess(args, result.code, result.stdout.decode("utf-8", "replace"), result.stderr + "\n" if result.stderr else "")


def blobs(home: Path, repo_id: str = "org/tiny") -> Path:
    """Where the client keeps a repository's files, each named by its ETag."""
    return home / "hub" / ("models--" + repo_id.replace("/", "--")) / "blobs"


def etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()  # the hub's ETag of an LFS file, as hub_server sends it


def wait_for_size(path: Path, size: int, process: subprocess.Popen) -> None:
    """Until `path` holds `size` bytes (the download has stalled there), or the process ended."""
    for _ in range(1200):
        if path.is_file() and path.stat().st_size >= size or process.poll() is not None:
            return
        time.sleep(0.05)


def ranges_asked(hub: HubServer, name: str) -> list[str | None]:
    """The Range header of each GET of `name`, in order (None: from the start)."""
    return [r for method, path, r in hub.requests if method == "GET" and path.endswith("/" + name)]


# A run that loads the model and prints each DownloadProgress report as a JSON line.
REPORTING = """
import dataclasses, json, sys, gpt2viz
gpt2viz.load_model(sys.argv[1], progress=lambda p: print(json.dumps(dataclasses.asdict(p)), flush=True))
"""


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
        fetched = [path.rsplit("/", 1)[-1] for method, path, _ in hub.requests if method == "GET" and "/resolve/" in path]
        assert sorted(fetched) == ["config.json", "model.safetensors", "tokenizer.json"]  # once each; not heldout.txt
        # The cache as the client lays it out: blobs named by ETag, the snapshot linking to them, main's commit.
        repo_dir = blobs(tmp_path / "hf").parent
        weights = repo_dir / "snapshots" / tiny_repo.sha / "model.safetensors"
        assert weights.resolve() == blobs(tmp_path / "hf") / etag(tiny_repo.files["model.safetensors"])
        assert (repo_dir / "refs" / "main").read_text() == tiny_repo.sha
        assert not list(blobs(tmp_path / "hf").glob("*" + PARTIAL_SUFFIX))
        hub.requests.clear()
        second = run(["--model", "org/tiny", "--json", str(out)], hub.url, tmp_path / "hf")
        assert wrote_trace(second, out) and hub.requests == []  # from the cache: the hub is not asked
    third = run(["--model", "org/tiny", "--json", str(out)], free_port_url(), tmp_path / "hf")  # hub gone
    assert wrote_trace(third, out), third.stderr
    assert "hub" not in third.stderr.lower()


def test_an_interrupted_download_goes_on_from_where_it_stopped(tmp_path, tiny_repo):
    """The connection drops near the end of the weights: the client asks for the rest (a Range
    request from the last whole piece it kept) and the run completes, with nothing said but
    gpt2viz's own lines."""
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


def test_verify_shows_its_download_as_a_trace_run_does(tmp_path, tiny_repo):
    """`--verify` on a hub model the cache does not hold yet says what it downloaded."""
    with HubServer({"org/tiny": tiny_repo}) as hub:
        result = run(["--model", "org/tiny", "--verify", "--prompt", "Hello"], hub.url, tmp_path / "hf")
    assert result.returncode == 0, result.stderr
    assert "downloaded 3 files" in result.stderr
    assert "verify: the same model" in result.stderr


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
            timeout=120, HF_HUB_DOWNLOAD_TIMEOUT="1",  # the least the client reads: whole seconds
        )
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "download failed" in result.stderr


def test_with_the_hub_unreachable_the_default_falls_back_to_tiny_in_one_line(tmp_path):
    result = run(["--json", str(tmp_path / "t.json")], free_port_url(), tmp_path / "hf")
    assert result.returncode == 0
    assert json.loads((tmp_path / "t.json").read_text())["model"]["name"] == "tiny"
    lines = result.stderr.strip().split("\n")
    assert len(lines) == 2 and "unreachable" in lines[0]  # the notice, then "wrote the trace ..."


# Ctrl-C in the fast tier; a kill (the same partial file, left without any cleanup) in the slow one.
@pytest.mark.parametrize("stop", [signal.SIGINT, pytest.param(signal.SIGKILL, marks=pytest.mark.slow)], ids=["ctrl-c", "killed"])
def test_a_stopped_download_goes_on_in_the_next_run(tmp_path, tiny_repo, stop):
    """The server stalls three pieces and a bit into the weights; the run is stopped there (Ctrl-C:
    one line, exit 130; or killed). The next run asks for the rest from the bytes on disk, counts
    them as done from its first report, and ends with the blob the hub has."""
    home = tmp_path / "hf"
    weights = tiny_repo.files["model.safetensors"]
    kept = 3 * DOWNLOAD_PIECE  # the client writes whole pieces; the bit after them never reaches the disk
    partial = blobs(home) / (etag(weights) + PARTIAL_SUFFIX)
    with HubServer({"org/tiny": tiny_repo}, hang_after=kept + 5000) as hub:
        first = subprocess.Popen(
            [sys.executable, "-m", "gpt2viz", "--model", "org/tiny", "--json", str(tmp_path / "t.json")],
            env=environment(hub.url, home), stderr=subprocess.PIPE, text=True,
        )
        wait_for_size(partial, kept, first)
        first.send_signal(stop)
        _, stderr = first.communicate(timeout=60)
        if stop == signal.SIGINT:
            assert first.returncode == 130
            assert stderr == "gpt2viz: the download was cancelled; the next run goes on from where it stopped\n"
        assert partial.stat().st_size == kept and not (blobs(home) / etag(weights)).exists()

        hub.hang_after = None
        hub.requests.clear()
        second = subprocess.run(
            [sys.executable, "-c", REPORTING, "org/tiny"], env=environment(hub.url, home), capture_output=True, text=True,
            timeout=120,
        )
        assert second.returncode == 0, second.stderr
        assert ranges_asked(hub, "model.safetensors") == [f"bytes={kept}-"]
        assert ranges_asked(hub, "config.json") == []  # whole already: only linked
    reports = [json.loads(line) for line in second.stdout.splitlines()]
    total = len(weights) + len(tiny_repo.files["tokenizer.json"])
    assert reports[0] == {"file": "model.safetensors", "file_done": kept, "file_total": len(weights), "done": kept,
                          "total": total, "files": 2, "locating": False}
    assert reports[-1]["done"] == total
    assert (blobs(home) / etag(weights)).read_bytes() == weights and not partial.exists()
    third = run(["--model", "org/tiny", "--json", str(tmp_path / "t.json")], free_port_url(), home)  # hub gone
    assert wrote_trace(third, tmp_path / "t.json"), third.stderr


@pytest.mark.parametrize("left", ["longer than the file", "another etag", "other bytes"])
def test_a_partial_file_that_cannot_be_the_file_is_not_trusted(tmp_path, tiny_repo, left):
    """Longer than the file: fetched from the start. Of another ETag (an older revision): removed.
    Of this ETag but not its bytes: the resumed file fails its sha256 and is fetched again, whole."""
    home = tmp_path / "hf"
    weights = tiny_repo.files["model.safetensors"]
    blobs(home).mkdir(parents=True)
    partial = blobs(home) / (etag(weights) + PARTIAL_SUFFIX)
    stale = blobs(home) / (etag(b"an older revision") + PARTIAL_SUFFIX)
    if left == "longer than the file":
        partial.write_bytes(weights + b"more")
    elif left == "another etag":
        stale.write_bytes(weights[:100_000])
    else:
        partial.write_bytes(bytes(100_000))
    with HubServer({"org/tiny": tiny_repo}) as hub:
        result = run(["--model", "org/tiny", "--json", str(tmp_path / "t.json")], hub.url, home)
        asked = ranges_asked(hub, "model.safetensors")
    assert wrote_trace(result, tmp_path / "t.json"), result.stderr
    assert asked == (["bytes=100000-", None] if left == "other bytes" else [None])
    assert (blobs(home) / etag(weights)).read_bytes() == weights
    assert not list(blobs(home).glob("*" + PARTIAL_SUFFIX))
