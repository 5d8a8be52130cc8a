"""A hostile or broken hub (tests/hub_server.py's Hostile modes, loopback only): nothing is written
outside the cache, nothing there is read as weights, a download stops at the size announced, a
stalled server is given up within seconds, and each ends in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub_server import Hostile, HubServer, Repo
from test_hub import TINY, blobs, run


@pytest.fixture
def tiny_repo() -> Repo:
    return Repo.from_dir(TINY)


def snapshot(root: Path) -> dict[str, int]:
    """Every file below `root` and its size."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpt2viz: error: "), result.stderr
    return lines[0]


def test_an_etag_that_climbs_out_of_the_cache_is_refused(tmp_path, tiny_repo):
    """An ETag of '../../../x/pwned' named the blob: the weights landed outside the cache, a file
    already there was read as the weights, and partial files beside it were deleted."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "pwned").write_bytes(b"a file of the user's, read as weights")
    (outside / "keep.gpt2viz.incomplete").write_bytes(b"theirs")
    before = snapshot(outside)
    climb = "../" * 12 + str(outside / "pwned").lstrip("/")
    with HubServer({"org/tiny": tiny_repo}, hostile=Hostile(etag=climb)) as hub:
        result = run(["--model", "org/tiny", "--json", str(tmp_path / "t.json")], hub.url, tmp_path / "hf")
    assert result.returncode == 1
    assert "no hub checksum" in one_line(result)
    assert snapshot(outside) == before and not (tmp_path / "t.json").exists()
    assert not (outside / "pwned.lock").exists()


@pytest.mark.parametrize("hostile", [
    Hostile(commit="../../../../../outside"),
    Hostile(extra_files=("model-/../../../../../outside/x.safetensors", "../config.json", "a/model.safetensors")),
])
def test_a_commit_or_file_names_that_climb_out_are_never_followed(tmp_path, tiny_repo, hostile):
    outside = tmp_path / "outside"
    outside.mkdir()
    with HubServer({"org/tiny": tiny_repo}, hostile=hostile) as hub:
        result = run(["--model", "org/tiny", "--json", str(tmp_path / "t.json")], hub.url, tmp_path / "hf")
        fetched = [path for method, path, _ in hub.requests if method == "GET" and "/resolve/" in path]
    assert snapshot(outside) == {}
    assert all(".." not in path for path in fetched), fetched
    if result.returncode:
        one_line(result)


@pytest.mark.parametrize("hostile, said", [
    (Hostile(endless=True), "bytes it announced; stopped there"),
    (Hostile(size_lie=5_000_000), "bytes it announced; stopped there"),
])
def test_a_download_stops_at_the_size_the_server_announced(tmp_path, tiny_repo, hostile, said):
    """A server whose HEAD says 20.7 MB and whose GET never ends filled 7.9 GB in 120 s."""
    size = len(tiny_repo.files["model.safetensors"])
    with HubServer({"org/tiny": tiny_repo}, hostile=hostile) as hub:
        result = run(["--model", "org/tiny", "--json", str(tmp_path / "t.json")], hub.url, tmp_path / "hf", timeout=120)
    assert result.returncode == 1 and said in one_line(result)
    on_disk = sum(p.stat().st_size for p in blobs(tmp_path / "hf").iterdir())
    assert on_disk <= size + len(tiny_repo.files["config.json"]) + len(tiny_repo.files["tokenizer.json"])


@pytest.mark.slow  # waits out six reads of 1 s and the pauses between them (12 s)
def test_a_stalled_server_is_given_up_within_seconds(tmp_path, tiny_repo):
    """It took 77 s (the client's 10 s reads, 5 retries). The server stalls after 1 MB: bytes have
    arrived, so the client's count of retries is back at its own 5, and it is given up after six
    reads (gpt2viz/model/sources.py: 36 s with gpt2viz's 5 s reads). Here the user's own setting,
    HF_HUB_DOWNLOAD_TIMEOUT=1, which gpt2viz leaves alone, makes them 1 s. The bound is the
    subprocess's timeout, far above that, so that a busy machine cannot fail it."""
    with HubServer({"org/tiny": tiny_repo}, hang_after=1_000_000) as hub:
        result = run(["--model", "org/tiny", "--json", str(tmp_path / "t.json")], hub.url, tmp_path / "hf", timeout=60,
                     HF_HUB_DOWNLOAD_TIMEOUT="1")
    assert result.returncode == 1
    one_line(result)


@pytest.mark.parametrize("status", [500, 403, 404])
def test_an_error_status_is_one_line(tmp_path, tiny_repo, status):
    with HubServer({"org/tiny": tiny_repo}, hostile=Hostile(status=status)) as hub:
        result = run(["--model", "org/tiny", "--json", str(tmp_path / "t.json")], hub.url, tmp_path / "hf")
    assert result.returncode == 1
    one_line(result)


def test_a_listing_of_many_files_fetches_only_what_is_read(tmp_path, tiny_repo):
    names = tuple(f"shard-{i:05d}.bin" for i in range(20_000))
    with HubServer({"org/tiny": tiny_repo}, hostile=Hostile(extra_files=names)) as hub:
        result = run(["--model", "org/tiny", "--json", str(tmp_path / "t.json")], hub.url, tmp_path / "hf")
        fetched = sorted(path.rsplit("/", 1)[-1] for method, path, _ in hub.requests if method == "GET" and "/resolve/" in path)
    assert result.returncode == 0, result.stderr
    assert fetched == ["config.json", "model.safetensors", "tokenizer.json"]
