"""Read config.json and safetensors headers from the Hub in as few round trips as it allows, never the weights."""

# All Hub traffic goes through huggingface_hub (auth, HF_ENDPOINT, revisions, cache, HF_HUB_OFFLINE). On main the
# one-shot safetensors-metadata endpoint returns every shard header in one request, issued concurrently with the
# config download; other revisions, and hubs without that endpoint, fall back to the index plus one range request
# per shard (all shards concurrently).

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from hfmem.errors import MalformedHeader, NetworkError, NoSafetensors, UsageError
from hfmem.hub import digest
from hfmem.hub.answer import decode_answer
from hfmem.hub.budget import (
    DECODABLE,
    IN_FLIGHT,
    MAX_INDEX_BYTES,
    MAX_METADATA_BYTES,
    MIN_RATE,
    BodyDecoder,
    ReadTotal,
    reservation,
)
from hfmem.hub.errors import HubErrors, error_code
from hfmem.hub.files import (
    BIN_INDEX_FILE,
    INDEX_FILE,
    MAX_CONFIG_BYTES,
    SINGLE_FILE,
    ModelFiles,
    approximate_from_bin_index,
    fallback_safetensors,
    index_shards,
    is_sha,
    load_json_text,
    no_safetensors,
    select_indexed,
)
from hfmem.hub.header import (
    MAX_HEADER_BYTES,
    FileHeader,
    header_length,
    parse_header_bytes,
)
from hfmem.hub.local import cached_sha, read_local
from hfmem.hub.retry import (
    DeadlineExceeded,
    call_with_retries,
    is_transient,
    transient_for_downloads,
    transient_not_timeout,
)

T = TypeVar("T")

# Speculative first range for a shard header: sized from the index (tensor count and name lengths) when there is
# one, else this. Measured over 2,817 published shard files, the per-shard estimate covered 100 % (mean over-read
# 20 kB), and every single-file (index-less) header was under 90 kB. See docs/speed.md.
SPECULATIVE_RANGE = 262_144
_BYTES_PER_TENSOR = 96  # JSON of one entry beyond its name: {"dtype":..,"shape":[..],"data_offsets":[..,..]},
_HEADER_SLACK = 4096  # __metadata__ and padding
MAX_SHARD_WORKERS = 64
_NOT_SHARDED = "not-sharded"


def read_hub(repo_id: str, revision: str | None = None, token: str | bool | None = None, timeout: float | None = None,
             on_preload: Callable[[ModelFiles], None] | None = None,
             deferred: list[Callable[[], None]] | None = None, sent: threading.Event | None = None) -> ModelFiles:
    """Config + headers of a Hub repo in as few round trips as the Hub allows (see docs/speed.md):

    - main, sharded: GET config.json and GET the one-shot safetensors-metadata endpoint, concurrently (2 requests);
    - other revisions / no endpoint: GET config.json and GET the index concurrently, then one range per shard, all
      shards concurrently, at the commit the config answered with;
    - repeat runs: the header digest cache (hfmem.hub.digest) keyed by commit sha: 1 request (the config GET that
      re-resolves the revision), 0 for a full-sha revision or with HF_HUB_OFFLINE=1.

    on_preload: called (in this thread) with the digest entry of the commit the revision named last time, while the
    request re-resolving it is in flight; read_hub returns that very object if the commit is unchanged.
    deferred: given, writing the digest entry is appended to it instead of done before returning (the caller runs
    it while the answer is used: writing DeepSeek-V3's entry takes ~0.1 s).
    sent: set once the first request is on its way (its client imported and built), or the read failed before it.
    """
    from huggingface_hub import constants

    check_repo_id(repo_id)
    check_revision(revision)
    timeout = timeout if timeout is not None else constants.HF_HUB_DOWNLOAD_TIMEOUT
    ctx = HubContext(repo_id, revision, token, timeout, on_preload, deferred, sent)
    if constants.HF_HUB_OFFLINE:
        sha = digest.read_ref(repo_id, revision) or cached_sha(repo_id, revision)
        hit = _from_digest(repo_id, sha, None, "cache")
        return hit if hit is not None else ctx.guard(ctx.read_offline)
    if is_sha(revision):  # a commit names immutable content: a digest hit needs no request at all
        hit = _from_digest(repo_id, revision, None, "hub")
        if hit is not None:
            return hit
    return ctx.guard(ctx.read_online)


