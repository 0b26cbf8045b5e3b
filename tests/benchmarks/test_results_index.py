"""docs/index.md lists every results page, and every page it links exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INDEX = ROOT / "docs" / "index.md"


def test_every_results_page_is_in_the_index_and_every_link_resolves():
    text = INDEX.read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(results/([^)#]+\.md)\)", text))
    pages = {p.name for p in (ROOT / "docs" / "results").glob("*.md")}
    assert pages - linked == set(), f"results pages missing from docs/index.md: {sorted(pages - linked)}"
    assert linked - pages == set(), f"docs/index.md links pages that do not exist: {sorted(linked - pages)}"
