"""Where a model comes from: the bundled `tiny`, a local directory, or a Hugging Face hub id.

Hub downloads fetch only what gpt2viz reads (config, safetensors, tokenizer files). When the hub
cannot be reached the answer comes within a few seconds, not after the client's long retry loop.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import HubUnreachable, ModelSourceError, notice
from ..i18n import _

BUNDLED = "tiny"
DEFAULT_HUB_MODEL = "gpt2"
HUB_TIMEOUT_S = 3.0
HUB_FILES = [
    "config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-*.safetensors",
    "tokenizer.json",
    "vocab.json",
    "merges.txt",
]


@dataclass(frozen=True)
class ResolvedSource:
    """A checkpoint directory on disk and what the user called it."""

    name: str
    path: Path
    kind: str  # "bundled", "local" or "hub"
    notice: dict | None = None  # a notice (gpt2viz.errors.notice) to pass on to the user


def bundled_dir(name: str = BUNDLED) -> Path:
    """The directory of a model shipped with gpt2viz (inside the package once installed)."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "assets" / name, here.parent / "assets" / name):
        if (candidate / "config.json").is_file():
            return candidate
    raise ModelSourceError(_("the bundled model {name!r} is missing from this installation").format(name=name))


def _looks_like_path(source: str) -> bool:
    # A hub id is `name` or `org/name`; anything else that is not a directory is a bad path.
    return source.startswith((".", "/", "~", "\\")) or source.count("/") > 1 or "\\" in source


def resolve(source: str | None) -> ResolvedSource:
    """Finds the checkpoint directory for `source` (None: real GPT-2 if reachable, else `tiny`)."""
    if source is None:
        try:
            return _from_hub(DEFAULT_HUB_MODEL)
        except HubUnreachable:
            return ResolvedSource(
                BUNDLED,
                bundled_dir(),
                "bundled",
                notice=notice("hub_unreachable"),
            )
    if source == BUNDLED:
        return ResolvedSource(BUNDLED, bundled_dir(), "bundled")
    path = Path(source).expanduser()
    if path.is_dir():
        return ResolvedSource(source, path, "local")
    if path.exists():
        raise ModelSourceError(_("{source}: is a file, not a checkpoint directory").format(source=source))
    if _looks_like_path(source):
        raise ModelSourceError(_("{source}: no such directory").format(source=source))
    return _from_hub(source)


def _cached_snapshot(repo_id: str) -> Path | None:
    from huggingface_hub import snapshot_download

    try:
        path = Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, local_files_only=True))
    except Exception:  # not in the cache, or an incomplete snapshot
        return None
    has_weights = (path / "model.safetensors").is_file() or (path / "model.safetensors.index.json").is_file()
    return path if (path / "config.json").is_file() and has_weights else None


def _repo_files(repo_id: str) -> list[str]:
    """The file names of a hub repository, or an error within HUB_TIMEOUT_S."""
    from huggingface_hub import model_info
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    result: dict[str, object] = {}

    def ask() -> None:
        try:
            info = model_info(repo_id, timeout=HUB_TIMEOUT_S)
            result["files"] = [s.rfilename for s in (info.siblings or [])]
        except Exception as err:  # reported below, in the caller's thread
            result["error"] = err

    # A daemon thread bounds the wait even when name resolution itself hangs.
    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(HUB_TIMEOUT_S)
    if thread.is_alive():
        raise HubUnreachable(
            _("{repo_id}: the Hugging Face hub did not answer within {seconds} s").format(
                repo_id=repo_id, seconds=f"{HUB_TIMEOUT_S:.0f}"
            )
        )
    err = result.get("error")
    if isinstance(err, (RepositoryNotFoundError, RevisionNotFoundError)):
        raise ModelSourceError(
            _("{repo_id}: no such model on the Hugging Face hub (and no such local directory)").format(repo_id=repo_id)
        )
    if isinstance(err, GatedRepoError):
        raise ModelSourceError(
            _("{repo_id}: this hub model is gated; log in with `hf auth login` first").format(repo_id=repo_id)
        )
    if err is not None:
        raise HubUnreachable(
            _("{repo_id}: cannot reach the Hugging Face hub ({error})").format(repo_id=repo_id, error=type(err).__name__)
        )
    return result["files"]  # type: ignore[return-value]


def _from_hub(repo_id: str) -> ResolvedSource:
    cached = _cached_snapshot(repo_id)
    if cached is not None:
        return ResolvedSource(repo_id, cached, "hub")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise HubUnreachable(_("{repo_id}: not in the local cache and HF_HUB_OFFLINE is set").format(repo_id=repo_id))
    files = _repo_files(repo_id)
    if "model.safetensors" not in files and "model.safetensors.index.json" not in files:
        raise ModelSourceError(
            _("{repo_id}: the hub repository has no safetensors weights; gpt2viz never unpickles .bin files").format(
                repo_id=repo_id
            )
        )
    from huggingface_hub import snapshot_download

    try:
        # huggingface_hub draws its own progress bars on stderr while it downloads.
        path = Path(snapshot_download(repo_id, allow_patterns=HUB_FILES))
    except Exception as err:
        raise ModelSourceError(
            _("{repo_id}: download failed ({error})").format(repo_id=repo_id, error=f"{type(err).__name__}: {err}")
        ) from None
    return ResolvedSource(repo_id, path, "hub")
