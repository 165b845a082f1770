"""A local, stdlib-only stand-in for the Hugging Face Hub, for tests.

It speaks enough of the Hub's HTTP protocol for the real ``huggingface_hub`` client (2.4) to work against it when
``HF_ENDPOINT`` (and ``huggingface_hub.constants.ENDPOINT``) point at ``LocalHub.url``: model info, tree listing,
the sharded safetensors-metadata endpoint, HEAD/GET ``/resolve`` with ranges, and the Hub's error headers.
It also logs every request and can inject faults (latency, 500s, dropped connections, stalls, 429s, truncation).

Usage::

    with LocalHub({"org/model": RepoSpec(root=folder)}) as hub:
        ...  # hub.url is "http://127.0.0.1:PORT"
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode

__all__ = [
    "DTYPE_BITS",
    "LFS_SUFFIXES",
    "LocalHub",
    "RepoSpec",
    "RequestRecord",
    "default_sha",
    "read_safetensors_header",
    "running_hub",
    "write_json",
    "write_safetensors_stub",
]

# Files served as if stored with Git LFS (tree "lfs" entry, X-Linked-Etag / X-Linked-Size on resolve).
LFS_SUFFIXES: tuple[str, ...] = (".safetensors", ".bin", ".gguf")

# Bits per element of the safetensors dtypes, to lay out stub headers with consistent data_offsets.
DTYPE_BITS: dict[str, int] = {
    "F64": 64, "F32": 32, "F16": 16, "BF16": 16,
    "I64": 64, "I32": 32, "I16": 16, "I8": 8,
    "U64": 64, "U32": 32, "U16": 16, "U8": 8, "BOOL": 8,
    "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F6_E2M3": 6, "F6_E3M2": 6, "F4": 4, "C64": 64,
}  # fmt: skip

_FIXED_DATE = "2024-01-01T00:00:00.000Z"
_SHA_RE = re.compile(r"[0-9a-f]{40}")
_RANGE_RE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", re.IGNORECASE)
# Path segments that follow a repo id; used to tell a one-segment repo id ("gpt2") from "org/name".
_REPO_SUBROUTES = {"resolve", "tree", "revision", "safetensors-metadata", "paths-info"}
# The `expand` values the client knows (hf_api.ExpandModelProperty_T); anything else gets a 400, as on the Hub.
_MODEL_EXPAND_FIELDS = frozenset(
    "author baseModels cardData childrenModelCount config createdAt disabled downloads downloadsAllTime evalResults "
    "gated gguf inference inferenceProviderMapping lastModified library_name likes mask_token model-index "
    "pipeline_tag private resourceGroup safetensors sha siblings spaces tags transformersInfo trendingScore "
    "usedStorage widgetData".split()
)


def default_sha(repo_id: str) -> str:
    """The deterministic commit sha that a repo's main revision gets when its RepoSpec leaves `sha` empty."""
    return hashlib.sha1(f"local-hub-commit:{repo_id}".encode()).hexdigest()


@dataclass
class RepoSpec:
    """One model repo. Its files on main are the files under `root`, recursively."""

    root: Path
    sha: str = ""  # empty: filled in by LocalHub.add_repo with default_sha(repo_id)
    # Extra revisions: name (branch/tag such as "v1" or "refs/pr/4", or a 40-hex sha) -> (commit sha, folder).
    revisions: dict[str, tuple[str, Path]] = field(default_factory=dict)
    gated: bool = False  # file contents need an allowed token: anonymous -> 401, other tokens -> 403 (GatedRepo)
    private: bool = False  # everything needs an allowed token: anonymous -> 401, other tokens -> 404 (RepoNotFound)
    allowed_tokens: set[str] = field(default_factory=set)
    sharded_endpoint: bool = True  # False: /api/models/{repo}/safetensors-metadata/* is a plain 404 (older hub)
    ignore_range: bool = False  # True: file GETs answer 200 with the whole file whatever the Range (RFC 9110 allows it)
    # A hostile or inconsistent one-shot answer: called with the honest {"index": ..., "headers": ...} body, returns the
    # body served instead (e.g. with a tensor or a file the index does not name).
    sharded_answer: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.revisions = {name: (sha, Path(folder)) for name, (sha, folder) in self.revisions.items()}


