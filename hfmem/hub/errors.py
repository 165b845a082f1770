"""Turn what huggingface_hub and its HTTP stack raise into hfmem's one-line errors (hfmem.errors), with the repo,
revision and HTTP status set as fields, and never the token in the text."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hfmem.errors import (
    GatedRepo,
    HfmemError,
    LocalPathError,
    NetworkError,
    NoConfig,
    NoSafetensors,
    RateLimited,
    RepoNotFound,
    RevisionNotFound,
    ServerError,
    UsageError,
    redact,
)
from hfmem.hub.local import cached_snapshot
from hfmem.hub.retry import DeadlineExceeded, attempts_of, is_incomplete_body, retry_after, status_of

T = TypeVar("T")


class HubErrors:
    """How a failed operation on one repo (at the revision asked for) reads to the user."""

    def __init__(self, repo_id: str, revision: str | None, token: str | bool | None, timeout: float):
        self.repo_id = repo_id
        self.revision = revision
        self.timeout = timeout
        self.token = token

    @property
    def token_sent(self) -> bool:
        """Whether the requests carried a token (asked only when an error message says so: looking for a saved
        token imports huggingface_hub's utils, which an offline repeat run never needs)."""
        return bool(self.token) or _has_saved_token()

    def guard(self, call: Callable[[], T]) -> T:
        """Translate huggingface_hub/httpx failures into one-line hfmem errors (never with the token in them)."""
        try:
            return call()
        except HfmemError as exc:
            exc.fill(repo_id=self.repo_id, revision=self.revision)
            raise
        except Exception as exc:
            translated = self.translate(exc)
            if translated is None:
                raise
            raise translated from None

    def _error(self, cls: type[HfmemError], message: str, status: int | None = None, path: str | None = None) -> HfmemError:
        return cls(message, repo_id=self.repo_id, revision=self.revision, path=path, status=status)

    def translate(self, exc: BaseException) -> HfmemError | None:
        """The hfmem error for `exc`, or None for a failure that is not the Hub's or the network's (a bug)."""
        from huggingface_hub import constants
        from huggingface_hub import errors as hf

        endpoint = constants.ENDPOINT
        error = self._error
        if isinstance(exc, hf.HFValidationError):  # huggingface_hub's own check of an id, on a call's arguments
            return error(UsageError, f"invalid repo id {self.repo_id!r}: {str(exc).splitlines()[0][:160]}")
        tries = attempts_of(exc)
        after = f" after {tries} attempts" if tries > 1 else ""
        status = status_of(exc)
        # GatedRepoError subclasses RepositoryNotFoundError, and both subclass HfHubHTTPError: order matters.
        if isinstance(exc, hf.GatedRepoError):
            return error(
                GatedRepo,
                f"{self.repo_id} is a gated repo: accept its terms on the model page ({endpoint}/{self.repo_id}), "
                "then use a token that has access "
                f"({'a token was sent' if self.token_sent else 'no token was sent; set HF_TOKEN or run `hf auth login`'})",
                status,
            )
        if isinstance(exc, hf.RepositoryNotFoundError):
            return error(
                RepoNotFound,
                f"repository {self.repo_id!r} not found on {endpoint} "
                f"(or it is private{' and the token sent has no access' if self.token_sent else ' and no token was sent'})",
                status,
            )
        if isinstance(exc, hf.RevisionNotFoundError):
            return error(RevisionNotFound, f"revision {self.revision!r} not found in {self.repo_id}", status)
        if isinstance(exc, DeadlineExceeded):
            budget = f"within {exc.seconds:g} s (--timeout, default HF_HUB_DOWNLOAD_TIMEOUT)"
            last = exc.last_status
            if last == 429:
                return error(RateLimited, f"{self.repo_id}: rate limited by {endpoint} (HTTP 429), still {budget}{self.cache_hint()}", last)
            if last is not None and last >= 500:
                return error(
                    ServerError, f"{self.repo_id}: {endpoint} kept answering HTTP {last}; gave up {budget}{self.cache_hint()}", last
                )
            if exc.last_error:
                return error(
                    NetworkError,
                    f"{self.repo_id}: cannot reach {endpoint} ({redact(exc.last_error)}); gave up {budget}{self.cache_hint()}",
                )
            return error(NetworkError, f"{self.repo_id}: timed out: no complete answer from {endpoint} {budget}{self.cache_hint()}")
        if isinstance(exc, hf.LocalEntryNotFoundError):
            cause = exc.__cause__
            if cause is not None and not isinstance(cause, hf.LocalEntryNotFoundError):
                try:
                    cause.hfmem_attempts = tries  # type: ignore[attr-defined]  # the retries were of the wrapper
                except Exception:
                    pass
                inner = self.translate(cause)
                if inner is not None:
                    return inner
            if constants.HF_HUB_OFFLINE:
                return error(NetworkError, f"{self.repo_id}: not in the local cache and HF_HUB_OFFLINE is set")
            return error(NetworkError, f"{self.repo_id}: cannot reach {endpoint}{after} and the repo is not cached")
        if isinstance(exc, hf.EntryNotFoundError):
            if "config.json" in str(exc):
                return error(NoConfig, f"{self.repo_id}: the repo has no config.json", status, "config.json")
            return error(NoSafetensors, f"{self.repo_id}: {str(exc).splitlines()[0][:200]}", status)
        if isinstance(exc, hf.OfflineModeIsEnabled):
            return error(
                NetworkError,
                f"{self.repo_id}: needs the network but HF_HUB_OFFLINE is set (only fully cached models work offline)",
            )
        if isinstance(exc, hf.HfHubHTTPError) or status is not None:
            code = status or 0
            if code == 429:
                asked = retry_after(exc)
                when = f"the Hub asks to retry after {asked:g} s" if asked is not None else "try again later"
                if asked is not None and asked > self.timeout:
                    when += f" (longer than --timeout {self.timeout:g} s, so hfmem did not wait)"
                return error(RateLimited, f"{self.repo_id}: rate limited by {endpoint} (HTTP 429{after}); {when}{self.cache_hint()}", status)
            if code >= 500:
                return error(ServerError, f"{self.repo_id}: {endpoint} answered HTTP {code}{after}{self.cache_hint()}", status)
            if code in (401, 403):
                return error(
                    RepoNotFound,
                    f"{self.repo_id}: access denied (HTTP {code}); "
                    + ("the token sent has no access" if self.token_sent else "no token was sent; set HF_TOKEN"),
                    status,
                )
            return error(NetworkError, f"{self.repo_id}: HTTP {code} from {endpoint}", status)
        if isinstance(exc, OSError) and exc.filename is not None:
            # A file the client reads or writes on this machine (the token file, the HF cache under HF_HOME or
            # HF_HUB_CACHE), not the network: socket and httpx errors name no file.
            where = f"{exc.filename!r}" + (f" -> {exc.filename2!r}" if exc.filename2 else "")
            return error(
                LocalPathError,
                f"{self.repo_id}: cannot use {where} ({exc.strerror or type(exc).__name__}); "
                "a local path of the Hugging Face client: check HF_HOME, HF_HUB_CACHE and HF_TOKEN_PATH",
                path=str(exc.filename),
            )
        module = type(exc).__module__ or ""
        if isinstance(exc, (OSError, TimeoutError)) or module.startswith(("httpx", "httpcore")):
            # httpx transport errors are not OSError subclasses. Their text names host and port, never headers.
            name = type(exc).__name__
            text = str(exc)
            if "Timeout" in name:
                what = (
                    f"timed out: no answer from {endpoint} within {self.timeout:g} s "
                    "(--timeout, default HF_HUB_DOWNLOAD_TIMEOUT)"
                )
            elif is_incomplete_body(exc):
                what = f"{endpoint} sent an incomplete (truncated) response"
            elif name == "ConnectError" and ("Name or service" in text or "nodename" in text or "resolv" in text):
                what = f"cannot resolve the host of {endpoint} (DNS)"
            elif name == "ConnectError":
                # The reason, e.g. "[Errno 111] Connection refused" (it names no header, and is redacted anyway).
                reason = redact(text.splitlines()[0][:160]) if text.strip() else ""
                what = f"cannot connect to {endpoint}" + (f" ({reason})" if reason else "")
            elif name == "RemoteProtocolError":
                what = f"{endpoint} closed the connection without answering"
            else:
                what = f"network error talking to {endpoint} ({name})"
            return error(NetworkError, f"{self.repo_id}: {what}{after}{self.cache_hint()}")
        return None

    def cache_hint(self) -> str:
        from huggingface_hub import constants

        if constants.HF_HUB_OFFLINE or cached_snapshot(self.repo_id, self.revision) is None:
            return ""
        return "; the model is in the local cache: set HF_HUB_OFFLINE=1 to use it"


def error_code(exc: BaseException) -> str | None:
    """The Hub's X-Error-Code header on a failed answer (RepoNotFound, GatedRepo, EntryNotFound, ...), if any."""
    response = getattr(exc, "response", None)
    return response.headers.get("X-Error-Code") if response is not None else None


def _has_saved_token() -> bool:
    try:
        from huggingface_hub import get_token

        return get_token() is not None
    except Exception:
        return False
