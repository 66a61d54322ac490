"""Loaded trace-view indexes, a few at a time: the cache's meta + memory-mapped arrays, checked once.

``TraceViews(cache).get(cache_key)`` returns the ``api.TraceIndex`` of a ready run, loading and checking it on
first use (``TraceIndex.load``: the whole index, once) and keeping the last ``KEEP`` in memory (the arrays stay
memory-mapped, from a private copy of the entry that another process cannot cut short: ``tab/arrays.py``; what is
kept is the small Python side). A missing or damaged entry is None: the route asks for
the run to be analysed again, never serves it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from tb_llmdiag import api
from tb_llmdiag.errors import BadIndex
from tb_llmdiag.tab.cache import ResultCache

logger = logging.getLogger(__name__)

KEEP = 4


class TraceViews:
    def __init__(self, cache: ResultCache) -> None:
        self.cache = cache
        self._loaded: OrderedDict[str, api.TraceIndex] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, cache_key: str) -> api.TraceIndex | None:
        with self._lock:
            found = self._loaded.get(cache_key)
            if found is not None:
                self._loaded.move_to_end(cache_key)
                return found
        meta = self.cache.get(cache_key, "traceview")
        arrays = self.cache.get_arrays(cache_key, "traceview.bin") if meta is not None else None
        if meta is None or arrays is None:
            return None
        try:
            index = api.TraceIndex.load(meta, arrays)
        except BadIndex as e:
            logger.warning("llm_diag: ignoring the trace-view index %s: %s", cache_key, e)
            return None
        with self._lock:
            self._loaded[cache_key] = index
            while len(self._loaded) > KEEP:
                self._loaded.popitem(last=False)
        return index
