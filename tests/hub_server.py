"""A local stand-in for the Hugging Face hub, for tests of the download path through the real
`huggingface_hub` client (`HF_ENDPOINT=http://127.0.0.1:<port>`). Loopback only.

It speaks the parts of the hub's HTTP protocol that the client uses to download a model:

- `GET /api/models/<repo>[/revision/<rev>]`: repository info (`sha`, `siblings`), 404 with
  `X-Error-Code: RepoNotFound` for an unknown repository;
- `GET /api/models/<repo>/tree/<rev>`: the file listing;
- `HEAD /<repo>/resolve/<rev>/<file>`: file metadata: `X-Repo-Commit`, `ETag`, `Content-Length`;
- `GET /<repo>/resolve/<rev>/<file>`: the bytes, honouring `Range: bytes=N-` (resumed downloads).

Knobs for the unhappy paths: `rate` (bytes per second, to make a download visible), `cut_after`
(close the connection once, after that many bytes of a file: an interrupted download), `hang_after`
(stop sending after that many bytes and keep the connection open: a server that hangs).

And a hostile server's (`Hostile`): an ETag, a commit or file names that climb out of the cache
(`etag`, `commit`, `extra_files`), a body that never ends (`endless`), more bytes than the HEAD
announced (`size_lie`), a status code for every file (`status`), a listing of many files.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

CHUNK = 64 * 1024


@dataclass
class Repo:
    files: dict[str, bytes]
    sha: str = ""

    def __post_init__(self) -> None:
        if not self.sha:
            digest = hashlib.sha1()
            for name in sorted(self.files):
                digest.update(name.encode() + hashlib.sha256(self.files[name]).digest())
            self.sha = digest.hexdigest()

    @classmethod
    def from_dir(cls, path: Path) -> "Repo":
        return cls({p.name: p.read_bytes() for p in sorted(Path(path).iterdir()) if p.is_file()})


@dataclass
class Hostile:
    """What a hostile or broken server sends instead of the truth (None: the truth)."""

    etag: str | None = None  # the ETag of every file (quotes added)
    commit: str | None = None  # X-Repo-Commit of every file
    extra_files: tuple[str, ...] = ()  # names listed besides the repository's own
    endless: bool = False  # a GET's body never ends (no Content-Length; the HEAD still says the size)
    size_lie: int = 0  # a GET sends this many bytes more than the HEAD announced
    status: int | None = None  # every file's GET answers this status


@dataclass
class HubServer:
    repos: dict[str, Repo] = field(default_factory=dict)
    rate: float | None = None  # bytes per second of file bodies
    cut_after: int | None = None  # bytes of a file body sent before closing the connection (once)
    hang_after: int | None = None  # bytes of a file body sent before hanging
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # (method, path, range)
    hostile: "Hostile | None" = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                server._handle(self, body=True)

            def do_HEAD(self) -> None:
                server._handle(self, body=False)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "HubServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops answering (hanging responses are released) and frees the port."""
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "HubServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the protocol ---------------------------------------------------------------------------
    def _handle(self, req: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(req.path.split("?", 1)[0])
        self.requests.append((req.command, path, req.headers.get("Range")))
        if path.startswith("/api/models/"):
            return self._info(req, path[len("/api/models/") :], body)
        if "/resolve/" in path:
            repo_id, _, rest = path[1:].partition("/resolve/")
            revision, _, filename = rest.partition("/")
            return self._file(req, repo_id, revision, filename, body)
        return self._error(req, 404, "EntryNotFound", "not found", body)

    def _repo(self, repo_id: str, revision: str) -> Repo | None:
        repo = self.repos.get(repo_id)
        if repo is None or revision not in ("main", repo.sha):
            return None
        return repo

    def _info(self, req, rest: str, body: bool) -> None:
        if "/tree/" in rest:
            return self._tree(req, *rest.split("/tree/", 1), body)
        repo_id, _, revision = rest.partition("/revision/")
        repo = self._repo(repo_id, revision or "main")
        if repo is None:
            return self._error(req, 404, "RepoNotFound", "Repository not found", body)
        info = {
            "id": repo_id,
            "modelId": repo_id,
            "sha": repo.sha,
            "private": False,
            "gated": False,
            "disabled": False,
            "siblings": [{"rfilename": name} for name in [*sorted(repo.files), *self._extra_files()]],
            "tags": [],
        }
        self._send(req, 200, json.dumps(info).encode(), {"Content-Type": "application/json"}, body)

    def _tree(self, req, repo_id: str, revision: str, body: bool) -> None:
        """The file listing `snapshot_download` filters with its allow_patterns (one page)."""
        repo = self._repo(repo_id, revision.split("/")[0])
        if repo is None:
            return self._error(req, 404, "RepoNotFound", "Repository not found", body)
        entries = [
            {"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
            for name, data in sorted(repo.files.items())
        ]
        self._send(req, 200, json.dumps(entries).encode(), {"Content-Type": "application/json"}, body)

    def _extra_files(self) -> tuple[str, ...]:
        return self.hostile.extra_files if self.hostile else ()

    def _file(self, req, repo_id: str, revision: str, filename: str, body: bool) -> None:
        repo = self._repo(repo_id, revision)
        if repo is None:
            return self._error(req, 404, "RepoNotFound", "Repository not found", body)
        data = repo.files.get(filename)
        if data is None:
            return self._error(req, 404, "EntryNotFound", "Entry not found", body, repo.sha)
        hostile = self.hostile or Hostile()
        if hostile.status is not None and body:
            return self._error(req, hostile.status, "", f"status {hostile.status}", body, repo.sha)
        etag = '"' + (hostile.etag or hashlib.sha256(data).hexdigest()) + '"'
        start = 0
        spec = req.headers.get("Range")
        if spec and spec.startswith("bytes="):
            start = int(spec[len("bytes=") :].split("-")[0] or 0)
        headers = {"X-Repo-Commit": hostile.commit or repo.sha, "ETag": etag, "Accept-Ranges": "bytes"}
        if body and hostile.endless:
            req.send_response(200)
            for name, value in {**headers, "Connection": "close"}.items():
                req.send_header(name, value)
            req.end_headers()
            req.close_connection = True
            while not self._stop.is_set():
                try:
                    req.wfile.write(b"\0" * CHUNK)
                except OSError:  # the client hung up
                    return
            return
        if body and hostile.size_lie:
            data = data + b"\0" * hostile.size_lie
        if start:
            if start >= len(data):
                return self._send(req, 416, b"", headers, body)
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        part = data[start:]
        req.send_response(206 if start else 200)
        for name, value in {**headers, "Content-Length": str(len(part))}.items():
            req.send_header(name, value)
        req.end_headers()
        if body:
            self._stream(req, part, start)

    def _stream(self, req, part: bytes, offset: int) -> None:
        sent = 0
        began = time.monotonic()
        while sent < len(part) and not self._stop.is_set():
            chunk = part[sent : sent + CHUNK]
            done = offset + sent
            for limit, action in ((self.cut_after, "cut"), (self.hang_after, "hang")):
                if limit is not None and done + len(chunk) > limit:
                    if action == "cut":
                        self.cut_after = None  # a dropped connection, not a broken server
                    chunk = chunk[: max(0, limit - done)]
                    if chunk:
                        req.wfile.write(chunk)
                        req.wfile.flush()
                    if action == "hang":
                        self._stop.wait()
                    req.close_connection = True
                    return
            req.wfile.write(chunk)
            req.wfile.flush()
            sent += len(chunk)
            if self.rate:
                ahead = sent / self.rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)

    def _error(self, req, status: int, code: str, message: str, body: bool, sha: str | None = None) -> None:
        headers = {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
        if sha:
            headers["X-Repo-Commit"] = sha
        self._send(req, status, json.dumps({"error": message}).encode(), headers, body)

    def _send(self, req, status: int, payload: bytes, headers: dict[str, str], body: bool) -> None:
        req.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(payload))}.items():
            req.send_header(name, value)
        req.end_headers()
        if body:
            req.wfile.write(payload)
