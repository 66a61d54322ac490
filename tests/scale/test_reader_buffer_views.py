"""A view of the Kineto reader's buffer held outside it (as a sampling profiler's frame does in a Dask worker:
seen as `BufferError: Existing exports of data` on a 64-rank bench) no longer fails the read: the reader copies
the rest of the buffer instead of resizing it in place, and the report is the same."""

from __future__ import annotations

from typing import Any

import pytest

import tb_llmdiag.ingest.kineto.reader as ct
from tb_llmdiag import api
from tb_llmdiag.render.canonical_json import dumps
from tracepaths import REPO

TRACE = REPO / "tests" / "data" / "ddp_straggler" / "rank0.1795411851201244640.pt.trace.json.gz"


def test_a_view_held_outside_the_reader_gives_the_same_report(monkeypatch: pytest.MonkeyPatch) -> None:
    (tf,) = api.discover(str(TRACE)).files
    expected = dumps(api.analyze(tf).report)
    original = ct._Reader._decode_upto
    pieces = []

    def holding(self: Any, cut: int) -> bool:
        view = memoryview(self.buf)  # alive while the piece is dropped from the buffer
        try:
            return bool(original(self, cut))
        finally:
            pieces.append(self.buf is not view.obj)  # the buffer was replaced, not resized
            view.release()

    monkeypatch.setattr(ct._Reader, "_decode_upto", holding)
    got = api.analyze(tf).report
    assert got["status"] == "ok"
    assert dumps(got) == expected
    assert pieces and all(pieces)
