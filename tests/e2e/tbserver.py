"""A real ``tensorboard`` process and Debian Chromium through Playwright, for e2e tests and bench/.

Chromium is the apt package at /usr/bin/chromium (``playwright install`` is never used: it downloads a
browser build from outside the package registries).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
IFRAME = 'iframe[src*="plugin_entry.html?name=llm_diag"]'
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str, timeout: float = 5.0) -> object:
    import json

    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


@contextmanager
def tensorboard(logdir: Path, cache_dir: Path, log_path: Path | None = None) -> Iterator[str]:
    """Starts ``tensorboard --logdir`` on a free localhost port; yields its base URL."""
    port = free_port()
    env = {**os.environ, "LLMDIAG_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(REPO)}
    log = open(log_path or os.devnull, "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port),
         "--host", "127.0.0.1", "--load_fast", "false"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(REPO))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"tensorboard exited with {proc.returncode}; see {log_path}")
            try:
                listing = get_json(f"{base}/data/plugins_listing")
                assert isinstance(listing, dict)
                if "llm_diag" not in listing:
                    raise RuntimeError("tensorboard runs without the llm_diag plugin: pip install -e . first")
                break
            except (OSError, ValueError):
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def wait_all_analysed(base: str, timeout: float = 300) -> list[dict]:
    """Polls /runs until no run is pending or analysing; returns the runs."""
    deadline = time.time() + timeout
    while True:
        body = get_json(f"{base}/data/plugin/llm_diag/runs")
        assert isinstance(body, dict)
        runs = body["runs"]
        if runs and all(r["status"] in ("ready", "error") for r in runs):
            return runs
        if time.time() > deadline:
            raise TimeoutError(f"runs still analysing after {timeout}s: {runs}")
        time.sleep(0.5)
