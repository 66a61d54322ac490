"""The reader is chosen by content (tb_llmdiag/ingest/formats.py, issue #22): each format's ``sniff`` on the first
bytes of every real trace we hold, the same file read under another format's name, and the JSON that must never pass
for an XSpace."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from tracepaths import SHARED_TRACES, TEST_DATA

from tb_llmdiag.errors import TraceFormatError
from tb_llmdiag.ingest import load_trace
from tb_llmdiag.ingest.discover import discover
from tb_llmdiag.ingest.files import HEAD_BYTES
from tb_llmdiag.ingest.formats import FORMATS, format_of, inflated, recognised


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return inflated(f.read(HEAD_BYTES), HEAD_BYTES)


def _real_traces() -> list[Path]:
    roots = [TEST_DATA] + ([SHARED_TRACES] if SHARED_TRACES.is_dir() else [])
    return sorted(
        {Path(tf.path) for root in roots for tf in discover(str(root)).files if Path(tf.path).stat().st_size}
    )


def test_every_real_trace_is_recognised_as_the_format_discovery_names() -> None:
    # GIVEN every trace discovery lists under tests/data (and ../shared/traces when present)
    files = _real_traces()
    kinds = {tf.path: tf.source_kind for root in (TEST_DATA,) for tf in discover(str(root)).files}
    assert len(files) > 50 and {"kineto", "xplane"} <= set(kinds.values())
    # THEN each one's first bytes are recognised by exactly its own format's sniff
    for path in files:
        head = _head(path)
        matches = [fmt.kind for fmt in FORMATS if fmt.sniff(head)]
        expected = "xplane" if path.name.endswith(".xplane.pb") else "kineto"
        assert matches == [expected], (path, matches)


def test_the_reader_follows_the_content_not_the_name(tmp_path: Path) -> None:
    # GIVEN an XPlane capture named like a Kineto trace, and a Kineto trace named like an XPlane capture
    pb = next(TEST_DATA.glob("xplane_jax_gpu/plugins/profile/*/*.xplane.pb"))
    kineto = next(TEST_DATA.glob("gpu_seed/*.pt.trace.json*"))
    as_json = tmp_path / "capture.pt.trace.json"
    shutil.copy(pb, as_json)
    as_pb = tmp_path / "trace.xplane.pb"
    as_pb.write_bytes(gzip.decompress(kineto.read_bytes()) if kineto.name.endswith(".gz") else kineto.read_bytes())
    # THEN each is read by the reader of its content, to the same trace as under its own name
    for renamed, original, kind in ((as_json, pb, "xplane"), (as_pb, kineto, "kineto")):
        got, want = load_trace(str(renamed)), load_trace(str(original))
        assert (got.source_kind, len(got.events)) == (kind, len(want.events))
        assert got.events.ts_ns.tolist() == want.events.ts_ns.tolist()


def test_a_file_no_format_recognises_gets_the_error_of_the_format_its_name_claims(tmp_path: Path) -> None:
    # GIVEN garbage under an XPlane name, a Kineto name and no known name
    cases = {"x.xplane.pb": "not a readable XPlane protobuf (", "x.pt.trace.json": "not a Chrome/Kineto trace",
             "x.bin": "not a Chrome/Kineto trace"}
    for name, words in cases.items():
        path = tmp_path / name
        path.write_bytes(b"\x0b\x0chello")
        assert recognised(_head(path)) is None
        assert format_of(name, _head(path)).kind == ("xplane" if name.endswith(".pb") else "kineto")
        with pytest.raises(TraceFormatError) as info:
            load_trace(str(path))
        assert str(info.value).startswith(words), (name, str(info.value))


@pytest.mark.parametrize(
    "text",
    [
        b'\n{"a": 1}\n',  # a newline is XSpace's first tag (field 1, length-delimited)
        b'\n{"' + b"x" * 200 + b'": 1}\n',
        b"\n" + json.dumps({"schema": "1.0", "nodes": [{"id": i, "name": f"n{i}"} for i in range(5000)]}).encode(),
        b"\n" + json.dumps({f"k{i}": "\n" * (i % 7) for i in range(8000)}, indent=1).encode(),
    ],
)
def test_json_starting_with_a_newline_is_never_an_xspace(text: bytes) -> None:
    # GIVEN JSON whose first byte is the byte an XSpace starts with, small and over HEAD_BYTES long
    head = text[:HEAD_BYTES]
    # THEN the XPlane sniff refuses it (and Kineto's does not claim a non-trace)
    assert recognised(head) is None


def test_an_empty_xspace_is_an_xspace() -> None:
    # an XSpace of one empty plane (tests/test_discover.py writes it) and a plane with an id and a name
    assert [fmt.kind for fmt in FORMATS if fmt.sniff(b"\x0a\x00")] == ["xplane"]
    assert [fmt.kind for fmt in FORMATS if fmt.sniff(b"\x0a\x07\x08\x01\x12\x03abc")] == ["xplane"]
    assert not any(fmt.sniff(b"\x0a\x07\x08\x01\x12\x09abc") for fmt in FORMATS)  # the name runs past the file
