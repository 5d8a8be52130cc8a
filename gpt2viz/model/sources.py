"""Where a model comes from: the bundled `tiny`, a local directory, or a Hugging Face hub id.

Hub downloads fetch only what gpt2viz reads (config, safetensors, tokenizer files). When the hub
cannot be reached the answer comes within a few seconds, not after the client's long retry loop.
"""

from __future__ import annotations

import fnmatch
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import HubUnreachable, ModelSourceError, notice
from ..i18n import _

BUNDLED = "tiny"
DEFAULT_HUB_MODEL = "gpt2"
HUB_TIMEOUT_S = 3.0
DOWNLOAD_PIECE = 256 * 1024  # bytes the client reads (and reports) at a time
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


def resolve(source: str | None, progress: Callable[[DownloadProgress], None] | None = None) -> ResolvedSource:
    """Finds the checkpoint directory for `source` (None: real GPT-2 if reachable, else `tiny`),
    downloading it from the hub if need be, with `progress` told how far it has come."""
    if source is None:
        try:
            return _from_hub(DEFAULT_HUB_MODEL, progress)
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
    return _from_hub(source, progress)


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


@dataclass(frozen=True)
class DownloadProgress:
    """How far a download has come: the file being fetched, and all of them together (bytes)."""

    file: str
    file_done: int
    file_total: int
    done: int
    total: int
    files: int  # how many files are fetched in all


def _wanted(files: list[str]) -> list[str]:
    """The files gpt2viz reads, of a repository's files."""
    return [f for f in files if any(fnmatch.fnmatch(f, pattern) for pattern in HUB_FILES)]


def _download(
    repo_id: str, files: list[str], progress: Callable[[DownloadProgress], None] | None
) -> Path:
    """Fetches `files` into the Hugging Face cache, one at a time, reporting bytes to `progress`
    (nothing is drawn here). A file left half-fetched by an earlier run goes on from where it
    stopped: the client asks for the rest with a Range request."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import logging as hub_logging
    from tqdm.auto import tqdm

    # The client logs each retry ("Trying to resume download...") on stderr; gpt2viz says what
    # happened in one line of its own.
    hub_logging.set_verbosity_error()
    # It reads (and reports, and can resume after a dropped connection from) 10 MB at a time:
    # a bar that moves every few seconds on a slow line. 256 KiB pieces cost nothing measurable.
    from huggingface_hub import constants

    constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, DOWNLOAD_PIECE)

    # Sizes first (one metadata request per file), so that the total is known from the start.
    sizes = {f: hf_hub_download(repo_id, f, dry_run=True) for f in files}
    fetched = [f for f in files if sizes[f].will_download]
    total = sum(sizes[f].file_size for f in fetched)
    done_before = 0
    path = None
    for name in files:
        file_total = sizes[name].file_size

        class Reporter(tqdm):  # the client's per-file progress bar, turned into reports
            def __init__(self, *args, **kwargs) -> None:
                kwargs["disable"] = True
                super().__init__(*args, **kwargs)
                self.bytes = int(kwargs.get("initial") or 0)  # what an earlier run already fetched
                self.report()

            def update(self, n: int | float = 1) -> None:
                self.bytes += int(n)
                self.report()

            def report(self) -> None:
                if progress is not None:
                    progress(DownloadProgress(name, self.bytes, file_total, done_before + self.bytes, total, len(fetched)))

        # The default revision ("main"): the cache then records which commit main was, and the next
        # run finds the snapshot without asking the hub.
        path = Path(hf_hub_download(repo_id, name, tqdm_class=Reporter)).parent
        if name in fetched:
            done_before += file_total
    return path


def _from_hub(repo_id: str, progress: Callable[[DownloadProgress], None] | None = None) -> ResolvedSource:
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
    try:
        path = _download(repo_id, _wanted(files), progress)
    except Exception as err:
        detail = (str(err).strip().splitlines() or [""])[-1]  # the client's messages run over several lines
        raise ModelSourceError(
            _("{repo_id}: download failed ({error})").format(repo_id=repo_id, error=f"{type(err).__name__}: {detail}")
        ) from None
    return ResolvedSource(repo_id, path, "hub")
