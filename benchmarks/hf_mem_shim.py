"""Run hf-mem against $HF_ENDPOINT. hf-mem builds every URL as an f-string on https://huggingface.co and never reads
HF_ENDPOINT, so this shim rewrites that prefix in httpx2's request builder (nothing else changes) and then runs
hf-mem's own CLI entry point. Usage: python hf_mem_shim.py --model-id ORG/NAME [hf-mem options]."""

import os
import sys

import httpx2

PREFIX = "https://huggingface.co"
ENDPOINT = os.environ["HF_ENDPOINT"].rstrip("/")
_build_request = httpx2.AsyncClient.build_request


def build_request(self, method, url, *args, **kwargs):
    text = str(url)
    if text.startswith(PREFIX):
        url = ENDPOINT + text[len(PREFIX):]
    return _build_request(self, method, url, *args, **kwargs)


httpx2.AsyncClient.build_request = build_request

from hf_mem.cli import main  # noqa: E402

sys.exit(main())
