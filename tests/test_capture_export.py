"""tb_llmdiag.capture_export: a window's trace written with a top-level key inserted, in one streaming pass."""

from __future__ import annotations

import gzip
import io
import json
import os

import pytest

from tb_llmdiag import capture_export
from tb_llmdiag.capture_export import insert_top_level, trace_file_name, write_window

KINETO_LIKE = b'\n  {\n    "schemaVersion": 1,\n    "deviceProperties": [\n    ],\n  "traceEvents": [{"name": "a"}]\n}'


def inserted(text: bytes, value=None, chunk=None, monkeypatch=None) -> tuple[bytes, bool]:
    if chunk is not None:
        monkeypatch.setattr(capture_export, "CHUNK_BYTES", chunk)
    out = io.BytesIO()
    ok = insert_top_level(io.BytesIO(text), out, "k", {"a": [1, 2]} if value is None else value)
    return out.getvalue(), ok


@pytest.mark.parametrize("chunk", [None, 1, 2, 3, 7])
def test_the_key_comes_first_and_the_rest_is_kept_byte_for_byte(chunk, monkeypatch):
    out, ok = inserted(KINETO_LIKE, chunk=chunk, monkeypatch=monkeypatch)
    assert ok
    doc = json.loads(out)
    assert list(doc) == ["k", "schemaVersion", "deviceProperties", "traceEvents"]
    assert doc["k"] == {"a": [1, 2]} and doc["traceEvents"] == [{"name": "a"}]
    # the exported text is kept as it was around the one member added after the brace
    assert out == b'\n  {\n  "k":{"a":[1,2]},\n    "schemaVersion"' + KINETO_LIKE.split(b'"schemaVersion"', 1)[1]


@pytest.mark.parametrize(("text", "chunk"), [(b"{}", None), (b"  {  \n }", 1), (b"{\n}\n", 2)])
def test_an_empty_object_gets_no_trailing_comma(text, chunk, monkeypatch):
    out, ok = inserted(text, chunk=chunk, monkeypatch=monkeypatch)
    assert ok and json.loads(out) == {"k": {"a": [1, 2]}}


@pytest.mark.parametrize("text", [b'[{"name": "a"}]', b"", b"  \n"])
def test_a_text_that_is_not_an_object_is_copied_unchanged(text):
    out, ok = inserted(text)
    assert not ok and out == text


def test_values_that_are_not_json_are_refused():
    with pytest.raises(ValueError):
        inserted(b"{}", value={"x": float("nan")})


def test_write_window_names_gzips_and_cleans_up(tmp_path):
    def export(path):
        with open(path, "wb") as f:
            f.write(KINETO_LIKE)

    path = write_window(export, str(tmp_path / "run"), "rank3", "k", {"step_ns": [5]})
    name = os.path.basename(path)
    worker, ns, rest = name.split(".", 2)
    assert (worker, rest) == ("rank3", "pt.trace.json.gz") and ns.isdigit()
    assert os.listdir(tmp_path / "run") == [name]  # the temporary export is gone
    with gzip.open(path, "rb") as f:
        doc = json.load(f)
    assert doc["k"] == {"step_ns": [5]} and doc["traceEvents"] == [{"name": "a"}]
    plain = write_window(export, str(tmp_path / "run"), "rank3", "k", 1, use_gzip=False)
    with open(plain, "rb") as f:
        assert plain.endswith(".pt.trace.json") and json.load(f)["k"] == 1


def test_write_window_leaves_nothing_when_the_export_fails(tmp_path):
    def export(path):
        with open(path, "wb") as f:
            f.write(b"{")
        raise RuntimeError("export failed")

    with pytest.raises(RuntimeError):
        write_window(export, str(tmp_path), "rank0", "k", 1)
    assert os.listdir(tmp_path) == []


def test_file_names_are_the_trace_handlers():
    assert trace_file_name("rank0", True, 12) == "rank0.12.pt.trace.json.gz"
    assert trace_file_name("node_rank1", False, 7) == "node_rank1.7.pt.trace.json"


def test_extra_members_follow_the_key_in_order():
    out = io.BytesIO()
    assert insert_top_level(io.BytesIO(KINETO_LIKE), out, "k", 1, {"w": {"reason": "periodic"}, "z": [2]})
    text = out.getvalue()
    assert text.startswith(b'\n  {\n  "k":1,"w":{"reason":"periodic"},"z":[2],')
    doc = json.loads(text)
    assert list(doc) == ["k", "w", "z", "schemaVersion", "deviceProperties", "traceEvents"]
