"""Mutation fuzzing of both readers and the whole analysis over real traces (no atheris needed).

    python tests/fuzz/fuzz_readers.py --minutes 30 --out /tmp/llmdiag-fuzz [--xplane-share 0.4] [--tab-share 0.5]

Seeds are a real capture (tests/data/gpu_compiled) cut to a few steps' worth of events and written in
four layouts (Kineto's indented one, one event per line, one line, the bare JSON Array format), plain and
gzipped. Each case mutates one seed (byte flips and deletions, cuts, duplicated spans, inserted tokens
no trace should hold: NaN, 1e400, int64-overflowing numbers, invalid UTF-8, deep nesting, huge step
numbers, negative durations) and runs load -> analyse -> JSON as the CLI does, or the tab's build
(``api.Analysed.tab_result``: the report, timelines, steps and the trace view's index).

XPlane seeds (#27) are the shared synthetic TPU capture, the JAX GPU capture of tests/data (each line cut to its
first 150 events) and test_xplane's tiny GPU XSpace; a case either sets random numeric fields (line timestamps,
event offsets and durations, stat values) to extremes (int64 limits, -1, 2^62, random) through the protobuf
classes, or mutates the bytes. Findings:

- crash: any exception other than a one-line LlmDiagError (site = innermost tb_llmdiag frame);
- hang: a case over 20 s;
- false ok: the text is not valid JSON (by msgspec, a second parser) but the report is complete "ok";
- false partial: the text is valid JSON but the report says the read stopped early;
- impossible value: a negative window, step or device time, a share outside [0, 1], an MFU above 1, a NaN in the
  JSON (``checks.impossible``; counted whatever the report's status, by the exit code it would give);
- numpy warning: an overflow/invalid-value RuntimeWarning raised while analysing (made an error);
- logged exception: an error the engine caught and logged with its traceback (a metrics topic that
  failed: the CLI would print that traceback on stderr).

Figures go to OUT/stats.json every 50 cases; each finding's input to OUT/<kind>-<n>.bin.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import random
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tb_llmdiag import api  # noqa: E402
from tb_llmdiag.errors import LlmDiagError  # noqa: E402
from tb_llmdiag.ingest import load_trace  # noqa: E402
from tb_llmdiag.ingest.discover import discover  # noqa: E402
from tb_llmdiag.ingest.xplane.schema import message_classes  # noqa: E402
from tb_llmdiag.metrics import analyze  # noqa: E402
from tb_llmdiag.render.canonical_json import dumps  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checks import EXIT_OF_STATUS, impossible  # noqa: E402

SEED_TRACE = next((Path(__file__).resolve().parents[1] / "data" / "gpu_compiled").glob("*.pt.trace.json.gz"))
TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400", b"99999999999999999999", b"-9223372036854775809",
          b"9223372036854775807", b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b'"ProfilerStep#99999999999999999999"',
          b'"ProfilerStep#1"', b"-1", b"-5.5", b"1e300", b"null", b"true", b"[]", b"{}", b'"\\u0000"', b'"\\"',
          b"[" * 300, b"]" * 5, b"}" * 5, b",", b'"', b"\\", b"\x00", b"0.000000000001", b'"9e18"', b'"ts"', b'"dur"',
          b'{"ph":"X","cat":"kernel","name":"k","ts":1e18,"dur":9e18,"pid":0,"tid":7}',
          b'{"ph":"X","cat":"user_annotation","name":"ProfilerStep#3","ts":5,"dur":-100,"pid":1,"tid":1}']


def seeds() -> list[tuple[str, bytes]]:
    doc = msgspec.json.decode(gzip.decompress(SEED_TRACE.read_bytes()))
    events = doc["traceEvents"]
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    out = []
    for n in (40, 400, 1500):
        evs = events[:n]
        kineto = (b'{\n  "schemaVersion": 1,\n  "deviceProperties": ' + msgspec.json.encode(head.get("deviceProperties", []))
                  + b',\n  "traceEvents": [\n  ' + b",\n  ".join(msgspec.json.encode(e) for e in evs) + b"\n  ]\n}")
        lines = b'{"traceEvents": [\n' + b",\n".join(msgspec.json.encode(e) for e in evs) + b"\n]}\n"
        one = msgspec.json.encode({**head, "traceEvents": evs})
        array = msgspec.json.encode(evs)
        out += [(f"kineto{n}", kineto), (f"lines{n}", lines), (f"one{n}", one), (f"array{n}", array)]
    return out


XPLANE_SEEDS = [
    *(Path(__file__).resolve().parents[3] / "shared" / "traces" / "xplane" / "synthetic_tpu").rglob("*.xplane.pb"),
    *(Path(__file__).resolve().parents[1] / "data" / "xplane_jax_gpu").rglob("*.xplane.pb"),
]
EXTREMES = (0, -1, 1, 2**63 - 1, -(2**63), 2**62, -(2**62), 2**53, 10**15, 10**18, 9 * 10**18)


def xplane_seeds() -> list[tuple[str, bytes]]:
    c = message_classes()
    out = []
    for path in XPLANE_SEEDS:
        space = c["XSpace"]()
        space.ParseFromString(path.read_bytes())
        for plane in space.planes:
            for line in plane.lines:
                del line.events[150:]
        out.append((f"xplane:{path.parents[3].name}", space.SerializeToString()))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_xplane import _gpu_space  # noqa: PLC0415

    out.append(("xplane:tiny_gpu", _gpu_space()))
    return out


def mutate_xspace(rng: random.Random, data: bytes) -> bytes:
    """Set random numeric fields of the XSpace to extremes (or, one case in four, mutate its bytes)."""
    if rng.random() < 0.25:
        b = bytearray(data)
        for _ in range(rng.choice((1, 2, 4))):
            i = rng.randrange(len(b))
            if rng.random() < 0.7:
                b[i] = rng.randrange(256)
            else:
                del b[i:i + rng.randrange(1, 16)]
        return bytes(b)
    c = message_classes()
    space = c["XSpace"]()
    space.ParseFromString(data)
    lines = [ln for p in space.planes for ln in p.lines]
    events = [e for ln in lines for e in ln.events]
    stats = [s for e in events for s in e.stats] + [s for p in space.planes for s in p.stats]
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        v = rng.choice(EXTREMES) if rng.random() < 0.8 else rng.randrange(-(2**63), 2**63)
        what = rng.randrange(5)
        if what == 0 and lines:
            rng.choice(lines).timestamp_ns = v
        elif what == 1 and events:
            rng.choice(events).offset_ps = v
        elif what == 2 and events:
            rng.choice(events).duration_ps = v
        elif what == 3 and stats:
            st = rng.choice(stats)
            field = st.WhichOneof("value")
            if field in ("int64_value", "uint64_value"):
                setattr(st, field, v if field == "int64_value" else abs(v) % (2**64))
            elif field == "double_value":
                st.double_value = rng.choice((float("nan"), float("inf"), -1e300, 1e300, float(v)))
        elif what == 4 and lines:  # a whole line shifted
            for e in rng.choice(lines).events:
                e.offset_ps = v
    return space.SerializeToString()


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        op = rng.randrange(8)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:  # flip a byte
            b[min(i, len(b) - 1)] = rng.randrange(256)
        elif op == 1:  # insert a token
            b[i:i] = rng.choice(TOKENS)
        elif op == 2:  # replace a number with a token
            j = b.find(b":", i)
            if j > 0:
                k = j + 1
                while k < len(b) and b[k:k + 1] in b"-+.0123456789eE":
                    k += 1
                b[j + 1:k] = rng.choice(TOKENS)
        elif op == 3:  # cut
            del b[i:]
        elif op == 4:  # delete a span
            del b[i:i + rng.randrange(1, 64)]
        elif op == 5:  # duplicate a span
            j = min(len(b), i + rng.randrange(1, 400))
            b[j:j] = b[i:j]
        elif op == 6:  # deep nesting
            b[i:i] = b"[" * rng.choice((10, 300, 100000))
        else:  # swap a digit run for a huge one
            j = b.find(b'"ts": ', i)
            if j > 0:
                b[j + 6:j + 6] = b"9" * rng.randrange(1, 25)
    return bytes(b)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (1 for a scalar inside nothing), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return deepest


def json_valid(data: bytes) -> bool | None:
    """Valid JSON by Python's own parser (strict UTF-8, no NaN/Infinity): True/False; None when it nests
    near or past the reader's bound (256 levels), which the reader refuses on purpose."""
    try:
        text = data.decode("utf-8")
        if text.lstrip().startswith("[") and not text.rstrip().endswith("]"):
            # the JSON Array format may leave out its closing ']' (and keep a trailing comma): the Trace
            # Event Format allows it, for tracers that append events and may stop at any time
            text = text.rstrip().removesuffix(",") + "]"
        doc = json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        return None
    except ValueError:
        return False
    return True if _depth(doc) < 250 else None


