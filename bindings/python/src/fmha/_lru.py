"""Bounded, thread-safe maps: an LRU (the plan cache's store) and a
second-chance map (the remembered call forms', read once per call)."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Optional


class _BoundedMap:
    """What both maps share: a capacity (0: holds nothing), ``lock`` around
    every change, and ``_items``; ``_trim`` is each map's eviction."""

    def __init__(self, maxsize: int, items: Any) -> None:
        self._maxsize = max(0, int(maxsize))
        self._items = items
        self.lock = threading.Lock()

    @property
    def maxsize(self) -> int:
        return self._maxsize

    def clear(self) -> None:
        with self.lock:
            self._items.clear()

    def resize(self, maxsize: int) -> None:
        """Change the capacity (0 disables), evicting as a put would."""
        with self.lock:
            self._maxsize = max(0, int(maxsize))
            self._trim()

    def _trim(self) -> None:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._items)


class BoundedLru(_BoundedMap):
    """Least-recently-used map of at most ``maxsize`` entries (0: holds
    nothing). ``lock`` is held by every method; callers that keep counters
    of their own take it too."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize, OrderedDict())

    def get_locked(self, key: Any) -> Optional[Any]:
        """The value for ``key`` (marked most recent), or None; ``lock`` held."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put_locked(self, key: Any, value: Any) -> Any:
        """Stores ``value`` unless ``key`` already has one; returns the value
        kept. Evicts the oldest past ``maxsize``; ``lock`` held."""
        existing = self.get_locked(key)
        if existing is not None:
            return existing
        if self._maxsize > 0:
            self._items[key] = value
            self._trim()
        return value

    def get(self, key: Any) -> Optional[Any]:
        with self.lock:
            return self.get_locked(key)

    def put(self, key: Any, value: Any) -> Any:
        with self.lock:
            return self.put_locked(key, value)

    def _trim(self) -> None:
        while len(self._items) > self._maxsize:
            self._items.popitem(last=False)


class SecondChanceMap(_BoundedMap):
    """A map of at most ``maxsize`` entries whose reads cost a dict lookup:
    a read only marks its entry (no lock, no reordering; a dict read is
    atomic). A put past ``maxsize`` walks the entries oldest first: a marked
    one loses its mark and goes to the back, the first unmarked one is
    dropped (CLOCK, close to least-recently-used). An LRU's reordering on
    every read would hash the key a second time and take a lock."""

    def __init__(self, maxsize: int) -> None:
        # key -> [value, read since the walk last passed it]
        super().__init__(maxsize, {})

    def get(self, key: Any) -> Optional[Any]:
        entry = self._items.get(key)
        if entry is None:
            return None
        entry[1] = True
        return entry[0]

    def put(self, key: Any, value: Any) -> Any:
        """Stores ``value`` unless ``key`` already has one; returns the value
        kept. A new entry counts as read, so the walk it starts drops an
        older one."""
        with self.lock:
            entry = self._items.get(key)
            if entry is not None:
                return entry[0]
            if self._maxsize > 0:
                self._items[key] = [value, True]
                self._trim()
            return value

    def _trim(self) -> None:
        entries = self._items
        while len(entries) > self._maxsize:
            oldest = next(iter(entries))
            entry = entries.pop(oldest)
            if entry[1] and self._maxsize > 0:
                entry[1] = False
                entries[oldest] = entry  # a second chance, at the back
            # else dropped. Each pass clears a mark, so the walk ends within
            # len(entries) + 1 steps.
