"""The OData `$filter` subset of zendesk_get_items (parser and evaluator), and
the article keyword search: pure functions, no database."""

from __future__ import annotations

from typing import Any

import pytest

from servers.toolsets.zendesk import odata
from servers.toolsets.zendesk.search import parse_query, search_articles

# The auto-insurance initial tickets, reduced to the fields the filters use.
TICKETS: list[dict[str, Any]] = [
    {
        "id": "1",
        "status": "open",
        "requester_id": "1",
        "due_at": None,
        "created_at": "2025-09-30T10:00:00Z",
        "tags": [],
    },
    {
        "id": "2",
        "status": "hold",
        "requester_id": "2",
        "due_at": None,
        "created_at": "2025-09-28T14:30:00Z",
        "tags": [],
    },
    {
        "id": "3",
        "status": "solved",
        "requester_id": "4",
        "due_at": None,
        "created_at": "2025-09-25T08:00:00Z",
        "tags": [],
    },
    {
        "id": "4",
        "status": "solved",
        "requester_id": "1",
        "due_at": None,
        "created_at": "2025-09-27T09:00:00Z",
        "tags": [],
    },
    {
        "id": "5",
        "status": "pending",
        "requester_id": "3",
        "due_at": None,
        "created_at": "2025-09-29T11:30:00Z",
        "tags": [],
    },
]
ALL = ["1", "2", "3", "4", "5"]


def ids(text: str, full: bool = True) -> list[str]:
    return [r["id"] for r in odata.filter_rows(text, TICKETS, full)]


def error(text: str, full: bool = True) -> str:
    with pytest.raises(odata.ODataError) as exc:
        odata.filter_rows(text, TICKETS, full)
    return str(exc.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("requester_id eq '1'", ["1", "4"]),
        ("status ne 'open'", ["2", "3", "4", "5"]),
        ("status in ('open','pending')", ALL),  # `in` is not understood: everything matches
        ("not (status eq 'open')", ALL),  # `not` at the top: no filtering
        ("requester_id eq 1", []),  # no coercion between text and numbers
        ("due_at eq null", []),  # a null literal equals nothing
        ("due_at ne null", ALL),
        ("STATUS EQ 'open'", []),  # keywords are case-insensitive, field names are not
        ("'email eq \"x\"'", ALL),  # a bare literal does not filter
        ("email", ALL),  # a bare identifier does not filter
        ("8", ALL),
        ("contains(status,'op')", ALL),  # function calls do not filter
        ("tags/any(t: t eq 'x')", ALL),  # lambdas do not filter
        ("requester_id eq  '1'", ["1", "4"]),  # operators absorb surrounding whitespace
        ("requester.requester_id eq '1'", ["1", "4"]),  # the dotted prefix is ignored
        ("requester_id eq '1' and (status eq 'open' or status eq 'pending')", ["1"]),
        ("status eq 'hold' or requester_id eq '3'", ["2", "5"]),
        ("status gt 'pending'", ["3", "4"]),
        ("status lt 'open'", ["2"]),
        ("status ge 'pending'", ["3", "4", "5"]),
        ("status le 'hold'", ["2"]),
        ("created_at gt '2025-09-29'", ["1", "5"]),
        ("not status eq 'open'", []),  # `not` binds tighter: (not status) eq 'open' is never true
        ("active eq true", []),  # booleans are the texts 'true'/'false'; unknown fields are null
    ],
)
def test_filter_semantics(text: str, expected: list[str]) -> None:
    assert ids(text) == expected


def test_generic_variant_ignores_ne_ge_le() -> None:
    """QUIRK Z-5: the generic copy only knows eq/gt/lt; other comparisons match every row."""
    assert ids("status ne 'open'", full=False) == ALL
    assert ids("status ge 'pending'", full=False) == ALL
    assert ids("status le 'hold'", full=False) == ALL
    assert ids("status eq 'open'", full=False) == ["1"]
    assert ids("status gt 'pending'", full=False) == ["3", "4"]
    assert ids("requester_id eq '1' and status ne 'solved'", full=False) == ["1", "4"]


def test_and_or_short_circuit_skips_errors() -> None:
    # The ordering error on the right is never evaluated for rows the left side settles.
    assert ids("requester_id eq '9' and due_at gt 'x'") == []
    assert ids("requester_id ne '9' or due_at gt 'x'") == ALL


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("due_at gt '2025-01-01'", "'>' not supported between instances of 'NoneType' and 'str'"),
        ("created_at gt 2025-09-30", "'>' not supported between instances of 'str' and 'Date'"),
        ("requester_id lt 5", "'<' not supported between instances of 'str' and 'int'"),
        ("requester_id ge null", "'>=' not supported between instances of 'str' and 'Null'"),
        ("status le 2025-01-01T10:00:00Z", "'<=' not supported between instances of 'str' and 'DateTime'"),
        (
            'status eq "open"',
            "Failed to tokenize at: Token(type='ERROR', value='\"open\"', lineno=1, index=10)",
        ),
        ("status eq 'open' x", "Failed to parse at: Token(type='WS', value=' ', lineno=1, index=16)"),
        ("status eq", "Failed to parse at: Token(type='WS', value=' ', lineno=1, index=6)"),
        ("status eq 'open' and", "Failed to parse at: Token(type='WS', value=' ', lineno=1, index=16)"),
        ("(status eq 'open'", "Failed to parse at: None"),
        ("status eq 'open',", "Failed to parse at: Token(type=',', value=',', lineno=1, index=16)"),
        ("status in ('open')", "Failed to parse at: Token(type=')', value=')', lineno=1, index=17)"),
        ("( eq 'x')", "Failed to parse at: Token(type='EQ', value=Eq(), lineno=1, index=1)"),
        ("eq 'x'", "Failed to parse at: Token(type='WS', value=' ', lineno=1, index=2)"),
        ("foo(status) eq 1", "Unknown function: 'foo'"),
        ("contains(status)", "Function 'contains' takes 2 arguments. 1 given."),
        ("substring(status) eq 'x'", "Function 'substring' takes between 2 and 3 arguments. 1 given."),
    ],
)
def test_filter_errors(text: str, message: str) -> None:
    assert error(text) == message


