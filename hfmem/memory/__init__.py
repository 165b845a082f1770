"""Bytes: weights per precision, the KV cache per engine (kv/), the inference planner and GPU catalog, training budgets (training/), card and comparison summaries."""