@dataclass
class RequestRecord:
    """One request as the server saw it. The token itself is never stored."""

    method: str
    path: str  # raw, still percent-encoded, without the query string
    query: str  # raw query string ("" if none)
    range: str | None = None  # the Range header, if any
    status: int | None = None  # None while unanswered; 0 when the connection was dropped without a response
    bytes_sent: int = 0  # body bytes meant to be written (0 for HEAD)
    bytes_written: int = 0  # body bytes the socket accepted before the client hung up (bounded-read checks)
    has_auth: bool = False  # whether an Authorization header came with it
    injected: str | None = None  # fault applied: "500", "drop", "stall", "429", "truncate" or "trickle"
    started: float = field(default_factory=time.monotonic)


@dataclass
class _Response:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


@dataclass(frozen=True)
class _FileInfo:
    path: str  # repo-relative, "/"-separated
    size: int
    git_oid: str  # git blob sha1 (of the LFS pointer for LFS files), as the Hub reports in "oid"
    sha256: str | None  # LFS files only
    pointer_size: int | None  # LFS files only

    @property
    def etag(self) -> str:
        return self.sha256 or self.git_oid


def _json_response(status: int, obj: Any, headers: Iterable[tuple[str, str]] = ()) -> _Response:
    return _Response(
        status, [("Content-Type", "application/json; charset=utf-8"), *headers], json.dumps(obj).encode()
    )


def _error(status: int, code: str | None, message: str, headers: Iterable[tuple[str, str]] = ()) -> _Response:
    """An error as the Hub sends it: the client picks the exception class from X-Error-Code alone."""
    extra = [("X-Error-Message", message), *headers]
    if code is not None:
        extra.insert(0, ("X-Error-Code", code))
    return _json_response(status, {"error": message}, extra)


def _truthy(values: list[str] | None) -> bool:
    return bool(values) and values[-1].lower() in ("1", "true", "yes")


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """Parse the JSON header of a safetensors file (8-byte little-endian length, then that many bytes of JSON)."""
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path} is too small to be a safetensors file")
        (length,) = struct.unpack("<Q", prefix)
        raw = f.read(length)
    if len(raw) < length:
        raise ValueError(f"{path}: header says {length} bytes but the file is shorter")
    header = json.loads(raw)
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    return header


