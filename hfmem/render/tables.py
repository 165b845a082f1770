"""The shape every renderer shares: a titled table of rows, laid out by ``render.text`` as plain text or Markdown."""

from __future__ import annotations

from typing import Any

# (heading, column headers, rows); headers ["", ""] mark a two-column key/value block.
Table = tuple[str, list[str], list[list[Any]]]
