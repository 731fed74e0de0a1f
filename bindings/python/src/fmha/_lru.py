"""A bounded, thread-safe LRU map: the store of the plan cache and of the
remembered call forms."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Optional


class BoundedLru:
    """Least-recently-used map of at most ``maxsize`` entries (0: holds
    nothing). ``lock`` is held by every method; callers that keep counters
    of their own take it too."""

    def __init__(self, maxsize: int) -> None:
        self._maxsize = max(0, int(maxsize))
        self._items: "OrderedDict[Any, Any]" = OrderedDict()
        self.lock = threading.Lock()

    @property
    def maxsize(self) -> int:
        return self._maxsize

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

    def clear(self) -> None:
        with self.lock:
            self._items.clear()

    def resize(self, maxsize: int) -> None:
        """Change the capacity (0 disables), evicting the oldest."""
        with self.lock:
            self._maxsize = max(0, int(maxsize))
            self._trim()

    def _trim(self) -> None:
        while len(self._items) > self._maxsize:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        with self.lock:
            return len(self._items)
