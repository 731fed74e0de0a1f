"""The bounded maps behind the plan cache (LRU) and the remembered call
forms (second chance), no GPU."""
from __future__ import annotations

import pytest

from fmha._lru import BoundedLru, SecondChanceMap


def test_evicts_the_least_recently_used() -> None:
    lru = BoundedLru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "a" is now the most recent
    lru.put("c", 3)
    assert lru.get("b") is None
    assert (lru.get("a"), lru.get("c"), len(lru)) == (1, 3, 2)


@pytest.mark.parametrize("kind", [BoundedLru, SecondChanceMap])
def test_put_keeps_an_existing_value(kind) -> None:
    m = kind(4)
    assert m.put("k", "first") == "first"
    assert m.put("k", "second") == "first"  # e.g. another thread's plan won the race
    assert m.get("k") == "first"


@pytest.mark.parametrize("kind", [BoundedLru, SecondChanceMap])
def test_resize_and_zero_capacity(kind) -> None:
    m = kind(3)
    for i in range(3):
        m.put(i, str(i))
    m.get(2)
    m.resize(1)
    assert (len(m), m.get(2), m.maxsize) == (1, "2", 1)
    m.resize(0)
    assert len(m) == 0
    assert m.put("x", 1) == 1  # returned, not kept
    assert m.get("x") is None
    m.resize(2)
    m.put("y", 2)
    m.clear()
    assert (len(m), m.get("y")) == (0, None)


def test_second_chance_drops_the_oldest_entry_not_read_since() -> None:
    m = SecondChanceMap(3)
    for key in "abc":
        m.put(key, key.upper())
    m.put("d", "D")  # every entry was new (marked): marks cleared in order, then "a" goes
    assert (m.get("a"), len(m)) == (None, 3)
    assert m.get("b") == "B"  # "b" read since the walk passed it
    m.put("e", "E")  # "b" gets a second chance, "c" (unread) goes
    assert m.get("c") is None
    assert [m.get(k) for k in "bde"] == ["B", "D", "E"]


def test_second_chance_walk_ends_with_every_entry_marked() -> None:
    m = SecondChanceMap(100)
    for i in range(100):
        m.put(i, i)
    for i in range(100):
        assert m.get(i) == i
    m.put("new", -1)
    assert len(m) == 100 and m.get("new") == -1
    assert sum(m.get(i) is None for i in range(100)) == 1