def write_safetensors_stub(
    path: Path,
    tensors: Mapping[str, tuple[str, list[int]]],
    metadata: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Write a header-only safetensors file: {name: (dtype, shape)} laid out back to back, with no tensor data.

    The header is padded with spaces to a multiple of 8, like real files. Returns the header written.
    """
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, (dtype, shape) in tensors.items():
        nbytes = math.ceil(math.prod(shape) * DTYPE_BITS[dtype] / 8)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    return header


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2))


class _Server(ThreadingHTTPServer):
    # Handler threads are daemons so a forgotten stop() can't hang interpreter exit; stop() joins them itself.
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default listen backlog of 5 drops the SYNs of a burst of connections (e.g. 64 concurrent shard
    # reads), which the client's kernel only retries after 1 s: an artefact no real hub has.
    request_queue_size = 256

    def __init__(self, hub: LocalHub) -> None:
        self.hub = hub
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up mid-response (timeouts, truncation tests) are expected; anything else is a bug.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    timeout = 120  # backstop: an idle keep-alive connection can't pin a thread forever
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as two writes; with Nagle's algorithm on, the body waits for the client's delayed
        # ACK of the headers (40 ms on Linux) on every keep-alive request after the first, a stall no real server
        # (the Hub's CDN included) adds, and one that would dominate timings of a 50 ms-latency hub.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.hub._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.hub._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log replaces stderr noise

    def do_GET(self) -> None:
        self.server.hub._handle(self, "GET")

    def do_HEAD(self) -> None:
        self.server.hub._handle(self, "HEAD")

    def do_POST(self) -> None:
        self.server.hub._handle(self, "POST")

    def do_PUT(self) -> None:
        self.server.hub._handle(self, "PUT")

    def do_DELETE(self) -> None:
        self.server.hub._handle(self, "DELETE")


class LocalHub:
    """A local Hub on 127.0.0.1. Fault-injection attributes may be changed at any time, also while serving."""

    def __init__(self, repos: Mapping[str, RepoSpec] | None = None, *, seed: int = 0) -> None:
        self.repos: dict[str, RepoSpec] = {}
        for repo_id, spec in (repos or {}).items():
            self.add_repo(repo_id, spec)
        self.url: str = ""
        # Fault injection (all off by default).
        self.latency_s: float = 0.0
        self.fail_rate: float = 0.0
        self.fail_kinds: tuple[str, ...] = ("500", "drop")
        self.fault_seed: int = seed  # picks which requests fail_rate hits (see _injected_fault)
        self.stall_paths: set[str] = set()
        self.stall_s: float = 30.0
        self.rate_limit_once: set[str] = set()  # a substring is removed once it has produced its 429
        self.truncate_paths: set[str] = set()
        # GETs whose path contains a key are answered 200 with this body as-is and Content-Encoding: gzip (gzip bombs:
        # see gzip_body); the body is whatever the test compressed, the route is not consulted.
        self.gzip_answers: dict[str, bytes] = {}
        # Slow-loris: GET bodies of matching paths are sent one byte every trickle_interval_s (the client's read
        # timeout never fires: it is never silent for long).
        self.trickle_paths: set[str] = set()
        self.trickle_interval_s: float = 1.0
        # Tree pages, as on the Hub: 1000 entries, 50 with expand=true.
        self.tree_page_size: int = 1000
        self.tree_page_size_expand: int = 50

        self._lock = threading.Lock()
        self._times_seen: dict[tuple[str, str, str, str], int] = {}  # (method, path, query, range) -> count
        self._log: list[RequestRecord] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._file_cache: dict[tuple[str, int, int], tuple[int, str, str | None, int | None]] = {}
        self._metadata_cache: dict[tuple[str, str, str, tuple[Any, ...]], bytes] = {}

    # ----------------------------------------------------------------------------------------------- lifecycle

    def add_repo(self, repo_id: str, spec: RepoSpec) -> None:
        """Register (or replace) a repo. Fills in `spec.sha` if it is empty, so callers can read it afterwards."""
        if not spec.sha:
            spec.sha = default_sha(repo_id)
        self.repos[repo_id] = spec

    def start(self) -> str:
        """Start serving on a free port in a daemon thread; returns the base URL."""
        if self._server is not None:
            return self.url
        self._stopping.clear()
        self._server = _Server(self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # A short poll interval keeps stop() fast: shutdown() waits for the serve loop to notice.
        server = self._server
        self._thread = threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.02), name="local-hub", daemon=True
        )
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop serving, close every open connection (waking stalled requests) and join all server threads."""
        server, thread = self._server, self._thread
        if server is None:
            return
        with self._lock:
            self._stopping.set()  # also seen by _track, so a connection accepted from now on is closed at once
            conns = dict(self._conns)
        server.shutdown()
        for conn in conns:
            _shutdown_socket(conn)
        server.server_close()
        for handler_thread in conns.values():
            handler_thread.join(timeout=5)
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> LocalHub:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------------- logging

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of the request log, oldest first (records are appended when a request arrives)."""
        with self._lock:
            return list(self._log)

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    def _track(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns[conn] = threading.current_thread()
            stopping = self._stopping.is_set()
        if stopping:
            _shutdown_socket(conn)

    def _untrack(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.pop(conn, None)

    # ------------------------------------------------------------------------------------------------ dispatch

    def _handle(self, handler: _Handler, method: str) -> None:
        raw_path, _, query = handler.path.partition("?")
        auth = handler.headers.get("Authorization")
        record = RequestRecord(method, raw_path, query, handler.headers.get("Range"), has_auth=auth is not None)
        with self._lock:
            self._log.append(record)
        length = int(handler.headers.get("Content-Length") or 0)
        body_in = handler.rfile.read(length) if length > 0 else b""
        token = auth[7:].strip() if auth is not None and auth[:7].lower() == "bearer " else None

        if self.latency_s > 0 and self._stopping.wait(self.latency_s):
            return self._drop(handler, record, None)
        if any(s in raw_path for s in list(self.stall_paths)):
            record.injected = "stall"
            if self._stopping.wait(self.stall_s):
                return self._drop(handler, record, "stall")

        response: _Response | None = None
        if self.fail_rate > 0:
            kind = self._injected_fault(method, raw_path, query, record.range)
            if kind is not None:
                if kind == "drop":
                    return self._drop(handler, record, "drop")
                record.injected = "500"
                response = _error(500, None, "Internal Error (injected by LocalHub)")
        if response is None:
            with self._lock:
                hit = next((s for s in self.rate_limit_once if s in raw_path), None)
                if hit is not None:
                    self.rate_limit_once.discard(hit)
            if hit is not None:
                record.injected = "429"
                response = _error(429, None, "Too Many Requests (injected by LocalHub)", [("Retry-After", "1")])
        if response is None and method == "GET":
            bomb = next((body for key, body in list(self.gzip_answers.items()) if key in raw_path), None)
            if bomb is not None:
                record.injected = "gzip"
                response = _Response(200, [("Content-Encoding", "gzip"), ("ETag", '"gzip"')], bomb)
        if response is None:
            try:
                response = self._route(method, raw_path, query, token, body_in, handler.headers)
            except Exception as e:  # a bug here must show up as a 500, not a hung client
                response = _error(500, None, f"LocalHub internal error: {e!r}")
        self._send(handler, record, method, response)

    def _injected_fault(self, method: str, raw_path: str, query: str, range_header: str | None) -> str | None:
        """The fault fail_rate gives this request ("500", "drop"), or None: independent for every request.

        Each decision comes from its own generator, seeded by fault_seed, the request (method, path, query, Range)
        and how many times this hub has seen that request before (so a retry is a fresh draw). One stream shared
        by all handler threads would hand its draws out in arrival order: a dense run in it then goes to whichever
        requests come in at that moment, which while every other worker is waiting out a backoff are the retries of
        the operations that just failed, so their faults would cluster, and differ from run to run with thread
        timing. Keyed draws are independent of timing, and the same in every run.
        """
        key = (method, raw_path, query, range_header or "")
        with self._lock:
            seen = self._times_seen[key] = self._times_seen.get(key, 0) + 1
        rng = random.Random(f"{self.fault_seed}\0{method}\0{raw_path}\0{query}\0{range_header or ''}\0{seen}")
        if rng.random() >= self.fail_rate:
            return None
        return rng.choice(self.fail_kinds) if self.fail_kinds else "500"

    def _drop(self, handler: _Handler, record: RequestRecord, injected: str | None) -> None:
        """Close the connection without answering."""
        record.status = 0
        record.injected = injected or record.injected
        handler.close_connection = True
        _shutdown_socket(handler.connection)

    def _send(self, handler: _Handler, record: RequestRecord, method: str, response: _Response) -> None:
        body = b"" if method == "HEAD" else response.body
        truncate = (
            method == "GET"
            and 200 <= response.status < 300
            and len(body) > 0
            and any(s in record.path for s in list(self.truncate_paths))
        )
        if truncate:
            body = body[: len(body) // 2]
            record.injected = "truncate"
        # Fill the record before writing, so a client that has its answer always finds the request logged.
        record.status = response.status
        record.bytes_sent = len(body)
        try:
            handler.send_response(response.status)
            for key, value in response.headers:
                handler.send_header(key, value)
            handler.send_header("Content-Length", str(len(response.body)))  # the full size, even when truncating
            handler.end_headers()
            if method == "GET" and any(s in record.path for s in list(self.trickle_paths)):
                record.injected = "trickle"
                return self._trickle(handler, record, body)
            for start in range(0, len(body), 1 << 16):  # in pieces, so a client that stops reading is seen
                handler.wfile.write(body[start : start + (1 << 16)])
                record.bytes_written = min(len(body), start + (1 << 16))
            handler.wfile.flush()
        except (ConnectionError, TimeoutError):
            handler.close_connection = True
            return
        if truncate or self._stopping.is_set():
            handler.close_connection = True

    def _trickle(self, handler: _Handler, record: RequestRecord, body: bytes) -> None:
        handler.wfile.flush()
        for i in range(len(body)):
            if self._stopping.wait(self.trickle_interval_s):
                break
            handler.wfile.write(body[i : i + 1])
            handler.wfile.flush()
            record.bytes_written = i + 1
        handler.close_connection = True

    def _route(
        self, method: str, raw_path: str, query: str, token: str | None, body_in: bytes, headers: Mapping[str, str]
    ) -> _Response:
        # Split the raw path before decoding: revision "refs/pr/4" arrives as the single segment refs%2Fpr%2F4.
        segments = raw_path.split("/")[1:]
        if segments and segments[-1] == "":
            segments.pop()
        if segments[:2] == ["api", "agent-harnesses"] and method == "GET":
            # Fetched once per process by the client's user-agent code when telemetry is on; an empty registry.
            return _json_response(200, {"standardEnvVars": [], "harnesses": {}})
        if segments[:1] == ["api"] and len(segments) >= 3 and segments[1] in ("datasets", "spaces", "kernels"):
            return self._repo_not_found(token)  # only model repos live here
        if segments[:2] == ["api", "models"] and len(segments) >= 3:
            repo_id, tail = self._split_repo_id(segments[2:])
            if method == "GET" and not tail:
                return self._model_info(repo_id, "main", query, token)
            if method == "GET" and len(tail) == 2 and tail[0] == "revision":
                return self._model_info(repo_id, unquote(tail[1]), query, token)
            if method == "GET" and len(tail) >= 2 and tail[0] == "tree":
                return self._tree(raw_path, repo_id, unquote(tail[1]), _join(tail[2:]), query, token)
            if method == "GET" and len(tail) >= 2 and tail[0] == "safetensors-metadata":
                return self._sharded_metadata(repo_id, _join(tail[1:]), token)
            if method == "POST" and len(tail) == 2 and tail[0] == "paths-info":
                return self._paths_info(repo_id, unquote(tail[1]), body_in, token)
        elif segments[:1] not in (["api"], ["datasets"], ["spaces"]) and method in ("GET", "HEAD"):
            repo_id, tail = self._split_repo_id(segments)
            if len(tail) >= 3 and tail[0] == "resolve":
                return self._resolve(repo_id, unquote(tail[1]), _join(tail[2:]), token, headers.get("Range"))
        elif segments[:1] in (["datasets"], ["spaces"]) and "resolve" in segments:
            return self._repo_not_found(token)
        return _error(404, None, "Sorry, we can't find the page you are looking for.")

    def _split_repo_id(self, segments: list[str]) -> tuple[str, list[str]]:
        """Split "org/name/rest..." (or a one-segment id such as "gpt2/rest...") into (repo_id, rest)."""
        parts = [unquote(s) for s in segments[:2]]
        if len(parts) == 2 and "/".join(parts) in self.repos:
            return "/".join(parts), segments[2:]
        if parts and (parts[0] in self.repos or len(parts) == 1 or parts[1] in _REPO_SUBROUTES):
            return parts[0], segments[1:]
        return "/".join(parts), segments[2:]

    # ----------------------------------------------------------------------------------------------- access

    def _repo_not_found(self, token: str | None) -> _Response:
        # The Hub answers 401 to anonymous callers whether the repo is missing or private, so as not to leak
        # which private repos exist; with a token it is a 404. X-Error-Code makes both a RepositoryNotFoundError.
        return _error(401 if token is None else 404, "RepoNotFound", "Repository not found")

    def _lookup(self, repo_id: str, token: str | None, *, content: bool) -> RepoSpec | _Response:
        """The repo's spec, or the error the Hub gives this caller. `content`: the request reads file bytes.

        Gating only guards file contents: like the Hub, model info and tree listings of a gated repo are public.
        """
        spec = self.repos.get(repo_id)
        if spec is None:
            return self._repo_not_found(token)
        allowed = token is not None and token in spec.allowed_tokens
        if spec.private and not allowed:
            return self._repo_not_found(token)
        if spec.gated and content and not allowed:
            if token is None:
                message = f"Access to model {repo_id} is restricted. You must have access to it and be authenticated."
                return _error(401, "GatedRepo", message)
            message = f"Access to model {repo_id} is restricted and you are not in the authorized list."
            return _error(403, "GatedRepo", message)
        return spec

    @staticmethod
    def _revision(spec: RepoSpec, revision: str) -> tuple[str, Path] | None:
        """(commit sha, folder) of a branch, tag, PR ref or full commit sha; None if unknown."""
        if revision == "main" or revision == spec.sha:
            return spec.sha, spec.root
        if revision in spec.revisions:
            return spec.revisions[revision]
        for sha, folder in spec.revisions.values():
            if revision == sha:
                return sha, folder
        return None

    def _open_revision(
        self, repo_id: str, revision: str, token: str | None, *, content: bool
    ) -> tuple[RepoSpec, str, Path] | _Response:
        spec = self._lookup(repo_id, token, content=content)
        if isinstance(spec, _Response):
            return spec
        resolved = self._revision(spec, revision)
        if resolved is None:
            return _error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return spec, resolved[0], resolved[1]

    # ------------------------------------------------------------------------------------------------- files

    def _file_info(self, folder: Path, rel: str) -> _FileInfo:
        path = folder / rel
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        cached = self._file_cache.get(key)
        if cached is None:
            data = path.read_bytes()
            if rel.endswith(LFS_SUFFIXES):
                sha256 = hashlib.sha256(data).hexdigest()
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n"
                cached = (len(data), _git_blob_oid(pointer.encode()), sha256, len(pointer))
            else:
                cached = (len(data), _git_blob_oid(data), None, None)
            self._file_cache[key] = cached
        return _FileInfo(rel, *cached)

    def _files(self, folder: Path) -> list[_FileInfo]:
        """Every file under `folder`, sorted by repo path."""
        rels = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        return [self._file_info(folder, rel) for rel in rels if not rel.startswith(".git/")]

    @staticmethod
    def _safe_file(folder: Path, rel: str) -> Path | None:
        parts = rel.split("/")
        if not rel or any(p in ("", ".", "..") for p in parts):
            return None
        path = folder.joinpath(*parts)
        return path if path.is_file() else None

    # ---------------------------------------------------------------------------------------------- endpoints

    def _model_info(self, repo_id: str, revision: str, query: str, token: str | None) -> _Response:
        opened = self._open_revision(repo_id, revision, token, content=False)
        if isinstance(opened, _Response):
            return opened
        spec, commit, folder = opened
        params = parse_qs(query, keep_blank_values=True)
        expand = params.get("expand", []) + params.get("expand[]", [])
        unknown = sorted(set(expand) - _MODEL_EXPAND_FIELDS)
        if unknown:
            return _error(400, None, f'"expand" must be one of {sorted(_MODEL_EXPAND_FIELDS)}; got {unknown}')
        files = self._files(folder)
        blobs = _truthy(params.get("blobs"))  # files_metadata=True sends blobs=true: sizes, blob ids and LFS info
        siblings: list[dict[str, Any]] = []
        for f in files:
            sibling: dict[str, Any] = {"rfilename": f.path}
            if blobs:
                sibling.update(size=f.size, blobId=f.git_oid)
                if f.sha256 is not None:  # sibling "lfs" uses "sha256", unlike tree entries' "oid"
                    sibling["lfs"] = {"size": f.size, "sha256": f.sha256, "pointerSize": f.pointer_size}
            siblings.append(sibling)
        info: dict[str, Any] = {
            "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "modelId": repo_id,
            "author": repo_id.split("/")[0] if "/" in repo_id else None,
            "sha": commit,
            "lastModified": _FIXED_DATE,
            "createdAt": _FIXED_DATE,
            "private": spec.private,
            "gated": "auto" if spec.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
        }
        config = self._config_summary(folder)
        if config is not None:
            info["config"] = config
        summary = self._safetensors_summary(folder, files)
        if summary is not None:
            info["safetensors"] = summary
        if not expand:
            return _json_response(200, info)
        # With expand, the Hub returns only the fields asked for (plus the ids).
        extra = {"usedStorage": sum(f.size for f in files)}
        selected = {key: {**info, **extra}[key] for key in expand if key in info or key in extra}
        return _json_response(200, {"_id": info["_id"], "id": repo_id, **selected})

    @staticmethod
    def _config_summary(folder: Path) -> dict[str, Any] | None:
        """The subset of config.json the Hub echoes in model info."""
        try:
            config = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(config, dict):
            return None
        return {k: config[k] for k in ("architectures", "model_type") if k in config}

    def _safetensors_summary(self, folder: Path, files: list[_FileInfo]) -> dict[str, Any] | None:
        """Raw element counts per dtype, as the Hub's "safetensors" field.

        Weights are the index's shards if there is a root model.safetensors.index.json, else the root *.safetensors
        files (an approximation: the Hub's exact file selection is not documented).
        """
        names: list[str]
        try:
            index = json.loads((folder / "model.safetensors.index.json").read_text())
            names = sorted(set(index["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            names = [f.path for f in files if f.path.endswith(".safetensors") and "/" not in f.path]
        parameters: dict[str, int] = {}
        for name in names:
            path = self._safe_file(folder, name)
            if path is None:
                continue
            try:
                header = read_safetensors_header(path)
            except (OSError, ValueError):
                continue
            for key, tensor in header.items():
                if key != "__metadata__" and isinstance(tensor, dict):
                    dtype = str(tensor.get("dtype"))
                    parameters[dtype] = parameters.get(dtype, 0) + math.prod(tensor.get("shape", []))
        if not parameters:
            return None
        return {"parameters": parameters, "total": sum(parameters.values())}

    def _entry(self, f: _FileInfo, commit: str, expand: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "oid": f.git_oid, "size": f.size, "path": f.path}
        if f.sha256 is not None:
            entry["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": f.pointer_size}
        if expand:
            entry["lastCommit"] = {"id": commit, "title": "Initial commit", "date": _FIXED_DATE}
            entry["securityFileStatus"] = {
                "status": "safe",
                "avScan": {"virusFound": False, "virusNames": None},
                "pickleImportScan": None,
            }
        return entry

    @staticmethod
    def _dir_entry(path: str, commit: str, expand: bool) -> dict[str, Any]:
        oid = hashlib.sha1(f"tree:{commit}:{path}".encode()).hexdigest()
        entry: dict[str, Any] = {"type": "directory", "oid": oid, "size": 0, "path": path}
        if expand:
            entry["lastCommit"] = {"id": commit, "title": "Initial commit", "date": _FIXED_DATE}
        return entry

    def _tree(
        self, raw_path: str, repo_id: str, revision: str, sub: str, query: str, token: str | None
    ) -> _Response:
        opened = self._open_revision(repo_id, revision, token, content=False)
        if isinstance(opened, _Response):
            return opened
        _, commit, folder = opened
        params = parse_qs(query, keep_blank_values=True)
        recursive, expand = _truthy(params.get("recursive")), _truthy(params.get("expand"))
        files = self._files(folder)
        dirs = sorted({"/".join(f.path.split("/")[:i]) for f in files for i in range(1, f.path.count("/") + 1)})
        if sub and sub not in dirs:
            return _error(404, "EntryNotFound", f"{sub} does not exist on {revision}", [("X-Repo-Commit", commit)])
        prefix = f"{sub}/" if sub else ""

        def wanted(path: str) -> bool:
            return path.startswith(prefix) and (recursive or "/" not in path[len(prefix) :])

        entries = [self._dir_entry(d, commit, expand) for d in dirs if wanted(d)]
        entries += [self._entry(f, commit, expand) for f in files if wanted(f.path)]
        entries.sort(key=lambda e: e["path"])

        page_size = self.tree_page_size_expand if expand else self.tree_page_size
        cursor = params.get("cursor", [""])[-1]
        try:
            start = int(base64.urlsafe_b64decode(cursor.encode()).decode()) if cursor else 0
        except ValueError:
            return _error(400, None, "Invalid cursor")
        page = entries[start : start + page_size]
        headers: list[tuple[str, str]] = [("X-Repo-Commit", commit)]
        if start + page_size < len(entries):
            # The client follows this absolute URL as is (GitHub-style Link header).
            next_cursor = base64.urlsafe_b64encode(str(start + page_size).encode()).decode()
            kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "cursor"]
            next_url = f"{self.url}{raw_path}?{urlencode([*kept, ('cursor', next_cursor)])}"
            headers.append(("Link", f'<{next_url}>; rel="next"'))
        return _json_response(200, page, headers)

    def _paths_info(self, repo_id: str, revision: str, body_in: bytes, token: str | None) -> _Response:
        opened = self._open_revision(repo_id, revision, token, content=False)
        if isinstance(opened, _Response):
            return opened
        _, commit, folder = opened
        form = parse_qs(body_in.decode(), keep_blank_values=True)
        expand = _truthy(form.get("expand"))
        files = {f.path: f for f in self._files(folder)}
        dirs = {"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)}
        out: list[dict[str, Any]] = []
        for path in form.get("paths", []):
            path = path.strip("/")
            if path in files:
                out.append(self._entry(files[path], commit, expand))
            elif path in dirs:
                out.append(self._dir_entry(path, commit, expand))
        return _json_response(200, out)

    def _sharded_metadata(self, repo_id: str, filename: str, token: str | None) -> _Response:
        spec = self.repos.get(repo_id)
        if spec is not None and not spec.sharded_endpoint:
            return _error(404, None, "Not Found")  # as a hub without this route: no X-Error-Code
        looked_up = self._lookup(repo_id, token, content=True)
        if isinstance(looked_up, _Response):
            return looked_up
        spec = looked_up
        commit_header = [("X-Repo-Commit", spec.sha)]
        key = (repo_id, spec.sha, filename, _folder_stamp(spec.root))  # any file changed on disk: built anew
        cached = self._metadata_cache.get(key) if spec.sharded_answer is None else None
        if cached is not None:  # built once per commit, as a hub would serve it from a cache (timing is not ours)
            return _Response(200, [("Content-Type", "application/json"), *commit_header], cached)
        index_path = self._safe_file(spec.root, filename)  # main only, as on the Hub
        if index_path is None:
            return _error(404, "EntryNotFound", f"{filename} does not exist on main", commit_header)
        try:
            index = json.loads(index_path.read_text())
            shards = sorted(set(index["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            return _error(400, None, f"{filename} is not a valid safetensors index")
        base = filename.rsplit("/", 1)[0] + "/" if "/" in filename else ""  # shards sit next to their index
        headers: dict[str, Any] = {}
        for shard in shards:
            shard_path = self._safe_file(spec.root, base + shard)
            if shard_path is None:
                return _error(404, "EntryNotFound", f"{base + shard} does not exist on main", commit_header)
            try:
                headers[shard] = read_safetensors_header(shard_path)
            except (OSError, ValueError) as e:
                return _error(400, None, f"Could not parse {base + shard}: {e}")
        body = {"index": {k: v for k, v in index.items() if k != "weight_map"}, "headers": headers}
        if spec.sharded_answer is not None:
            body = spec.sharded_answer(body)
        response = _json_response(200, body, commit_header)
        if spec.sharded_answer is None and response.status == 200:
            self._metadata_cache[key] = response.body
        return response

    def _resolve(
        self, repo_id: str, revision: str, filename: str, token: str | None, range_header: str | None
    ) -> _Response:
        opened = self._open_revision(repo_id, revision, token, content=True)
        if isinstance(opened, _Response):
            return opened
        _, commit, folder = opened
        path = self._safe_file(folder, filename)
        if path is None:
            # The client caches the miss under .no_exist/<X-Repo-Commit>/.
            return _error(404, "EntryNotFound", "Entry not found", [("X-Repo-Commit", commit)])
        info = self._file_info(folder, filename)
        # Headers the client requires: X-Repo-Commit and an ETag, or it decides this is no Hub. Never X-Xet-Hash,
        # which would switch it to the Xet protocol; files are served directly (no redirect) so no Location either.
        headers = [
            ("Content-Type", "application/octet-stream"),
            ("Accept-Ranges", "bytes"),
            ("ETag", f'"{info.etag}"'),
            ("X-Repo-Commit", commit),
        ]
        if info.sha256 is not None:
            headers += [("X-Linked-Etag", f'"{info.sha256}"'), ("X-Linked-Size", str(info.size))]
        size = info.size
        span = _parse_range(range_header, size) if range_header else None
        if self.repos[repo_id].ignore_range:
            span = None
        if span == "unsatisfiable":
            return _Response(416, [("Content-Range", f"bytes */{size}"), ("X-Repo-Commit", commit)])
        with open(path, "rb") as f:
            if span is None:
                return _Response(200, headers, f.read())
            start, end = span
            f.seek(start)
            data = f.read(end - start + 1)
        return _Response(206, [*headers, ("Content-Range", f"bytes {start}-{end}/{size}")], data)


def _folder_stamp(root: Path) -> tuple[Any, ...]:
    """(name, size, mtime) of every file under root: what a cached answer built from them depends on."""
    return tuple(sorted((str(p), st.st_size, st.st_mtime_ns) for p in root.rglob("*") if (st := p.stat()) and p.is_file()))


def gzip_body(prefix: bytes, pad: int, suffix: bytes = b"", fill: bytes = b" ") -> bytes:
    """gzip of prefix + fill * pad + suffix, compressed a megabyte at a time (a 1 GB body costs ~1 MB of memory)."""
    import zlib

    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip container
    parts = [z.compress(prefix)]
    block = fill * (1 << 20)
    for _ in range(pad >> 20):
        parts.append(z.compress(block))
    parts += [z.compress(fill * (pad & ((1 << 20) - 1))), z.compress(suffix), z.flush()]
    return b"".join(parts)


def _join(segments: list[str]) -> str:
    """Decode raw path segments into a repo path ("sub%2Fdir" and "sub/dir" both give "sub/dir")."""
    return "/".join(unquote(s) for s in segments)


def _git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """(first, last) byte of a single `bytes=` range, "unsatisfiable", or None to ignore it and send everything."""
    match = _RANGE_RE.fullmatch(header)
    if match is None:
        return None  # multi-range or malformed: ignored, as RFC 9110 allows
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # suffix range: the last N bytes
        n = int(last)
        return (max(0, size - n), size - 1) if n > 0 and size > 0 else "unsatisfiable"
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(end, size - 1)


def _shutdown_socket(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@contextmanager
def running_hub(repos: Mapping[str, RepoSpec] | None = None, *, seed: int = 0) -> Iterator[LocalHub]:
    """Start a LocalHub for the duration of a with-block."""
    hub = LocalHub(repos, seed=seed)
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()
