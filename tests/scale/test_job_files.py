"""bench/job_files.py (#33): its text templates write exactly what the json.dump of ``perturbed`` (the reference:
a copy of the event dicts) writes, and ``--plant R`` makes rank R a copy of the capture's straggler."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from job_files import DEFAULT_BASES, Template, load, perturbed, write_job  # noqa: E402


def test_the_template_text_is_the_perturbed_document() -> None:
    doc = load(DEFAULT_BASES[1])
    for keep_us in (None, 20e3):
        got = json.loads(Template(doc, keep_us).text(rank=5, world=64, skew_us=123.4567, scale=1.013))
        assert got == perturbed(doc, rank=5, world=64, skew_us=123.4567, scale=1.013, keep_us=keep_us)


def test_plant_copies_the_straggler_capture(tmp_path: Path) -> None:
    paths = write_job(tmp_path / "job", 5, keep_ms=5, plant=3)
    docs = [json.load(gzip.open(p)) for p in paths]
    assert [d["distributedInfo"]["rank"] for d in docs] == [0, 1, 2, 3, 4]
    assert {d["distributedInfo"]["world_size"] for d in docs} == {5}
    # rank 3 is the capture's rank 1 (the straggler), every other rank its rank 0: the base's pid tells them apart
    pids = [next(e["pid"] for e in d["traceEvents"] if e.get("ph") == "X") for d in docs]
    base_pids = [next(e["pid"] for e in load(p)["traceEvents"] if e.get("ph") == "X") for p in DEFAULT_BASES]
    assert pids == [base_pids[0], base_pids[0], base_pids[0], base_pids[1], base_pids[0]]
