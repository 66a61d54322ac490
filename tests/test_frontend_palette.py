"""The tab's palette (frontend/palette.js) names exactly the engine's categories and idle causes, so a new
category or cause cannot silently fall back to the "other" colour (frontend/palette.test.mjs checks the
colours themselves: distinct, idle never a category's colour, visible on both themes)."""

from __future__ import annotations

import re
from pathlib import Path

from tb_llmdiag.classify import CATEGORIES
from tb_llmdiag.metrics.steps.idle import CAUSES
from tb_llmdiag.timeline import CATEGORIES as TIMELINE_CATEGORIES

PALETTE = Path(__file__).resolve().parents[1] / "frontend" / "palette.js"


def _keys(name: str) -> set[str]:
    src = PALETTE.read_text(encoding="utf-8")
    m = re.search(rf"export const {name} = Object\.freeze\(\{{(.*?)\}}\);", src, re.S)
    assert m, name
    return set(re.findall(r"(\w+):\s*'#[0-9a-fA-F]{6}'", m.group(1)))


def test_palette_names_every_kernel_category_lane_and_idle_cause() -> None:
    assert _keys("CATEGORY_COLORS") == set(CATEGORIES)
    assert _keys("IDLE_COLORS") == set(CAUSES)
    # timeline lanes: "kernel" takes its classify category; the rest are categories or lanes of their own
    assert set(TIMELINE_CATEGORIES) - {"kernel"} <= _keys("CATEGORY_COLORS") | _keys("LANE_COLORS")
    assert "busy" in _keys("LANE_COLORS")


def test_palette_names_every_model_part() -> None:
    # GIVEN the anatomy topic's parts (and `other`); THEN PART_COLORS names exactly them
    from tb_llmdiag.metrics.anatomy.parts import PARTS

    src = PALETTE.read_text(encoding="utf-8")
    m = re.search(r"export const PART_COLORS = Object\.freeze\(\{(.*?)\}\);", src, re.S)
    assert m
    assert set(re.findall(r"(\w+):\s*CATEGORY_COLORS\.\w+", m.group(1))) == {*PARTS, "other"}
