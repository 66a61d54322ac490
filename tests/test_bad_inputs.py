"""The bad-input corpus: each case through the CLI (``llmdiag report``) with its expected one-line message
and exit code. Offsets and shares are computed here from where the test put the fault, not by the reader.

Exit codes (tb_llmdiag/cli/__init__.py): 0 read in full, 3 no traces, 4 unreadable, 6 read only in part.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from tb_llmdiag.cli import main

from tracepaths import TEST_DATA

SEED = next((TEST_DATA / "gpu_compiled").glob("*.pt.trace.json.gz"))
TEXT = gzip.decompress(SEED.read_bytes())  # Kineto's own layout
DOC = msgspec.json.decode(TEXT)
N_EVENTS_X = sum(1 for e in DOC["traceEvents"] if e.get("ph") == "X")


def run(capsys: pytest.CaptureFixture[str], path: Path | str, *extra: str) -> tuple[int, str, str]:
    code = main(["report", str(path), *extra])
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "Traceback" not in out.out
    return code, out.out, out.err


def report_of(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict]:
    code, out, _ = run(capsys, path, "--json")
    return code, json.loads(out)["runs"][0]


def put(tmp_path: Path, data: bytes, name: str = "w.1.pt.trace.json") -> Path:
    """The bad file, at rest: its mtime an hour back (a cut .gz modified moments ago is "still being written")."""
    p = tmp_path / name
    p.write_bytes(data)
    old = time.time() - 3600
    os.utime(p, (old, old))
    return p


def at_middle_value(token: bytes) -> tuple[bytes, int]:
    """TEXT with the value of the "dur" nearest the middle replaced by ``token``, and the token's offset."""
    i = TEXT.find(b'"dur": ', len(TEXT) // 2) + len(b'"dur": ')
    j = i
    while TEXT[j:j + 1] in b"0123456789.":
        j += 1
    return TEXT[:i] + token + TEXT[j:], i


# ------------------------------------------------------------------------- invalid JSON mid-file


@pytest.mark.parametrize("token,reason", [(b"NaN", "NaN is not JSON"), (b"Infinity", "Infinity is not JSON"),
                                          (b"-Infinity", "Infinity is not JSON")])
def test_non_json_number_mid_file_is_an_error_at_its_offset(tmp_path, capsys, token, reason) -> None:
    data, at = at_middle_value(token)
    path = put(tmp_path, data)
    code, rep = report_of(capsys, path)
    share = at / len(data)
    assert code == 6
    assert rep["status"] == "partial"
    assert rep["error"] == f"invalid JSON at byte {at:,} ({share:.0%}): {reason}"
    state = rep["read_state"]
    assert state["complete"] is False and state["reason"] == rep["error"]
    assert state["read_share"] == round(share, 4)
    # what was read is the events that end before the fault, stated as such
    whole = TEXT[:at].count(b'"ph": "X"') - 1  # the event holding the fault is not read
    assert 0 < rep["summary"]["counts"]["events"] <= whole
    assert rep["warnings"][0].startswith(f"partial result: {rep['error']} ({share:.0%} of the file read)")


def test_invalid_utf8_mid_file_is_an_error_at_its_offset(tmp_path, capsys) -> None:
    i = TEXT.find(b'"name": "', len(TEXT) // 2) + len(b'"name": "')
    data = TEXT[:i] + b"\xff" + TEXT[i:]
    code, rep = report_of(capsys, put(tmp_path, data))
    assert code == 6
    assert rep["error"] == f"invalid JSON at byte {i:,} ({i / len(data):.0%}): invalid UTF-8 byte 0xff"


def test_invalid_utf8_after_a_type_mismatch(tmp_path, capsys) -> None:
    # a piece with a mistyped value goes the lenient way; a bad byte later in it is still an error at its offset
    i = TEXT.find(b'"tid": ', 1000) + len(b'"tid": ')
    j = TEXT.find(b'"name": "', i) + len(b'"name": "')
    data = TEXT[:i] + b"true, \"x\": " + TEXT[i:j] + b"\xc3\x28" + TEXT[j:]
    code, rep = report_of(capsys, put(tmp_path, data))
    at = j + len(b"true, \"x\": ")
    assert code == 6
    assert rep["error"] == f"invalid JSON at byte {at:,} ({at / len(data):.0%}): invalid UTF-8 byte 0xc3"


def test_number_beyond_float64_rejects_its_event(tmp_path, capsys) -> None:
    data, _ = at_middle_value(b"1e400")
    code, rep = report_of(capsys, put(tmp_path, data))
    assert code == 0 and rep["status"] == "ok"
    assert "1 events of an unexpected shape were skipped" in rep["warnings"][0]
    assert rep["summary"]["counts"]["events"] == N_EVENTS_X - 1 - 1  # minus the profiler's own span


def test_deep_nesting_is_refused_at_its_offset(tmp_path, capsys) -> None:
    i = TEXT.find(b'"args": ', len(TEXT) // 2) + len(b'"args": ')
    data = TEXT[:i] + b"[" * 100_000 + b"]" * 100_000 + b", \"a\": " + TEXT[i:]
    code, rep = report_of(capsys, put(tmp_path, data))
    # the array is depth 1, the event 2, its args 3: the 255th '[' goes past 256 levels
    at = i + 254
    assert code == 6
    assert rep["error"] == f"invalid trace at byte {at:,}: JSON nested deeper than 256 levels"


def test_deep_nesting_in_the_header(tmp_path, capsys) -> None:
    code, _, err = run(capsys, put(tmp_path, b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b', "traceEvents": []}'))
    assert code == 4
    assert "nested too deep" in err


def test_bare_list_of_numbers(tmp_path, capsys) -> None:
    code, _, err = run(capsys, put(tmp_path, b"[1,2,3]"))
    assert code == 4
    assert err.strip().endswith("the trace has no timed events ('traceEvents' holds no complete events); 3 events "
                                "of an unexpected shape were skipped (a value of the wrong type, or a number beyond "
                                "float64)")


# ---------------------------------------------------------------------------------------- cut files


def test_cut_plain_json_says_where(tmp_path, capsys) -> None:
    cut = int(len(TEXT) * 0.31)
    code, rep = report_of(capsys, put(tmp_path, TEXT[:cut]))
    assert code == 6
    assert rep["error"] == f"the JSON ends early at byte {cut:,} (file truncated?)"
    assert rep["read_state"]["read_share"] == 1.0  # all there is was read; the cut is at its end
    assert rep["read_state"]["read_bytes"] <= cut


def test_cut_gzip_says_where(tmp_path, capsys) -> None:
    gz = gzip.compress(TEXT)
    cut = len(gz) // 2
    code, rep = report_of(capsys, put(tmp_path, gz[:cut], "w.1.pt.trace.json.gz"))
    assert code == 6
    assert rep["error"].startswith("the gzip stream ends early (file truncated?), at byte ")
    assert 0.95 <= rep["read_state"]["read_share"] <= 1.0


def test_small_cut_gzip_like_small_cut_json(tmp_path, capsys) -> None:
    small = b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}, {"ph": "X", "na'
    code_json, _, err_json = run(capsys, put(tmp_path, small, "a.json"))
    code_gz, _, err_gz = run(capsys, put(tmp_path, gzip.compress(small + b'me": "x"}]}')[:-12], "b.json.gz"))
    assert code_json == 6 and "the JSON ends early" in err_json
    assert code_gz == 6 and "the gzip stream ends early" in err_gz


def test_cut_in_the_metadata_after_the_events(tmp_path, capsys) -> None:
    end = TEXT.rindex(b"]")  # the events array closes here; Kineto writes metadata after it
    data = TEXT[:end] + b'], "traceName": "abc'
    code, rep = report_of(capsys, put(tmp_path, data))
    assert code == 6
    assert rep["error"] == "the JSON ends early in the metadata after the events (file truncated?)"
    assert rep["summary"]["counts"]["events"] == N_EVENTS_X - 1


def test_empty_and_junk_files(tmp_path, capsys) -> None:
    assert run(capsys, put(tmp_path, b"", "e.json"))[0] == 4
    code, _, err = run(capsys, put(tmp_path, b"\x00\x01junk" * 10, "j.json"))
    assert code == 4 and "not a Chrome/Kineto trace (the text is not JSON)" in err


# ------------------------------------------------------------------------------ values out of range


def _doc(events: list[dict]) -> bytes:
    return msgspec.json.encode({"traceEvents": events})


def test_impossible_values_are_rejected_per_event(tmp_path, capsys) -> None:
    good = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "args": {"stream": 7, "device": 0}}
    events = [dict(good, ts=10, dur=5), dict(good, ts=20, dur=-3), dict(good, ts=30, dur=9.3e18),
              dict(good, ts=-9.2e18, dur=1), dict(good, ts=40, dur=5)]
    code, rep = report_of(capsys, put(tmp_path, _doc(events)))
    # 3 of 5 events rejected (#27): a partial report that says what was dropped, exit 6
    assert (code, rep["status"]) == (6, "partial")
    assert rep["error"] == ("3 of 5 events (60%) were rejected for impossible numbers (1 events with a negative duration "
                            "were rejected; 2 events with a time or duration beyond 73 years were rejected)")
    assert "1 events with a negative duration were rejected" in rep["warnings"]
    assert any(w.startswith("2 events with a time or duration beyond") for w in rep["warnings"])
    assert rep["summary"]["counts"]["events"] == 2
    assert rep["summary"]["window_ns"] == 35_000


def test_number_beyond_float64_in_input_dims(tmp_path, capsys) -> None:
    # found by the fuzzer: an infinite dimension crashed the FLOPs topic (OverflowError, logged with its traceback)
    data = (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 5, "pid": 1, '
            b'"tid": 1, "args": {"Input Dims": [[4, 1e400], [8, 16]]}}, {"ph": "X", "cat": "kernel", "name": "k", '
            b'"ts": 2, "dur": 1, "pid": 0, "tid": 7, "args": {"stream": 7}}]}')
    code, rep = report_of(capsys, put(tmp_path, data))
    assert code == 0
    assert rep["warnings"] == ["1 operators' recorded shapes hold a dimension beyond 2^40 (or one that is negative "
                               "or not an integer) and were ignored"]
    assert rep["metrics"]["flops"]["available"] is False


def test_step_number_beyond_int64(tmp_path, capsys) -> None:
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999", "ts": 0, "dur": 10,
           "pid": 1, "tid": 1},
          {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "pid": 0, "tid": 7, "args": {"stream": 7}}]
    code, rep = report_of(capsys, put(tmp_path, _doc(ev)))
    assert code == 0
    assert "1 ProfilerStep markers with a step number beyond int64 were ignored" in rep["warnings"]
    assert rep["metrics"]["steps"].get("per_step", []) == []


