"""The trace view: level-of-detail lanes over the columnar model (``build``), stored as arrays and
queried per zoom (``index``), with the time ranges of each finding's evidence (``evidence``)."""

from __future__ import annotations
