"""Text that came from a repo or a server, made safe to print and to paste.

A config's ``model_type``, tensor names, GGUF metadata, index file names and the Hub's error messages are chosen by
whoever published the repo. Written raw to a terminal, an OSC sequence (ESC ] 52) writes the clipboard and ESC ] 0
sets the window title (xterm ctlseqs); C1 controls (0x80-0x9f) act as ESC-prefixed sequences on some terminals, and
Unicode bidi overrides (Trojan Source, CVE-2021-42574) make text read differently from what it is. So every byte
hfmem prints passes through :class:`SafeStream` (the CLI installs it on stdout and stderr, see ``cli.DefaultGroup``):
such characters become visible escapes (``\\x1b``, ``\\u202e``) instead of acting. JSON output is unaffected:
``json.dumps`` already writes them as ``\\u`` escapes.

:func:`markdown_inline` escapes repo text put into Markdown (model cards), so it cannot add HTML, links, table cells
or hfmem's own ``<!-- hfmem:... -->`` markers to a README.
"""

from __future__ import annotations

import io
import re
from typing import Any, TextIO

# C0 controls except tab, newline and carriage return; DEL; C1; the bidi embeddings, overrides and isolates
# (Unicode UAX #9) and the implicit marks; the Unicode line/paragraph separators.
_CONTROLS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
_UNSAFE = re.compile(f"[{_CONTROLS}]|\r(?!\n)")  # a lone CR rewrites the line it is on: spoofing
_UNSAFE_LINE = re.compile(f"[{_CONTROLS}\r\n]")


_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    if m.group() in _NAMED:
        return _NAMED[m.group()]
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """`text` with every control character that could act on a terminal shown as an escape; newlines, tabs and
    CRLF line ends (CSV) are kept."""
    return _UNSAFE.sub(_escape, text)


def one_line(text: str) -> str:
    """`text` as a single line: also newlines and carriage returns as escapes (error messages, ``check``)."""
    return _UNSAFE_LINE.sub(_escape, text)


class SafeStream(io.TextIOBase):
    """A text stream that writes :func:`safe_text` of everything to the stream it wraps.

    It has no ``buffer``, so nothing (click included) can reach the raw bytes through it.
    """

    def __init__(self, stream: TextIO):
        self.unwrapped = stream

    def write(self, s: str) -> int:
        self.unwrapped.write(safe_text(s))
        return len(s)

    def flush(self) -> None:
        self.unwrapped.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.unwrapped.isatty()

    def fileno(self) -> int:
        return self.unwrapped.fileno()

    @property
    def encoding(self) -> Any:  # type: ignore[override]  # click reuses a stream whose encoding it knows as is
        return getattr(self.unwrapped, "encoding", None)

    @property
    def errors(self) -> Any:  # type: ignore[override]
        return getattr(self.unwrapped, "errors", None)


def unwrapped(stream: Any) -> Any:
    """The raw stream under a SafeStream (for tqdm, whose own \\r redraws carry only counts), else `stream`."""
    return getattr(stream, "unwrapped", stream)


# The ASCII punctuation that has a meaning mid-line in GitHub Markdown (code spans, emphasis, links and images,
# table cells, strikethrough), backslash-escaped as CommonMark allows; <, > and & become entities, so no HTML tag or
# comment (an hfmem marker) survives. Line-start syntax (#, -, 1.) cannot occur: the text has no line breaks. "_"
# is left alone: GFM never emphasises inside a word, and model types are snake_case (qwen2_moe).
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~])")


def markdown_inline(text: object) -> str:
    """Repo-supplied text for one line of a Markdown paragraph or table cell: no HTML, no Markdown syntax, no
    line breaks, no control characters."""
    s = one_line(str(text)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)
