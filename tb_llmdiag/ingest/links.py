"""Symlinks in a logdir (#27): a trace is read only when its real path lies inside the logdir's real path,
unless the user opts in.

A link in a shared logdir would otherwise let whoever can write there read any file the server's user can
(``r/passwd.pt.trace.json -> /etc/passwd`` was served by ``/trace``). So:

- discovery records the logdir's real path on each file (``TraceFile.inside``), lists a trace-named link that
  leaves it with this module's one-line refusal as its error (nothing of the target is read), names other
  links that leave it (folders, other ``.json``) in the index warnings, and walks no linked folder;
- every open of a file with an ``inside`` checks where the opened descriptor really is (``/proc/self/fd``, else
  the path's real path), so a link swapped in after discovery is refused as well.

Opt in with ``LLMDIAG_FOLLOW_LINKS=1`` (the environment of ``llmdiag`` or of TensorBoard): links are followed
wherever they point and linked folders are walked (each real folder once).
"""

from __future__ import annotations

import os

from tb_llmdiag.errors import TraceFormatError

FOLLOW_ENV = "LLMDIAG_FOLLOW_LINKS"


class LinkOutside(TraceFormatError):
    """The file's real path leaves the logdir (a symlink) and following links out of it was not asked for."""


def follow_links() -> bool:
    """Whether the user opted in to following links out of the logdir (``LLMDIAG_FOLLOW_LINKS=1``)."""
    return os.environ.get(FOLLOW_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def within(real: str, root_real: str) -> bool:
    """Whether the real path ``real`` is ``root_real`` or lies under it."""
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def refusal(name: str) -> str:
    """The one line a refused link gets (the target is not named: it is none of the viewer's business)."""
    return f"{name} is a link to a file outside the logdir; not read (set {FOLLOW_ENV}=1 to follow links out of it)"


def outside(path: str, inside: str) -> str | None:
    """The refusal when ``path``'s real path leaves ``inside`` (a logdir's real path; "" allows anything)."""
    if not inside or within(os.path.realpath(path), inside):
        return None
    return refusal(os.path.basename(path))


def check_opened(fd: int, path: str, inside: str) -> None:
    """Raise LinkOutside when the open descriptor ``fd`` (opened from ``path``) is a file outside ``inside``.

    The descriptor's own path (Linux ``/proc/self/fd``) is what was opened, whatever the links said when
    discovery looked; elsewhere the path's real path is checked just after the open.
    """
    if not inside:
        return
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(path)
    if not within(real, inside):
        raise LinkOutside(refusal(os.path.basename(path)))