def test_generic_skips_ordering_errors_of_unknown_operators() -> None:
    # `ge` is not evaluated at all by the generic copy, so it cannot fail.
    assert ids("due_at ge 'x'", full=False) == ALL


def test_lexer_token_kinds() -> None:
    kinds = [t.type for t in odata.tokenize("a eq 1.5 and b ne -2 or c gt 2025-01-02T03:04Z")]
    assert kinds == [
        "ODATA_IDENTIFIER",
        "EQ",
        "DECIMAL",
        "AND",
        "ODATA_IDENTIFIER",
        "NE",
        "INTEGER",
        "OR",
        "ODATA_IDENTIFIER",
        "GT",
        "DATETIME",
    ]
    # Alternatives are tried in a fixed order, not longest-first: `nullable` starts with `null`.
    assert [t.type for t in odata.tokenize("nullable")] == ["NULL", "ODATA_IDENTIFIER"]
    tok = odata.tokenize("x eq 'it''s'")[2]
    assert tok.value == odata.String("it's")


def test_parse_tree_shapes() -> None:
    tree = odata.parse("a eq 'x' and (b gt 2 or c lt 3.5)")
    assert isinstance(tree, odata.BoolOp) and isinstance(tree.op, odata.And)
    assert tree.left == odata.Compare(odata.Eq(), odata.Identifier("a"), odata.String("x"))
    right = tree.right
    assert isinstance(right, odata.BoolOp) and isinstance(right.op, odata.Or)
    assert odata.parse("s in ('a', 'b')") == odata.Compare(
        odata.In(), odata.Identifier("s"), odata.List([odata.String("a"), odata.String("b")])
    )
    assert odata.parse("tags/any(t: t eq 'x')") == odata.CollectionLambda(
        odata.Identifier("tags"),
        odata.Any_(),
        odata.Lambda(
            odata.Identifier("t"), odata.Compare(odata.Eq(), odata.Identifier("t"), odata.String("x"))
        ),
    )
    assert odata.parse("a/b/c eq 1").left == odata.Attribute(odata.Attribute(odata.Identifier("a"), "b"), "c")  # type: ignore[attr-defined]


# ---- article search ----------------------------------------------------------
ARTICLES: list[dict[str, Any]] = [
    {
        "id": 1,
        "title": "Travel policy",
        "body": "<p>Book 14 days ahead. Check-in rules.</p>",
        "locale": "en-us",
        "brand_id": 7,
        "category_id": 10,
        "section_id": 100,
        "label_names": ["travel", "policy"],
    },
    {
        "id": 2,
        "title": "Laptop request",
        "body": "<p>Ask for a new laptop through the portal.</p>",
        "locale": "en-us",
        "brand_id": 8,
        "category_id": 11,
        "section_id": 101,
        "label_names": ["hardware"],
    },
    {
        "id": 3,
        "title": "Politique de voyage",
        "body": "<p>Réservez tôt.</p>",
        "locale": "fr",
        "brand_id": 7,
        "category_id": 10,
        "section_id": 100,
        "label_names": [],
    },
]


def found(query: str, **kw: Any) -> list[int]:
    return [a["id"] for a in search_articles(ARTICLES, query, **kw)]


def test_search_query_parsing() -> None:
    q = parse_query('"Exact Phrase" -"bad one" travel -skip don\'t  14-day')
    assert q.phrases == ["exact phrase"]
    assert q.negatives == ["bad one", "skip", "day"]
    assert q.terms == ["travel", "dont", "14"]


def test_search_matching_rules() -> None:
    assert found("travel") == [1]
    assert found("TRAVEL policy") == [1]  # 1-2 terms: all must occur
    assert found("laptop policy") == []
    assert found("laptop portal new zebra yak") == [2]  # >=3 terms: ceil(40%) = 2 suffice
    assert found("laptop zebra yak") == []
    assert found('"new laptop"') == [2]
    assert found("-laptop") == [1, 3]
    assert found("") == [1, 2, 3]
    assert found("<p>") == [1, 2, 3]  # the raw HTML body is searched


def test_search_hyphen_quirk() -> None:
    """QUIRK Z-3: `14-day` makes `day` a negative term (excluding article 1, which says 'days')."""
    assert found("travel 14-day") == []
    assert found("travel 14") == [1]
    assert found("travel check-in") == []  # `in` becomes a negative term; article 1 contains it
    assert found("travel check") == [1]
    assert found("laptop-in") == [2]  # article 2 has no `in` anywhere


def test_search_filters() -> None:
    assert found("", locale="fr") == [3]
    assert found("", brand_id=7) == [1, 3]
    assert found("", brand_id=7, multibrand=True) == [1, 2, 3]
    assert found("", brand_id=0) == [1, 2, 3]
    assert found("", category=11) == [2]
    assert found("", section=100) == [1, 3]
    assert found("", label_names="hardware, policy") == [1, 2]
    assert found("", label_names="Hardware") == []