def test_overlapping_and_duplicate_step_markers_warn(tmp_path, capsys) -> None:
    def step(n: int, ts: int, dur: int) -> dict:
        return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": ts, "dur": dur, "pid": 1, "tid": 1}

    ev = [step(1, 0, 100), step(2, 50, 100), step(2, 200, 10),
          {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "pid": 0, "tid": 7, "args": {"stream": 7}}]
    code, rep = report_of(capsys, put(tmp_path, _doc(ev)))
    assert code == 0
    assert ("1 ProfilerStep markers start before the previous one on their thread ends (overlapping steps: the "
            "step split may be wrong)") in rep["warnings"]
    assert "1 step numbers are marked more than once (e.g. ProfilerStep#2): the step split may be wrong" \
        in rep["warnings"]


# ------------------------------------------------------------------------------- layouts and formats


def _summary(capsys, path: Path) -> dict:
    code, rep = report_of(capsys, path)
    assert code == 0 and rep["status"] == "ok", rep["error"]
    return {k: rep[k] for k in ("summary", "metrics", "findings")}


def test_every_layout_reads_like_kinetos(tmp_path, capsys) -> None:
    events = DOC["traceEvents"]
    meta = {k: v for k, v in DOC.items() if k != "traceEvents"}
    kineto = _summary(capsys, put(tmp_path, TEXT, "a.json"))
    one_line = msgspec.json.encode(DOC)
    per_line = (b'{"traceEvents": [\n' + b",\n".join(msgspec.json.encode(e) for e in events) + b"\n], "
                + msgspec.json.encode(meta)[1:])
    array = msgspec.json.encode(events)
    array_open = b"[\n" + b",\n".join(msgspec.json.encode(e) for e in events) + b",\n"  # no closing ']' (allowed)
    pretty = json.dumps(json.loads(TEXT), indent=7).encode()
    for name, data in [("one.json", one_line), ("lines.json", per_line), ("pretty.json", pretty)]:
        assert _summary(capsys, put(tmp_path, data, name)) == kineto, name
    array_view = _summary(capsys, put(tmp_path, array, "arr.json"))
    assert _summary(capsys, put(tmp_path, array_open, "arr_open.json")) == array_view
    # the array format has no deviceProperties: the events and steps are the same
    assert array_view["summary"]["counts"] == kineto["summary"]["counts"]
    assert array_view["metrics"]["steps"]["per_step"] == kineto["metrics"]["steps"]["per_step"]


