"""The bounded LRU behind the plan cache and the remembered call forms (no GPU)."""
from __future__ import annotations

from fmha._lru import BoundedLru


def test_evicts_the_least_recently_used() -> None:
    lru = BoundedLru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "a" is now the most recent
    lru.put("c", 3)
    assert lru.get("b") is None
    assert (lru.get("a"), lru.get("c"), len(lru)) == (1, 3, 2)


def test_put_keeps_an_existing_value() -> None:
    lru = BoundedLru(4)
    assert lru.put("k", "first") == "first"
    assert lru.put("k", "second") == "first"  # e.g. another thread's plan won the race
    assert lru.get("k") == "first"


def test_resize_and_zero_capacity() -> None:
    lru = BoundedLru(3)
    for i in range(3):
        lru.put(i, str(i))
    lru.resize(1)
    assert (len(lru), lru.get(2), lru.maxsize) == (1, "2", 1)
    lru.resize(0)
    assert len(lru) == 0
    assert lru.put("x", 1) == 1  # returned, not kept
    assert lru.get("x") is None
    lru.resize(2)
    lru.put("y", 2)
    lru.clear()
    assert len(lru) == 0
