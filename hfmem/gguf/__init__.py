"""GGUF files: the header reader, the one ggml block-size table, and the per-file report."""
