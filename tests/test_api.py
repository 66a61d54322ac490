"""api.preload() imports every module the engine would otherwise import on first use."""

from __future__ import annotations

import subprocess
import sys

from tracepaths import REPO, TEST_DATA


def test_preload_leaves_nothing_of_ours_to_import_on_first_analysis() -> None:
    # a fresh interpreter: the test process has imported everything already
    trace = next((TEST_DATA / "gpu_seed").glob("*.pt.trace.json.gz"))
    code = (
        "import sys\n"
        "from tb_llmdiag import api\n"
        "from tb_llmdiag.ingest.discover import discover\n"
        "api.preload()\n"
        "before = set(sys.modules)\n"
        f"assert api.analyze(discover({str(trace)!r}).files[0]).report['status'] == 'ok'\n"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith(('tb_llmdiag', 'msgspec', 'numpy'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
