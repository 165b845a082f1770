"""The shape every renderer shares: a titled table of rows, laid out by ``render.text`` as plain text or Markdown."""

from __future__ import annotations

from typing import Any

# (heading, column headers, rows); headers ["", ""] mark a two-column key/value block.
Table = tuple[str, list[str], list[list[Any]]]


def csv_text(rows: list[dict[str, Any]], fields: list[str]) -> str:
    """Rows as CSV with a header line; keys outside ``fields`` are left out."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
