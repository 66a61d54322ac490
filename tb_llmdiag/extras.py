"""Optional extras: the one place that imports a module an extra installs, with a one-line message when absent.

``pip install '.[dask]'`` (in a clone) brings ``dask[distributed]`` and ``fsspec``; ``[remote]`` brings ``fsspec``
alone (object stores need their backend too: ``s3fs``, ``gcsfs``, ``adlfs``). The plain paths (a local
logdir, no ``--dask``) never call ``require``, so they never import Dask or fsspec (a test checks
``sys.modules``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tb_llmdiag.errors import LlmDiagError


class MissingExtra(LlmDiagError):
    """An optional dependency the command needs is not installed (exit code 2, like a bad command line)."""

    exit_code = 2


def require(module: str, *, extra: str, needs: tuple[str, ...], what: str) -> ModuleType:
    """``importlib.import_module(module)``; if one of the third-party packages ``needs`` is missing,
    MissingExtra saying which package and the pip command. Any other ImportError is a bug and propagates.

    Raises:
        MissingExtra: a package of ``needs`` is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        root = (exc.name or "").split(".")[0]
        if root not in needs:
            raise
        raise MissingExtra(
            f"{what} needs the Python package {root!r}, which is not installed: pip install '.[{extra}]' in a clone of "
            f"the repository (the package's [{extra}] extra)"
        ) from None


__all__ = ["MissingExtra", "require"]