class _Logged(logging.Handler):
    """Collects the records logged with an exception (the engine's caught-and-logged failures)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang()


def run_case(path: Path, tab: bool) -> dict[str, Any]:
    """The CLI's RunReport of the file; with ``tab``, through the tab's build (timelines, steps, trace view)."""
    index = discover(str(path))
    tf = index.files[0]
    if tab:
        return api.analyze(tf, summary=True, strict=True).tab_result()["report"]
    trace = load_trace(tf.path)  # not api.analyze: a reader's exception is what the fuzzer looks for
    return api.run_report(tf, trace, analyze(trace)).json()


def site_of(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "tb_llmdiag" in f.filename]
    f = frames[-1] if frames else traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__} {os.path.relpath(f.filename)}:{f.lineno}"


def site_of_record(record: logging.LogRecord) -> str:
    exc = record.exc_info[1] if record.exc_info else None
    return site_of(exc) if exc is not None else record.getMessage()[:80]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--out", default="/tmp/llmdiag-fuzz")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--xplane-share", type=float, default=0.4, help="share of cases that mutate an XPlane seed")
    ap.add_argument("--tab-share", type=float, default=0.5, help="share of cases run through the tab's build")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    pool = seeds()
    xpool = xplane_seeds()
    signal.signal(signal.SIGALRM, _alarm)
    logged = _Logged()
    logging.getLogger("tb_llmdiag").addHandler(logged)
    logging.getLogger("tb_llmdiag").propagate = False
    warnings.simplefilter("error", RuntimeWarning)
    stats: dict[str, Any] = {"cases": 0, "kineto": 0, "xplane": 0, "tab_builds": 0, "errors_clean": 0, "partial": 0,
                             "ok": 0, "error_reports": 0, "findings": {}, "sites": {}}
    start = time.time()
    end = start + args.minutes * 60
    case = out / "case.pt.trace.json"
    xcase = out / "xp" / "plugins" / "profile" / "2026_01_01_00_00_00" / "h.xplane.pb"
    xcase.parent.mkdir(parents=True, exist_ok=True)
    while time.time() < end:
        xplane = rng.random() < args.xplane_share
        tab = rng.random() < args.tab_share
        for p in (case, case.with_suffix(".gz")):
            p.unlink(missing_ok=True)
        if xplane:
            name, data = rng.choice(xpool)
            data = mutate_xspace(rng, data)
            path = xcase
            path.write_bytes(data)
        else:
            name, data = rng.choice(pool)
            data = mutate(rng, data)
            gz = rng.random() < 0.25
            path = case.with_suffix(".gz") if gz else case
            path.write_bytes(gzip.compress(data, 1) if gz else data)
        stats["cases"] += 1
        stats["xplane" if xplane else "kineto"] += 1
        stats["tab_builds"] += tab
        kind = site = None
        signal.alarm(20)
        try:
            report = run_case(path, tab)
            text = dumps(report)
            if report["status"] == "ok":
                stats["ok"] += 1
                if not xplane and json_valid(data) is False:
                    kind, site = "false_ok", f"{name}: complete ok on invalid JSON"
            elif report["status"] == "partial":
                stats["partial"] += 1
                if not xplane and json_valid(data) is True and "rejected" not in (report["error"] or ""):
                    kind, site = "false_partial", f"{name}: partial on valid JSON: {report['error']}"
            else:
                stats["error_reports"] += 1
            if kind is None:
                bad = impossible(report, text)
                if bad:
                    kind, site = f"impossible_exit{EXIT_OF_STATUS.get(report['status'], 4)}", f"{name}: {bad}"
        except LlmDiagError as exc:
            stats["errors_clean"] += 1
            if "\n" in str(exc):
                kind, site = "multiline_error", str(exc)[:80]
        except Hang:
            kind, site = "hang", name
        except RuntimeWarning as exc:
            kind, site = "numpy_warning", site_of(exc)
        except RecursionError as exc:
            kind, site = "crash", site_of(exc)
        except Exception as exc:  # noqa: BLE001
            kind, site = "crash", site_of(exc)
        finally:
            signal.alarm(0)
        if kind is None and logged.records:
            kind, site = "logged_exception", site_of_record(logged.records[0])
        logged.records.clear()
        if kind:
            key = f"{kind}: {site}"
            stats["findings"][kind] = stats["findings"].get(kind, 0) + 1
            if key not in stats["sites"]:
                (out / f"{kind}-{len(stats['sites'])}.bin").write_bytes(data)
                stats["sites"][key] = 0
            stats["sites"][key] += 1
        if stats["cases"] % 50 == 0:
            stats["minutes"] = round((time.time() - start) / 60, 2)
            (out / "stats.json").write_text(json.dumps(stats, indent=1))
    stats["minutes"] = round((time.time() - start) / 60, 2)
    (out / "stats.json").write_text(json.dumps(stats, indent=1))
    print(json.dumps(stats, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
