"""Keyword search over `zendesk_articles` (substring matching, no ranking)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

_PHRASE = re.compile(r'(-?)"([^"]*)"')
_NEGATIVE_TERM = re.compile(r"-([A-Za-z0-9_]+)")
MAX_RESULTS = 1000


@dataclass
class Query:
    phrases: list[str] = field(default_factory=list)
    negatives: list[str] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)


def parse_query(text: str) -> Query:
    q = Query()
    for m in _PHRASE.finditer(text):
        content = m.group(2).strip().lower()
        (q.negatives if m.group(1) else q.phrases).append(content)
    rest = _PHRASE.sub("", text)
    # A dash before a word excludes it -- even inside hyphenated words.
    q.negatives.extend(m.group(1).lower() for m in _NEGATIVE_TERM.finditer(rest))
    rest = _NEGATIVE_TERM.sub("", rest)
    for piece in rest.split():
        term = piece.lower().replace("'", "")
        if term:
            q.terms.append(term)
    return q


def _text_matches(q: Query, text: str) -> bool:
    if any(neg in text for neg in q.negatives):
        return False
    if not all(p in text for p in q.phrases):
        return False
    if not q.terms:
        return True
    hits = sum(1 for t in q.terms if t in text)
    if len(q.terms) <= 2:
        return hits == len(q.terms)
    return hits >= math.ceil(0.4 * len(q.terms))


def search_articles(
    articles: list[dict[str, Any]],
    query: str,
    locale: str | None = None,
    brand_id: int | None = None,
    category: int | None = None,
    section: int | None = None,
    label_names: str | None = None,
    multibrand: bool | None = None,
) -> list[dict[str, Any]]:
    q = parse_query(query)
    found = [a for a in articles if _text_matches(q, f"{a['title']} {a['body']}".lower())]
    if locale:
        found = [a for a in found if a["locale"] == locale]
    if brand_id and multibrand is not True:
        found = [a for a in found if a["brand_id"] == brand_id]
    if category:
        found = [a for a in found if a["category_id"] == category]
    if section:
        found = [a for a in found if a["section_id"] == section]
    if label_names:
        wanted = [label.strip() for label in label_names.split(",")]
        found = [a for a in found if any(label in a["label_names"] for label in wanted)]
    return found[:MAX_RESULTS]