def test_text_after_the_array_format(tmp_path, capsys) -> None:
    data = msgspec.json.encode(DOC["traceEvents"]) + b" garbage"
    code, rep = report_of(capsys, put(tmp_path, data))
    at = len(data) - len(b" garbage")
    assert code == 6
    assert rep["error"] == f"invalid JSON at byte {at:,}: text after the closing ']' of the events"


# ---------------------------------------------------------------------------------- bombs and limits


EVENT = b'{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"pid":0,"tid":7},'


@pytest.mark.parametrize("body", [
    b" " * (1 << 20),  # one 1 GiB string
    EVENT * ((1 << 20) // len(EVENT)),  # 1 GiB of events on one line
], ids=["one-string", "events"])
def test_gzip_bomb_stops_at_the_limit(tmp_path, body: bytes) -> None:
    """Whichever bound comes first (64x the compressed size inflated, or one event over 64 MiB) stops it."""
    bomb = tmp_path / "bomb.pt.trace.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(b'{"traceEvents": [' + (b'{"ph": "X", "name": "' if body[:1] == b" " else b""))
        for _ in range(1024):  # ~1 GiB inflated
            f.write(body)
        f.write(b'"}]}' if body[:1] == b" " else b'{"ph":"i"}]}')
    assert bomb.stat().st_size < (1.2e6 if body[:1] == b" " else 4e6)  # events compress ~300x at best
    # the child's own peak: VmHWM belongs to the process's memory map; ru_maxrss would not do, since exec() carries
    # the forking parent's high-water mark into it (pytest's own RSS after a thousand tests read as the bomb's)
    code = ("import re, sys, time; from tb_llmdiag.cli import main; t = time.perf_counter(); "
            "c = main(['report', sys.argv[1]]); "
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
            "print(c, time.perf_counter() - t, hwm)")
    out = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True, text=True, timeout=120)
    exit_code, _seconds, rss_kib = out.stdout.split()[-3:]
    assert int(exit_code) == 4
    assert ("refused as a likely decompression bomb" in out.stderr
            or "one event runs over 64 MiB without ending" in out.stderr), out.stderr
    assert int(rss_kib) < 300 * 1024  # bounded memory; the time is bench/bomb_speed.py's (never a timed test)


