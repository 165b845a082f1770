"""KV cache estimates as tables: one block per context, or one row per context for several."""

from __future__ import annotations

from hfmem.memory.kv import KVCacheEstimate, KVCacheSeries
from hfmem.render.tables import Table


def kv_tables(estimates: list[KVCacheEstimate]) -> list[Table]:
    if len(estimates) == 1:
        return estimates[0].tables()
    return KVCacheSeries(estimates).tables()
