"""Model sources: the bundled model, directories, and the hub (mocked: unreachable here)."""

from __future__ import annotations

import time

import pytest

from gpt2viz.errors import ModelSourceError
from gpt2viz.model import sources
from gpt2viz.trace.notices import notice_text


@pytest.fixture
def empty_hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def _not_found(*args, **kwargs):
    from huggingface_hub.errors import RepositoryNotFoundError

    # Built without an HTTP response object, whose class depends on the hub client's version.
    err = RepositoryNotFoundError.__new__(RepositoryNotFoundError)
    Exception.__init__(err, "404 Repository Not Found")
    raise err


def test_unknown_hub_id_says_so(empty_hf_cache, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "model_info", _not_found)
    with pytest.raises(ModelSourceError, match="no such model on the Hugging Face hub"):
        sources.resolve("nobody/no-such-model")


def test_a_hub_that_hangs_is_given_up_on_within_the_bound(empty_hf_cache, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "model_info", lambda *a, **k: time.sleep(30))
    monkeypatch.setattr(sources, "HUB_TIMEOUT_S", 1.0)  # the bound is the module's; the next test waits its 3 s
    start = time.monotonic()
    with pytest.raises(sources.HubUnreachable, match="did not answer"):
        sources.resolve("someone/model")
    assert time.monotonic() - start < sources.HUB_TIMEOUT_S + 1.5


def test_default_falls_back_to_tiny_within_3_s_with_a_notice(empty_hf_cache, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "model_info", lambda *a, **k: time.sleep(30))
    start = time.monotonic()
    resolved = sources.resolve(None)
    assert time.monotonic() - start < 3.5
    assert resolved.name == "tiny" and resolved.kind == "bundled"
    said = notice_text(resolved.notice)
    assert "unreachable" in said and "load the model 'gpt2'" in said


def test_a_hub_repo_without_safetensors_is_refused(empty_hf_cache, monkeypatch):
    import huggingface_hub

    class Info:
        siblings = [type("S", (), {"rfilename": n})() for n in ("config.json", "pytorch_model.bin")]

    monkeypatch.setattr(huggingface_hub, "model_info", lambda *a, **k: Info())
    with pytest.raises(ModelSourceError, match="never unpickles"):
        sources.resolve("someone/pickled-only")


def test_paths_and_the_bundled_name(tmp_path):
    assert sources.resolve("tiny").path == sources.bundled_dir()
    with pytest.raises(ModelSourceError, match="no such directory"):
        sources.resolve(str(tmp_path / "missing"))
    with pytest.raises(ModelSourceError, match="no such directory"):
        sources.resolve("./relative/missing")
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(ModelSourceError, match="is a file"):
        sources.resolve(str(a_file))