# ------------------------------------------------------------------------------ files that are not files


def test_fifo_given_directly(tmp_path, capsys) -> None:
    fifo = tmp_path / "x.pt.trace.json"
    os.mkfifo(fifo)
    code, _, err = run(capsys, fifo)
    assert code == 4 and err.strip().endswith("it is a named pipe (FIFO), not a trace file")


def test_symlink_loop_and_device_given_directly(tmp_path, capsys) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    code, _, err = run(capsys, loop)
    assert code == 4 and "a symlink loop" in err
    zero = tmp_path / "zero.pt.trace.json"
    zero.symlink_to("/dev/zero")
    code, _, err = run(capsys, zero)
    assert code == 4 and "it is a character device, not a trace file" in err


def test_fifo_and_loop_inside_a_logdir(tmp_path, capsys) -> None:
    run_dir = tmp_path / "logs" / "r"
    run_dir.mkdir(parents=True)
    (run_dir / "good.1.pt.trace.json").write_bytes(TEXT)
    os.mkfifo(run_dir / "fifo.1.pt.trace.json")
    os.mkfifo(run_dir / "other.json")
    (run_dir / "loop.json").symlink_to(run_dir / "loop.json")
    start = time.perf_counter()
    code, out, err = run(capsys, tmp_path / "logs")
    assert time.perf_counter() - start < 30
    assert code == 4  # the FIFO named like a trace is listed and fails with its reason
    assert "fifo.1.pt.trace.json: cannot read fifo.1.pt.trace.json: it is a named pipe (FIFO), not a trace file" in err
    assert "warning: r/other.json skipped: it is a named pipe (FIFO), not a trace file" in out
    assert "warning: r/loop.json skipped: a symlink loop (the link points back to itself)" in out


def test_junk_named_like_a_trace_is_reported(tmp_path, capsys) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "x.pt.trace.json").write_text("hello")
    code, _, err = run(capsys, tmp_path)
    assert code == 4
    assert "x.pt.trace.json: not a Chrome/Kineto trace (the text is not JSON)" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod-000 file")
