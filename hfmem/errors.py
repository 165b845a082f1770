"""Errors users meet, each with its own exit code (documented in the README)."""

from __future__ import annotations

import re

# Hugging Face user access tokens ("hf_" + 34 letters/digits; older "api_org_..." org tokens).
_TOKEN_RE = re.compile(r"\b(hf_[A-Za-z0-9]{8,}|api_org_[A-Za-z0-9]{8,})")


def redact(text: str, token: object = None) -> str:
    """Text safe to print: the given token and anything shaped like a Hub token replaced by ***."""
    if isinstance(token, str) and token:
        text = text.replace(token, "***")
    return _TOKEN_RE.sub("***", text)


class HfmemError(Exception):
    """Base class: one clear line for the user, and a distinct exit code.

    Like huggingface_hub's errors (huggingface_hub, errors.py: HfHubHTTPError), it carries what it is about as
    fields, each None when unknown: the Hub repo id, the revision asked for, the file or local path, and the HTTP
    status of the answer that failed. ``message`` is the line the CLI prints.
    """

    exit_code = 10

    def __init__(
        self,
        message: str,
        *,
        repo_id: str | None = None,
        revision: str | None = None,
        path: str | None = None,
        status: int | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.repo_id = repo_id
        self.revision = revision
        self.path = path
        self.status = status

    def fill(self, *, repo_id: str | None = None, revision: str | None = None, path: str | None = None) -> None:
        """Set the fields still unknown where the error was raised (a caller higher up knows the repo)."""
        if self.repo_id is None:
            self.repo_id = repo_id
        if self.revision is None:
            self.revision = revision
        if self.path is None:
            self.path = path


class UsageError(HfmemError):
    exit_code = 2


class RepoNotFound(HfmemError):
    exit_code = 11


class GatedRepo(HfmemError):
    exit_code = 12


class RevisionNotFound(HfmemError):
    exit_code = 13


class NoSafetensors(HfmemError):
    exit_code = 14


class NoConfig(HfmemError):
    exit_code = 15


class LocalPathError(HfmemError):
    exit_code = 16


class MalformedHeader(HfmemError):
    exit_code = 17


class MalformedConfig(HfmemError):
    exit_code = 18


class NetworkError(HfmemError):
    exit_code = 19


class RateLimited(NetworkError):
    exit_code = 20


class ServerError(NetworkError):
    exit_code = 21


EXIT_CODES: dict[str, int] = {
    cls.__name__: cls.exit_code
    for cls in (
        UsageError,
        RepoNotFound,
        GatedRepo,
        RevisionNotFound,
        NoSafetensors,
        NoConfig,
        LocalPathError,
        MalformedHeader,
        MalformedConfig,
        NetworkError,
        RateLimited,
        ServerError,
    )
}
