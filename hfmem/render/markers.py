"""Replace the block between ``<!-- hfmem:start -->`` and ``<!-- hfmem:end -->`` in a model card, touching
nothing else; append the block (with markers) when the markers are absent."""

from __future__ import annotations

from hfmem.errors import UsageError

START = "<!-- hfmem:start -->"
END = "<!-- hfmem:end -->"


def update_block(document: str, block: str) -> str:
    # The block quotes repo-supplied text: card_markdown escapes it, but a marker in it would still make the file
    # unbalanced (and every later --update refuse it), so none survives here whatever the block is.
    for marker in (START, END):
        block = block.replace(marker, marker.replace("<", "&lt;"))
    body = f"{START}\n{block.strip()}\n{END}"
    start = document.find(START)
    end = document.find(END)
    if start == -1 and end == -1:
        sep = "" if not document or document.endswith("\n\n") else ("\n" if document.endswith("\n") else "\n\n")
        return f"{document}{sep}{body}\n"
    if start == -1 or end == -1 or end < start or document.count(START) > 1 or document.count(END) > 1:
        raise UsageError("the file has unbalanced or repeated hfmem markers; fix them by hand")
    return document[:start] + body + document[end + len(END) :]