def test_unreadable_trace_given_directly_and_in_a_logdir(tmp_path, capsys) -> None:
    p = put(tmp_path, TEXT)
    p.chmod(0)
    code, _, err = run(capsys, p)
    assert code == 4 and "permission denied" in err
    code, _, err = run(capsys, tmp_path)
    assert code == 4 and "permission denied" in err


def test_unreadable_trace_as_root_too(tmp_path, capsys, monkeypatch) -> None:
    """The same messages where the test runs as root (which reads chmod-000 files): the OS refusal is
    simulated where the readers ask for it."""
    from tb_llmdiag.ingest import files

    real_open = os.open

    def refuse(path, *args, **kwargs):
        if str(path).endswith(".pt.trace.json"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    (tmp_path / "r").mkdir()
    p = put(tmp_path / "r", TEXT)
    monkeypatch.setattr(files.os, "open", refuse)
    code, _, err = run(capsys, p)
    assert code == 4
    assert err.strip().endswith("cannot read w.1.pt.trace.json: permission denied (the file is not readable by this user)")
    monkeypatch.setattr(files.os, "access", lambda path, mode: not str(path).endswith(".pt.trace.json"))
    code, _, err = run(capsys, tmp_path)
    assert code == 4 and "permission denied" in err  # listed, not skipped silently


def test_missing_path(tmp_path, capsys) -> None:
    code, _, err = run(capsys, tmp_path / "nope")
    assert code == 3 and err.strip().endswith("no such file or directory")


# ------------------------------------------------------------------------- the third audit (#35)

_AUDIT_STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 100, "pid": 1, "tid": 1}
_AUDIT_LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 110, "dur": 5, "pid": 1, "tid": 1,
                 "args": {"correlation": 5}}
_AUDIT_KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "ts": 120, "pid": 0, "tid": 7,
                 "args": {"device": 0, "stream": 7, "correlation": 5}}


def cli_subprocess(path: Path) -> tuple[int, dict, str]:
    """``llmdiag report PATH --json`` in its own process: what a user sees on stderr, logged tracebacks included."""
    proc = subprocess.run([sys.executable, "-m", "tb_llmdiag.cli", "report", str(path), "--json"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    return proc.returncode, json.loads(proc.stdout)["runs"][0], proc.stderr


def test_a_trace_of_zero_duration_events_has_no_traceback(tmp_path) -> None:
    # GIVEN a step, a launch and a kernel, every duration 0: no step window at all (#35)
    events = [dict(_AUDIT_STEP, ts=100, dur=0), dict(_AUDIT_LAUNCH, ts=100, dur=0), dict(_AUDIT_KERNEL, ts=100, dur=0)]
    code, rep, err = cli_subprocess(put(tmp_path, _doc(events)))
    # THEN the capture topic is computed (nothing failed), the kernel counted outside the (empty) window, exit 0
    assert "Traceback" not in err and "failed" not in err
    assert (code, rep["status"], rep["warnings"]) == (0, "ok", [])
    capture = rep["metrics"]["capture"]
    assert capture["available"] is True and capture.get("reason") is None
    assert (capture["out_of_window_events"], capture["out_of_window_ns"]) == (1, 0)


@pytest.mark.parametrize("dur", [b"1e400", b"[5]", b'{"us": 5}'])
def test_a_trace_whose_only_kernel_was_rejected_is_partial_with_no_finding_on_its_absence(tmp_path, dur) -> None:
    # GIVEN a step and a launch, and one kernel whose duration no event may have (beyond float64, or not a number)
    events = [dict(_AUDIT_STEP, dur=50), _AUDIT_LAUNCH, dict(_AUDIT_KERNEL, dur=0)]
    text = _doc(events)
    at = text.rindex(b'"dur":0') + len(b'"dur":')
    code, rep, err = cli_subprocess(put(tmp_path, text[:at] + dur + text[at + 1:]))
    # THEN the report is partial (exit 6), says every device event was rejected, and no finding rests on the
    # missing kernel ("no GPU activity": add ProfilerActivity.CUDA would be a confident wrong answer)
    assert "Traceback" not in err
    assert (code, rep["status"]) == (6, "partial")
    assert rep["error"] == ("all 1 device events were rejected (1 events of an unexpected shape were skipped); the report "
                            "covers the host events only")
    assert rep["read_state"]["complete"] is False and rep["read_state"]["rejected_events"] == 1
    assert [f["id"] for f in rep["findings"]] == []
    kinds = [p["kind"] for p in rep["metrics"]["capture"]["problems"]]
    assert "rejected" in kinds and "truncated" not in kinds  # read to its end: the file is not said to end early
