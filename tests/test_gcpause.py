"""hfmem.gcpause: the objects a bulk phase allocates leave it in the oldest generation (no young-generation backlog
for the next allocation to scan), and a process's own frozen objects stay frozen."""

from __future__ import annotations

import gc

from hfmem.gcpause import gc_paused


def test_paused_allocations_end_in_the_oldest_generation():
    assert gc.isenabled()
    with gc_paused():
        made = [[i] for i in range(5000)]
        assert not gc.isenabled()
    assert gc.isenabled()
    assert any(o is made[0] for o in gc.get_objects(generation=2))
    assert not any(o is made[-1] for o in gc.get_objects(generation=0))


def test_a_callers_frozen_objects_stay_frozen():
    keep = [[i] for i in range(100)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen >= len(keep)
        with gc_paused():
            pass
        # not unfrozen (0) nor frozen again (more); objects of the suite's other threads may die meanwhile
        assert frozen - 1000 <= gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
