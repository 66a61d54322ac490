"""``python -m tb_llmdiag.cli``: the ``llmdiag`` command."""

from __future__ import annotations

import sys

from tb_llmdiag.cli import main

if __name__ == "__main__":
    sys.exit(main())
