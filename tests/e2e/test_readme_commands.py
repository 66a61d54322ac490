"""#36: README's two commands, in sequence, in one fresh clone, as a new user runs them: the first command's
TensorBoard keeps serving the tab while the second command (the tests) runs in the same shell environment.

The second command used to reinstall the package into the first command's environment (`pip install -e`), under
the running TensorBoard: the tab's files were gone (index.js 404, "Failed to fetch dynamically imported module").
scripts/test.sh now installs into its own environment (.venv-test/). Slow (two environments installed from the
package index, the lint and a few tests): e2e, and each step has a time limit.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tbserver import REPO, free_port

pytestmark = pytest.mark.e2e

#: the tests the second command runs here: a few fast ones (the full suite is what CI runs)
SECOND_ARGS = "tests/test_units.py -q"


def readme_commands() -> tuple[str, str]:
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    return blocks[0].strip(), blocks[1].strip()


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""


def wait_for(url: str, proc: subprocess.Popen[bytes], seconds: float, log: Path) -> bytes:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the first command exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        status, body = get(url)
        if status == 200:
            return body
        time.sleep(2)
    pytest.fail(f"{url} did not answer within {seconds:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to clone the repository")
def test_the_second_command_leaves_the_first_ones_tab_serving(tmp_path: Path) -> None:
    first, second = readme_commands()
    assert second == "bash scripts/test.sh" and "--port 6006" in first
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHON")}
    env["LLMDIAG_CACHE_DIR"] = str(tmp_path / "cache")
    # the first command, as written, on a free port; its own process group, ended at the end
    log = tmp_path / "first.log"
    with log.open("wb") as out:
        tb = subprocess.Popen(["bash", "-c", first.replace("--port 6006", f"--port {port}")], cwd=clone, env=env,
                              stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://localhost:{port}/data/plugin/llm_diag"
        index_js = wait_for(f"{base}/index.js", tb, 600, log)
        # the second command in the first one's shell: its environment active
        venv = clone / ".venv"
        shell = {**env, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}"}
        done = subprocess.run(["bash", "-c", f"{second} {SECOND_ARGS}"], cwd=clone, env=shell, capture_output=True,
                              text=True, timeout=900)
        said = "\n".join(ln for ln in (done.stdout + done.stderr).splitlines() if "WARNING: Location" not in ln)
        assert done.returncode == 0, said[-4000:]
        assert (clone / ".venv-test" / "bin" / "python").exists()  # it made its own environment
        # the tab still answers: the same module, and the registry the page reads its labels from
        assert get(f"{base}/index.js") == (200, index_js)
        status, body = get(f"{base}/metric_registry")
        assert status == 200 and b'"value_labels"' in body
        assert tb.poll() is None
    finally:
        if tb.poll() is None:
            os.killpg(tb.pid, signal.SIGTERM)
            try:
                tb.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(tb.pid, signal.SIGKILL)
