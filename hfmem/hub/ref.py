"""What the user typed as MODEL: a Hub URL pasted from the browser is the repo id (and revision) it names."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

from hfmem.errors import UsageError
from hfmem.safe_text import one_line

# https://huggingface.co/ORG/NAME[/tree/REV[/...] | /blob/REV/... | /resolve/REV/...], also hf.co and http://, with or
# without the scheme; huggingface_hub builds the same paths (file_download.py: hf_hub_url; hf_api.py: model_info).
_HUB_URL_RE = re.compile(
    r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/(?P<kind>datasets/|spaces/|models/)?"
    r"(?P<repo>[^/?#\s]+(?:/[^/?#\s]+)?)(?:/(?:tree|blob|resolve)/(?P<rev>[^?#\s]+?))?/?(?:[?#].*)?$",
    re.IGNORECASE,
)


def resolve_ref(ref: str, revision: str | None = None) -> tuple[str, str | None]:
    """(repo id or path, revision). A Hub URL gives its repo id and, from ``/tree/REV`` (or a file URL's
    ``/blob/REV/...``), its revision; a revision given as well must agree with the URL's."""
    if one_line(ref) != ref and not os.path.exists(ref):
        # huggingface_hub's validator would refuse it too, but quoting it raw in a multi-line message.
        raise UsageError(f"invalid repo id {ref[:200]!r}: contains control characters (and no such local path)")
    m = _HUB_URL_RE.match(ref.strip())
    if m is None:
        return ref, revision
    if m.group("kind") and m.group("kind").lower() in ("datasets/", "spaces/"):
        raise UsageError(f"{ref}: a {m.group('kind')[:-2]} URL, not a model repo")
    repo = m.group("repo")
    url_rev = m.group("rev")
    if url_rev is not None:
        url_rev = unquote(url_rev)
        # /blob/REV/path/to/file and /tree/REV/sub/folder: the revision is the first segment (branch names with a
        # slash, like refs/pr/4, are written %2F-encoded by the Hub's own links).
        if "/" in url_rev and not url_rev.startswith("refs/"):
            url_rev = url_rev.split("/", 1)[0]
        elif url_rev.startswith("refs/pr/"):
            url_rev = "/".join(url_rev.split("/")[:3])
    if revision is not None and url_rev is not None and revision != url_rev:
        raise UsageError(f"{ref}: the URL names revision {url_rev!r} but --revision is {revision!r}")
    return repo, revision if revision is not None else url_rev


def is_gguf_ref(ref: str, gguf_file: str | None = None, quant: str | None = None) -> bool:
    """Whether ``ref`` names GGUF weights: a .gguf file, a folder of them without config.json, a ``*GGUF`` repo id,
    or a GGUF file/quant was asked for."""
    if gguf_file or quant or ref.lower().endswith(".gguf"):
        return True
    if os.path.isdir(ref):
        return not os.path.exists(os.path.join(ref, "config.json")) and any(name.endswith(".gguf") for name in os.listdir(ref))
    return ref.lower().endswith("gguf") and not os.path.exists(ref)
