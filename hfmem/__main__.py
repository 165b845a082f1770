"""``python -m hfmem``: the command line."""

from hfmem.cli import main

main(prog_name="hfmem")
