"""``python -m hfmem``: the command line."""

from hfmem.cli import run

run()