def _from_digest(repo_id: str, sha: str | None, config: dict[str, Any] | None, source: str) -> ModelFiles | None:
    """What the header digest holds for repo@sha (with a freshly read config, if given), or None on a miss."""
    hit = digest.load(repo_id, sha)
    if hit is None:
        return None
    cached_config, headers, index_metadata, warnings = hit
    return ModelFiles(
        repo=repo_id,
        revision=sha,
        source=source,
        config=config if config is not None else cached_config,
        headers=headers,
        index_metadata=index_metadata,
        warnings=list(warnings),
    )


# A plain "name" or "org/name": ASCII letters, digits, '-', '_' and '.', each part starting and ending with a letter or
# digit and at most 96 characters, no "--" or "..", not ending in ".git". Every such id passes huggingface_hub's
# validate_repo_id (utils/_validators.py: REPO_ID_REGEX and the checks after it), so only other ids are handed to it:
# importing it imports the client's whole utils package and HTTP stack (~45 ms), which an offline repeat never uses.
_PLAIN_REPO_ID_RE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9])?/)?[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9])?")


def is_plain_repo_id(repo_id: str) -> bool:
    return (isinstance(repo_id, str) and _PLAIN_REPO_ID_RE.fullmatch(repo_id) is not None and "--" not in repo_id
            and ".." not in repo_id and not repo_id.endswith(".git"))


def check_repo_id(repo_id: str) -> None:
    """A UsageError unless huggingface_hub's validate_repo_id accepts `repo_id` (it decides every non-plain id)."""
    if is_plain_repo_id(repo_id):
        return
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise UsageError(f"invalid repo id {repo_id!r}: {str(exc).splitlines()[0][:160]}", repo_id=repo_id) from None


# git check-ref-format's rules (what the Hub accepts for branches and tags), plus a length cap. A revision ends up
# in URLs (quoted by huggingface_hub) and as a file name under the cache's refs/ folder, so ".." must never pass.
_BAD_REF_RE = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^/|/$|\.lock$|^@$|\.$|^-")


def check_revision(revision: str | None) -> None:
    """A UsageError unless `revision` is None or could name a branch, tag or commit."""
    if revision is None:
        return
    if not isinstance(revision, str) or not revision or len(revision) > 256 or _BAD_REF_RE.search(revision):
        raise UsageError(f"invalid revision {str(revision)[:80]!r}: not a branch, tag or commit name", revision=revision)


def _same_commit(commit: str | None, sha: str | None) -> bool:
    return commit is None or sha is None or commit == sha


# Responses are typed Any: huggingface_hub 1.x answers with httpx objects, 2.x with httpx2 ones.
def _commit(response: Any) -> str | None:
    commit = response.headers.get("X-Repo-Commit") if response is not None else None
    return commit if isinstance(commit, str) and is_sha(commit) else None


def _total_size(response: Any) -> int | None:
    """The file size from Content-Range ("bytes 0-99/1234"), or Content-Length of an uncompressed 200 answer."""
    content_range = response.headers.get("Content-Range", "")
    if "/" in content_range and content_range.rsplit("/", 1)[1].isdigit():
        return int(content_range.rsplit("/", 1)[1])
    length = response.headers.get("Content-Length", "")
    encoded = (response.headers.get("Content-Encoding") or "identity").strip().lower() != "identity"
    return int(length) if response.status_code == 200 and length.isdigit() and not encoded else None


def _shard_guesses(index: dict[str, Any]) -> dict[str, int]:
    """Bytes to ask for in the first range request of each shard, from the index's tensor names."""
    guesses: dict[str, int] = {}
    for name, shard in index["weight_map"].items():
        guesses[shard] = guesses.get(shard, 8 + _HEADER_SLACK) + len(name.encode("utf-8")) + _BYTES_PER_TENSOR
    return guesses


class HubContext:
    """Requests about one repo at one revision: retried (retry.py), bounded, and their failures translated."""

    def __init__(self, repo_id: str, revision: str | None, token: str | bool | None, timeout: float,
                 on_preload: Callable[[ModelFiles], None] | None = None,
                 deferred: list[Callable[[], None]] | None = None, sent: threading.Event | None = None):
        self.on_preload = on_preload
        self.deferred = deferred
        self.sent = sent if sent is not None else threading.Event()
        self.repo_id = repo_id
        self.revision = revision
        self.token = token
        self.timeout = timeout
        self.errors = HubErrors(repo_id, revision, token, timeout)
        self.read_total = ReadTotal(repo_id)

    def guard(self, call: Callable[[], T]) -> T:
        """Run `call`, its failures as hfmem errors (hfmem.hub.errors)."""
        return self.errors.guard(call)

    def call(self, fn: Callable[[], T], download: bool = False, deadline_s: float | None = None) -> T:
        """One Hub operation, retried on transient failures (see retry.py), all attempts and waits within a
        wall-clock deadline of --timeout (or `deadline_s`, for get_once, which bounds a body's wait itself).

        Requests made here (``_get``: one GET through huggingface_hub's session; ``list_repo_files``) also pass
        --timeout to the client as its read timeout, so silence for that long raises at once (and is not retried);
        the deadline catches what the read timeout cannot, a server that trickles bytes (get_once also stops
        reading a body at it). ``download=True`` is for ``hf_hub_download`` (only ``read_offline`` uses it now),
        which after a failed HEAD retries on its own with a 60 s timeout and resumes cut-short bodies itself.
        """
        # A 429's Retry-After is waited out when it is no longer than --timeout, else reported at once.
        if download:
            return call_with_retries(
                fn, deadline_s=self.timeout, retryable=transient_for_downloads, max_retry_after_s=self.timeout
            )
        started = [time.monotonic()]

        def attempt() -> T:
            started[0] = time.monotonic()
            return fn()

        def retryable(exc: BaseException) -> bool:
            # A timeout that took (most of) --timeout was a stall: report it. One raised early (a pool or connect
            # hiccup) is transient like any other.
            if transient_not_timeout(exc):
                return True
            return is_transient(exc) and time.monotonic() - started[0] < 0.5 * self.timeout

        return call_with_retries(
            attempt, deadline_s=deadline_s or self.timeout, retryable=retryable, max_retry_after_s=self.timeout
        )

    # -- flows ------------------------------------------------------------------------------------------------
    def read_online(self) -> ModelFiles:
        on_main = self.revision in (None, "main")
        known = digest.read_ref(self.repo_id, self.revision)
        early: Any = None
        if known is not None and digest.has(self.repo_id, known):
            # Seen before: one request re-resolves the revision; the digest answers if the commit is unchanged. The
            # entry of the commit seen last is loaded (and validated) while that request is in flight.
            with ThreadPoolExecutor(max_workers=1) as pool:
                config_future = pool.submit(self.get_config)
                try:
                    # The request first (importing and building the HTTP client is most of its time), the entry
                    # while it is on the wire: both need the interpreter, only the request then waits.
                    self.sent.wait(self.timeout)
                    preloaded = _from_digest(self.repo_id, known, None, "hub")
                    if preloaded is not None and self.on_preload is not None:
                        self.on_preload(preloaded)
                finally:
                    config_future.exception()  # wait for it either way
                config_bytes, sha = config_future.result()
            config = load_json_text(config_bytes, "config.json")
            if preloaded is not None and sha == known:
                preloaded.config = config
                return preloaded
            hit = _from_digest(self.repo_id, sha, config, "hub")
            if hit is not None:
                return hit
        else:
            # First time: config and the headers (or the index) are fetched in the same round trip; on main the
            # index too, because the one-shot answer lacks the weight_map that decides which tensors count.
            with ThreadPoolExecutor(max_workers=3) as pool:
                config_future = pool.submit(self.get_config)
                futures: list[Future[Any]] = [pool.submit(self.get_index, self.revision)]
                if on_main:
                    futures.append(pool.submit(self.get_sharded, self.revision))
                try:
                    config_bytes, sha = config_future.result()
                finally:
                    for future in futures:  # wait for them either way
                        future.exception()
                for future in futures:
                    exc = future.exception()
                    if exc is not None:
                        raise exc
                early = tuple(future.result() for future in futures)
            config = load_json_text(config_bytes, "config.json")
            hit = _from_digest(self.repo_id, sha, config, "hub")  # e.g. another branch name for a known commit
            if hit is not None:
                if sha is not None:  # always, for a hit: the digest is keyed by the commit
                    digest.write_ref(self.repo_id, self.revision, sha)
                return hit
        at = sha or self.revision  # pin every later request to the commit the config came from
        if known is not None and early is None:  # the digest path missed: the commit moved since last time
            if on_main:
                with ThreadPoolExecutor(max_workers=2) as pool:
                    index_future, sharded_future = pool.submit(self.get_index, at), pool.submit(self.get_sharded, at)
                    early = (index_future.result(), sharded_future.result())
            else:
                early = (self.get_index(at),)
        assert early is not None
        index, index_commit = early[0]
        if not _same_commit(index_commit, sha):  # the branch moved between the requests
            index, index_commit = self.get_index(at)
        sharded = early[1] if len(early) > 1 else None
        warnings: list[str] = []
        if isinstance(sharded, tuple) and index is not None and _same_commit(sharded[2], sha):
            headers = select_indexed(sharded[0], index, warnings)
            index_metadata = index.get("metadata")
        else:
            headers, index_metadata = self.headers_from_index(index, at, warnings)
        if sha is not None:
            def remember(repo_id: str = self.repo_id, revision: str | None = self.revision, commit: str = sha) -> None:
                digest.store(repo_id, commit, config, headers, index_metadata, warnings)
                digest.write_ref(repo_id, revision, commit)

            if self.deferred is not None:
                self.deferred.append(remember)
            else:
                remember()
        return ModelFiles(
            repo=self.repo_id,
            revision=sha,
            source="hub",
            config=config,
            headers=headers,
            index_metadata=index_metadata,
            warnings=warnings,
        )

    def read_offline(self) -> ModelFiles:
        """HF_HUB_OFFLINE and no digest: the HF cache's config.json, and headers if the snapshot holds the weights."""
        from huggingface_hub import hf_hub_download

        config_path = self.call(
            lambda: hf_hub_download(self.repo_id, "config.json", revision=self.revision, token=self.token),
            download=True,
        )
        snapshot = Path(config_path).parent
        if (snapshot / INDEX_FILE).is_file() or (snapshot / SINGLE_FILE).is_file():
            try:
                files = read_local(str(snapshot))
            except NoSafetensors:
                pass  # a partial snapshot (index without its shards); a symlink leaving the repo folder is an error
            else:
                files.repo = self.repo_id
                return files
        raise NetworkError(f"{self.repo_id}: safetensors headers are not cached and HF_HUB_OFFLINE is set")

    def headers_from_index(
        self, index: dict[str, Any] | None, revision: str | None, warnings: list[str]
    ) -> tuple[list[FileHeader], dict[str, Any] | None]:
        from huggingface_hub.errors import EntryNotFoundError

        if index is None:
            try:
                return select_indexed([self.range_header(SINGLE_FILE, revision)], None, warnings), None
            except EntryNotFoundError:
                return select_indexed(self.headers_without_index(revision, warnings), None, warnings), None
        shards = index_shards(index, INDEX_FILE)
        guesses = _shard_guesses(index)
        try:
            with ThreadPoolExecutor(max_workers=max(1, min(MAX_SHARD_WORKERS, len(shards)))) as pool:
                headers = list(pool.map(lambda s: self.range_header(s, revision, guesses.get(s)), shards))
        except EntryNotFoundError:
            raise NoSafetensors(f"{self.repo_id}: {INDEX_FILE} names a shard that is missing") from None
        return select_indexed(headers, index, warnings), index.get("metadata")

    # -- requests (huggingface_hub's session, URL builder, headers and error classes) -------------------------
    def _open(self, url: str, extra: dict[str, str] | None = None):
        from huggingface_hub.utils import build_hf_headers, get_session

        headers = build_hf_headers(token=self.token)
        headers["Accept-Encoding"] = "gzip, deflate"  # what get_once decodes itself, a bounded step at a time
        if extra:
            headers.update(extra)
        session = get_session()
        self.sent.set()  # the client is imported and built: the request leaves now
        return session.stream("GET", url, headers=headers, timeout=self.timeout, follow_redirects=True)

    def _get(self, url: str, limit: int, extra: dict[str, str] | None = None) -> tuple[bytearray, Any]:
        """One GET = one retried operation (transient failures, a body cut short, 429 Retry-After: see call). get_once
        stops a trickle itself at about --timeout; the operation may last as long as `limit` bytes take at MIN_RATE."""
        return self.call(lambda: self.get_once(url, limit, extra), deadline_s=self._body_deadline(limit))

    def _body_deadline(self, limit: int) -> float:
        return self.timeout + limit / MIN_RATE

    def get_once(self, url: str, limit: int, extra: dict[str, str] | None = None, reserve: bool = True) -> tuple[bytearray, Any]:
        """GET reading at most `limit` decoded body bytes (a server that ignores Range cannot make us download weights,
        nor a gzip answer expand past it: the body is decoded here, a megabyte at most per step, not by the HTTP
        client, which expands each received chunk whole). The body reserves its size in the process-wide in-flight
        budget while it arrives (unless the caller holds a reservation for it: `reserve=False`), and counts against
        this read's total (hfmem.hub.budget).

        Wall clock: a body trickling in is never silent long enough for the client's read timeout, so a deadline is
        checked between chunks (DeadlineExceeded, not retried). It is --timeout from the request, extended by the time
        the bytes received so far take at MIN_RATE: a large answer on a working link arrives, a trickle cannot
        hold a request much past --timeout."""
        from huggingface_hub.utils import hf_raise_for_status

        end = time.monotonic() + self.timeout
        with self._open(url, extra) as response:
            if response.status_code >= 400:
                if response.status_code == 416:
                    return bytearray(), response
                response.read()
                hf_raise_for_status(response)
            encoding = (response.headers.get("Content-Encoding") or "identity").strip().lower()
            if encoding not in DECODABLE:
                raise MalformedHeader(f"{url.rsplit('/', 1)[-1][:120]}: unsupported Content-Encoding {encoding[:40]!r}")
            expected = reservation(response.headers.get("Content-Length"), encoding, limit)
            body = bytearray()
            received = 0
            decoder = BodyDecoder(encoding)
            with IN_FLIGHT.hold(expected if reserve else 0):
                for raw in response.iter_raw():
                    received += len(raw)
                    for piece in decoder.feed(raw):
                        body += piece
                        self.read_total.add(len(piece))
                        if len(body) >= limit:
                            break
                    if len(body) >= limit:
                        break
                    if time.monotonic() > end + received / MIN_RATE:
                        raise DeadlineExceeded(self.timeout, 1)
            del body[limit:]
            return body, response

    def file_url(self, filename: str, revision: str | None) -> str:
        """hf_hub_url(repo_id, filename, revision=revision) for a model repo: the same template, endpoint and quoting
        (huggingface_hub, file_download.py: hf_hub_url), without importing file_download (tqdm, yaml, filelock,
        asyncio: ~25 ms of a ~0.2 s run) for a URL; tests/test_fetch_hub.py holds the two equal."""
        from huggingface_hub import constants

        return constants.HUGGINGFACE_CO_URL_TEMPLATE.format(
            repo_id=self.repo_id, revision=quote(revision or constants.DEFAULT_REVISION, safe=""), filename=quote(filename)
        )

    def get_config(self) -> tuple[bytearray, str | None]:
        """config.json in one GET (hf_hub_download would add a HEAD); the commit comes from X-Repo-Commit."""
        try:
            data, response = self._get(self.file_url("config.json", self.revision), MAX_CONFIG_BYTES + 1)
        finally:
            self.sent.set()  # also when it failed before sending anything
        return data, _commit(response)

    def get_index(self, revision: str | None) -> tuple[dict[str, Any] | None, str | None]:
        """(model.safetensors.index.json, commit), or (None, commit) when the repo has no index."""
        from huggingface_hub.errors import EntryNotFoundError

        try:
            data, response = self._get(self.file_url(INDEX_FILE, revision), MAX_INDEX_BYTES + 1)
        except EntryNotFoundError as exc:
            return None, _commit(getattr(exc, "response", None))
        return load_json_text(data, INDEX_FILE, MalformedHeader, MAX_INDEX_BYTES, None), _commit(response)

    def get_sharded(self, revision: str | None = None) -> tuple[list[FileHeader], dict[str, Any] | None, str | None] | str | None:
        """Every shard header in one request (main only): (headers, index metadata, commit); _NOT_SHARDED when the
        repo has no index; None when the hub lacks the endpoint."""
        from huggingface_hub import constants
        from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError
        url = f"{constants.ENDPOINT}/api/models/{self.repo_id}/safetensors-metadata/{quote(INDEX_FILE, safe='/')}"
        try:
            data, response = self._get(url, MAX_METADATA_BYTES + 1)
        except EntryNotFoundError:
            return _NOT_SHARDED
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status in (400, 404, 405, 501) and not error_code(exc):
                return None  # a hub (or mirror) without the endpoint
            raise
        if len(data) > MAX_METADATA_BYTES:
            raise MalformedHeader(f"safetensors-metadata: larger than {MAX_METADATA_BYTES:,} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedHeader("safetensors-metadata: not valid UTF-8") from None
        del data
        headers, index = decode_answer(text)
        metadata = index.get("metadata")
        return headers, metadata if isinstance(metadata, dict) else None, _commit(response)

    def range_header(self, filename: str, revision: str | None, guess: int | None = None) -> FileHeader:
        """One range request for the header (a second only if it is longer than the speculative first read)."""
        url = self.file_url(filename, revision)
        first = max(8, min(guess or SPECULATIVE_RANGE, MAX_HEADER_BYTES + 8))
        data, response = self._get(url, first, {"Range": f"bytes=0-{first - 1}"})
        file_size = _total_size(response)
        length = header_length(data[:8], filename, file_size)
        need = 8 + length
        if len(data) < need and len(data) >= first:
            # A large header: its bytes, their decoded text and the parse are held in flight together (the text is
            # as large as the bytes), so concurrent shards cannot each hold a 100 MB header at once beyond the budget.
            with IN_FLIGHT.hold(2 * need):
                range_ = {"Range": f"bytes={len(data)}-{need - 1}"}
                more, answer = self.call(
                    lambda: self.get_once(url, need, range_, reserve=False), deadline_s=self._body_deadline(need)
                )
                # A server that ignores Range answers 200 from byte 0: then the continuation starts at len(data).
                view = memoryview(more)
                data += view[len(data) :] if answer.status_code == 200 else view[: need - len(data)]
                del view, more
                return self._parse_range_header(data, need, length, filename, file_size)
        return self._parse_range_header(data, need, length, filename, file_size)

    @staticmethod
    def _parse_range_header(data: bytearray, need: int, length: int, filename: str, file_size: int | None) -> FileHeader:
        if len(data) < need:
            raise MalformedHeader(f"{filename}: header truncated ({len(data) - 8} of {length} bytes)", path=filename)
        del data[need:]
        del data[:8]  # in place: no copy of a header that may be 100 MB
        return parse_header_bytes(data, filename, file_size)

    def headers_without_index(self, revision: str | None, warnings: list[str]) -> list[FileHeader]:
        from huggingface_hub import HfApi  # only here: importing hf_api costs ~0.2 s of start-up

        names = self.call(lambda: HfApi().list_repo_files(self.repo_id, revision=revision, token=self.token))
        shards = fallback_safetensors(names, warnings)
        if not shards:
            approx = None
            if BIN_INDEX_FILE in names:
                data, _ = self._get(self.file_url(BIN_INDEX_FILE, revision), MAX_CONFIG_BYTES + 1)
                approx = approximate_from_bin_index(data, BIN_INDEX_FILE)
            err = no_safetensors(self.repo_id, approx)
            if any(n.endswith(".gguf") for n in names):
                err.message += " (the repo has GGUF files)"
            raise err
        with ThreadPoolExecutor(max_workers=max(1, min(MAX_SHARD_WORKERS, len(shards)))) as pool:
            return list(pool.map(lambda s: self.range_header(s, revision), shards))

