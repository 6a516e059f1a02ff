"""The OData `$filter` subset of `zendesk_get_items`.

Parsing follows the grammar of the public `odata-query` package (which the
benchmark's servers use): a regex lexer whose alternatives are tried in a
fixed order (case-insensitive; operator keywords carry their surrounding
whitespace), and an operator-precedence grammar. Errors are reported the way
that package reports them (`Failed to tokenize at: Token(...)`, `Failed to
parse at: Token(...)` / `None`, `Unknown function: 'f'`, ...).

Evaluation is deliberately narrow: only comparisons (`eq`, `gt`, `lt`, plus
`ne`, `ge`, `le` where the variant knows them) joined by `and` / `or` filter
rows; any other node matches every row. Operands are row fields (by their
last dotted name part), strings, integers, decimals and booleans (as the texts
`true` / `false`); anything else is an opaque node that equals no field value
and cannot be ordered (ordering errors carry Python's own message).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import re
from collections.abc import Callable
from typing import Any


class ODataError(Exception):
    """A filter that cannot be parsed or evaluated; the text is shown as is."""


# ---- AST (class and field names matter: they show in error texts) ------------
@dataclasses.dataclass(frozen=True)
class Node:
    pass


@dataclasses.dataclass(frozen=True)
class Identifier(Node):
    name: str
    namespace: tuple[str, ...] = ()

    def full_name(self) -> str:
        return ".".join((*self.namespace, self.name))


@dataclasses.dataclass(frozen=True)
class Attribute(Node):
    owner: Node
    attr: str


@dataclasses.dataclass(frozen=True)
class Null(Node):
    pass


@dataclasses.dataclass(frozen=True)
class Integer(Node):
    val: str


@dataclasses.dataclass(frozen=True)
class Float(Node):
    val: str


@dataclasses.dataclass(frozen=True)
class Boolean(Node):
    val: str


@dataclasses.dataclass(frozen=True)
class String(Node):
    val: str


@dataclasses.dataclass(frozen=True)
class Geography(Node):
    val: str


@dataclasses.dataclass(frozen=True)
class Date(Node):
    val: str


@dataclasses.dataclass(frozen=True)
class Time(Node):
    val: str


@dataclasses.dataclass(frozen=True)
class DateTime(Node):
    val: str


@dataclasses.dataclass(frozen=True)
class Duration(Node):
    val: str


@dataclasses.dataclass(frozen=True)
class GUID(Node):
    val: str


@dataclasses.dataclass(frozen=True)
class List(Node):
    val: list[Node]


@dataclasses.dataclass(frozen=True)
class Add(Node):
    pass


@dataclasses.dataclass(frozen=True)
class Sub(Node):
    pass


@dataclasses.dataclass(frozen=True)
class Mult(Node):
    pass


@dataclasses.dataclass(frozen=True)
class Div(Node):
    pass


@dataclasses.dataclass(frozen=True)
class Mod(Node):
    pass


@dataclasses.dataclass(frozen=True)
class BinOp(Node):
    op: Node
    left: Node
    right: Node


@dataclasses.dataclass(frozen=True)
class Eq(Node):
    pass


@dataclasses.dataclass(frozen=True)
class NotEq(Node):
    pass


@dataclasses.dataclass(frozen=True)
class Lt(Node):
    pass


@dataclasses.dataclass(frozen=True)
class LtE(Node):
    pass


@dataclasses.dataclass(frozen=True)
class Gt(Node):
    pass


@dataclasses.dataclass(frozen=True)
class GtE(Node):
    pass


@dataclasses.dataclass(frozen=True)
class In(Node):
    pass


@dataclasses.dataclass(frozen=True)
class Compare(Node):
    comparator: Node
    left: Node
    right: Node


@dataclasses.dataclass(frozen=True)
class And(Node):
    pass


@dataclasses.dataclass(frozen=True)
class Or(Node):
    pass


@dataclasses.dataclass(frozen=True)
class BoolOp(Node):
    op: Node
    left: Node
    right: Node


@dataclasses.dataclass(frozen=True)
class Not(Node):
    pass


@dataclasses.dataclass(frozen=True)
class USub(Node):
    pass


@dataclasses.dataclass(frozen=True)
class UnaryOp(Node):
    op: Node
    operand: Node


@dataclasses.dataclass(frozen=True)
class NamedParam(Node):
    name: Identifier
    param: Node


@dataclasses.dataclass(frozen=True)
class Call(Node):
    func: Identifier
    args: list[Node]


@dataclasses.dataclass(frozen=True)
class Any_(Node):
    pass


@dataclasses.dataclass(frozen=True)
class All(Node):
    pass


@dataclasses.dataclass(frozen=True)
class Lambda(Node):
    identifier: Identifier
    expression: Node


@dataclasses.dataclass(frozen=True)
class CollectionLambda(Node):
    owner: Node
    operator: Node
    lambda_: Lambda | None


Any_.__name__ = Any_.__qualname__ = "Any"  # shown as `Any()` in token reprs


# ---- lexer -------------------------------------------------------------------
_WS = r"\s+"
_DATE = r"[1-9]\d{3}-(?:0\d|1[0-2])-(?:[0-2]\d|3[01])"
_TIME_HM = r"(?:[01]\d|2[0-3]):[0-5]\d"
_TIME_S = r"(:?:[0-5]\d(?:\.\d{1,12})?)"
_INT = r"[+-]?\d+"


def _kw(word: str) -> str:
    return rf"{_WS}{word}{_WS}"


# (token type, pattern, value builder) in matching priority order.
_RULES: list[tuple[str, str, Callable[[str], Any]]] = [
    (
        "DURATION",
        r"duration'[+-]?P(?:\d+Y)?(?:\d+M)?(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?'",
        lambda s: Duration(s.upper()[len("DURATION") + 1 : -1]),
    ),
    (
        "GUID",
        r"'?[\da-f]{8}-[\da-f]{4}-[\da-f]{4}-[\da-f]{4}-[\da-f]{12}'?",
        lambda s: GUID(s.strip("'")),
    ),
    ("STRING", r"'(?:[^']|'')*'", lambda s: String(s[1:-1].replace("''", "'"))),
    ("GEOGRAPHY", r"geography'(?:[^']|'')*'", lambda s: Geography(s[10:-1])),
    (
        "DATETIME",
        _DATE + "T" + _TIME_HM + _TIME_S + r"?(Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)?",
        DateTime,
    ),
    ("DATE", _DATE, Date),
    ("TIME", _TIME_HM + _TIME_S, Time),
    ("DECIMAL", _INT + r"((?:(?:\.\d+)(?:e[-+]?\d+))|(?:\.\d+)|(?:e[-+]?\d+))", Float),
    ("INTEGER", _INT, Integer),
    ("BOOLEAN", r"true|false", Boolean),
    ("NULL", r"null", lambda s: Null()),
    ("ADD", _kw("add"), lambda s: Add()),
    ("SUB", _kw("sub"), lambda s: Sub()),
    ("MUL", _kw("mul"), lambda s: Mult()),
    ("DIV", _kw("div"), lambda s: Div()),
    ("MOD", _kw("mod"), lambda s: Mod()),
    ("UMINUS", r"-", lambda s: USub()),
    ("AND", _kw("and"), lambda s: And()),
    ("OR", _kw("or"), lambda s: Or()),
    ("NOT", rf"not{_WS}", lambda s: Not()),
    ("EQ", _kw("eq"), lambda s: Eq()),
    ("NE", _kw("ne"), lambda s: NotEq()),
    ("LT", _kw("lt"), lambda s: Lt()),
    ("LE", _kw("le"), lambda s: LtE()),
    ("GT", _kw("gt"), lambda s: Gt()),
    ("GE", _kw("ge"), lambda s: GtE()),
    ("IN", _kw("in"), lambda s: In()),
    ("ANY", r"any", lambda s: Any_()),
    ("ALL", r"all", lambda s: All()),
    ("ODATA_IDENTIFIER", r"[_a-z](?:\.?\w){0,127}", lambda s: _identifier(s)),
    ("WS", _WS, str),
]


@functools.cache
def _master() -> re.Pattern[str]:
    # Compiled on first $filter, not at import: the server container's start is on
    # every attempt's critical path, most attempts never filter.
    return re.compile("|".join(f"(?P<{name}>{pat})" for name, pat, _ in _RULES), re.IGNORECASE)


_BUILDERS = {name: build for name, _, build in _RULES}
_LITERALS = set("(),/:=")


def _identifier(text: str) -> Identifier:
    *namespace, name = text.split(".")
    return Identifier(name, tuple(namespace))


@dataclasses.dataclass
class Token:
    type: str
    value: Any
    index: int

    def __repr__(self) -> str:
        return f"Token(type={self.type!r}, value={self.value!r}, lineno=1, index={self.index})"


def tokenize(text: str) -> list[Token]:
    """All tokens; a character nothing matches ends the list with an ERROR
    token (raised only when the parser reaches it, like a lazy lexer)."""
    tokens: list[Token] = []
    i = 0
    while i < len(text):
        m = _master().match(text, i)
        if m and m.end() > i:
            kind = m.lastgroup or ""
            # `lastgroup` is the outermost named group that matched.
            tokens.append(Token(kind, _BUILDERS[kind](m.group(kind)), i))
            i = m.end()
        elif text[i] in _LITERALS:
            tokens.append(Token(text[i], text[i], i))
            i += 1
        else:
            tokens.append(Token("ERROR", text[i:], i))
            break
    return tokens


# ---- parser ------------------------------------------------------------------
FUNCTIONS: dict[str, int | tuple[int, int]] = {
    "concat": 2,
    "contains": 2,
    "endswith": 2,
    "indexof": 2,
    "length": 1,
    "startswith": 2,
    "substring": (2, 3),
    "matchesPattern": 2,
    "tolower": 1,
    "toupper": 1,
    "trim": 1,
    "year": 1,
    "month": 1,
    "day": 1,
    "hour": 1,
    "minute": 1,
    "second": 1,
    "fractionalseconds": 1,
    "totalseconds": 1,
    "date": 1,
    "time": 1,
    "totaloffsetminutes": 1,
    "mindatetime": 0,
    "maxdatetime": 0,
    "now": 0,
    "round": 1,
    "floor": 1,
    "ceiling": 1,
    "geo.distance": 2,
    "geo.length": 1,
    "geo.intersects": 2,
    "hassubset": 2,
    "hassubsequence": 2,
}

# Binary operators: token type -> (precedence, node kind). Higher binds tighter.
_BINARY = {
    "OR": (1, "bool"),
    "AND": (2, "bool"),
    "EQ": (3, "cmp"),
    "NE": (3, "cmp"),
    "GT": (4, "cmp"),
    "GE": (4, "cmp"),
    "LT": (4, "cmp"),
    "LE": (4, "cmp"),
    "ADD": (5, "arith"),
    "SUB": (5, "arith"),
    "MUL": (6, "arith"),
    "DIV": (6, "arith"),
    "MOD": (6, "arith"),
    "IN": (8, "in"),
}
_UNARY_PREC = 7  # `not` and unary minus (right associative)
_LITERAL_TOKENS = {
    "NULL",
    "INTEGER",
    "DECIMAL",
    "STRING",
    "GEOGRAPHY",
    "BOOLEAN",
    "GUID",
    "DATE",
    "TIME",
    "DATETIME",
    "DURATION",
}


class _Parser:
    def __init__(self, tokens: list[Token]):
        self.tokens = tokens
        self.pos = 0

    # token access
    def peek(self) -> Token | None:
        if self.pos >= len(self.tokens):
            return None
        tok = self.tokens[self.pos]
        if tok.type == "ERROR":
            raise ODataError(f"Failed to tokenize at: {tok!r}")
        return tok

    def peek_type(self) -> str | None:
        tok = self.peek()
        return tok.type if tok else None

    def fail(self) -> ODataError:
        tok = self.peek()
        return ODataError(f"Failed to parse at: {tok!r}" if tok else "Failed to parse at: None")

    def take(self, kind: str) -> Token:
        tok = self.peek()
        if tok is None or tok.type != kind:
            raise self.fail()
        self.pos += 1
        return tok

    def skip_ws(self) -> None:
        if self.peek_type() == "WS":
            self.pos += 1

    # grammar
    def parse(self) -> Node:
        node = self.expr(0)
        if self.peek() is not None:
            raise self.fail()
        return node

    def expr(self, min_prec: int) -> Node:
        left = self.unary()
        while True:
            kind = self.peek_type()
            if kind not in _BINARY:
                return left
            prec, shape = _BINARY[kind]
            if prec <= min_prec:
                return left
            op = self.take(kind).value
            if shape == "in":
                right: Node = self.list_expr()
                left = Compare(op, left, right)
                continue
            right = self.expr(prec)
            if shape == "bool":
                left = BoolOp(op, left, right)
            elif shape == "cmp":
                left = Compare(op, left, right)
            else:
                left = BinOp(op, left, right)

    def unary(self) -> Node:
        kind = self.peek_type()
        if kind == "NOT":
            op = self.take("NOT").value
            return UnaryOp(op, self.expr_from_unary())
        if kind == "UMINUS":
            op = self.take("UMINUS").value
            self.skip_ws()
            return UnaryOp(op, self.expr_from_unary())
        return self.primary()

    def expr_from_unary(self) -> Node:
        # The operand of a prefix operator: only operators binding tighter
        # than the prefix (i.e. `in`) extend it.
        return self.expr(_UNARY_PREC)

    def primary(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise self.fail()
        if tok.type in _LITERAL_TOKENS:
            self.pos += 1
            value: Node = tok.value
            return value
        if tok.type == "(":
            return self.paren_or_list(allow_paren=True)
        if tok.type == "ODATA_IDENTIFIER":
            return self.identifier_expr()
        raise self.fail()

    def paren_or_list(self, allow_paren: bool) -> Node:
        self.take("(")
        self.skip_ws()
        first = self.expr(0)
        self.skip_ws()
        if self.peek_type() == ")" and allow_paren:
            self.pos += 1
            return first
        if self.peek_type() != ",":
            raise self.fail()
        items = [first]
        while self.peek_type() == ",":
            self.pos += 1
            self.skip_ws()
            if self.peek_type() == ")" and len(items) == 1:
                self.pos += 1
                return List(items)
            items.append(self.expr(0))
            self.skip_ws()
        self.take(")")
        return List(items)

    def list_expr(self) -> Node:
        if self.peek_type() != "(":
            raise self.fail()
        return self.paren_or_list(allow_paren=False)

    def identifier_expr(self) -> Node:
        ident: Identifier = self.take("ODATA_IDENTIFIER").value
        kind = self.peek_type()
        if kind == "(":
            return self.call(ident)
        if kind == "/":
            self.pos += 1
            nxt = self.peek_type()
            if nxt in ("ANY", "ALL"):
                op, lam = self.lambda_call(nxt)
                return CollectionLambda(ident, op, lam)
            member = self.member_expr()
            if isinstance(member, Attribute):
                return _reverse_attributes(Attribute(ident, member))  # type: ignore[arg-type]
            if isinstance(member, CollectionLambda):
                owner = member.owner
                assert isinstance(owner, Identifier)
                return CollectionLambda(Attribute(ident, owner.name), member.operator, member.lambda_)
            assert isinstance(member, Identifier)
            return Attribute(ident, member.name)
        return ident

    def member_expr(self) -> Node:
        ident: Identifier = self.take("ODATA_IDENTIFIER").value
        if self.peek_type() == "/":
            self.pos += 1
            nxt = self.peek_type()
            if nxt in ("ANY", "ALL"):
                op, lam = self.lambda_call(nxt)
                return CollectionLambda(ident, op, lam)
            member = self.member_expr()
            if isinstance(member, Attribute):
                return _reverse_attributes(Attribute(ident, member))  # type: ignore[arg-type]
            if isinstance(member, CollectionLambda):
                owner = member.owner
                assert isinstance(owner, Identifier)
                return CollectionLambda(Attribute(ident, owner.name), member.operator, member.lambda_)
            assert isinstance(member, Identifier)
            return Attribute(ident, member.name)
        return ident

    def lambda_call(self, kind: str) -> tuple[Node, Lambda | None]:
        op = self.take(kind).value
        self.take("(")
        self.skip_ws()
        if kind == "ANY" and self.peek_type() == ")":
            self.pos += 1
            return op, None
        var: Identifier = self.take("ODATA_IDENTIFIER").value
        self.skip_ws()
        self.take(":")
        self.skip_ws()
        body = self.expr(0)
        self.skip_ws()
        self.take(")")
        return op, Lambda(var, body)

    def call(self, func: Identifier) -> Node:
        self.take("(")
        if self.peek_type() == ")":
            self.pos += 1
            return _function_call(func, [])
        self.skip_ws()
        args: list[Node] = []
        named = self._at_named_param()
        while True:
            if named:
                name: Identifier = self.take("ODATA_IDENTIFIER").value
                self.take("=")
                args.append(NamedParam(name, self.expr(0)))
            else:
                args.append(self.expr(0))
            self.skip_ws()
            if self.peek_type() == ",":
                self.pos += 1
                self.skip_ws()
                if self.peek_type() == ")" and len(args) == 1 and not named:
                    self.pos += 1
                    return _function_call(func, args)
                continue
            self.take(")")
            return _function_call(func, args)

    def _at_named_param(self) -> bool:
        if self.pos + 1 >= len(self.tokens):
            return False
        a, b = self.tokens[self.pos], self.tokens[self.pos + 1]
        return a.type == "ODATA_IDENTIFIER" and b.type == "="


def _explode(attr: Attribute) -> list[str]:
    owner = attr.owner
    out = [owner.name] if isinstance(owner, Identifier) else _explode(owner)  # type: ignore[arg-type]
    if isinstance(attr.attr, str):
        out.append(attr.attr)
    else:
        out.extend(_explode(attr.attr))
    return out


def _reverse_attributes(attr: Attribute) -> Attribute:
    parts = _explode(attr)
    leaf = parts.pop()
    owner: Node = Identifier(parts.pop(0))
    for inter in parts:
        owner = Attribute(owner, inter)
    return Attribute(owner, leaf)


def _function_call(func: Identifier, args: list[Node]) -> Call:
    name = func.full_name()
    if func.namespace in ((), ("geo",)):
        if name not in FUNCTIONS:
            raise ODataError(f"Unknown function: '{name}'")
        expected = FUNCTIONS[name]
        given = len(args)
        if isinstance(expected, int) and given != expected:
            raise ODataError(f"Function '{name}' takes {expected} arguments. {given} given.")
        if isinstance(expected, tuple) and not expected[0] <= given <= expected[1]:
            raise ODataError(
                f"Function '{name}' takes between {expected[0]} and {expected[1]} arguments. {given} given."
            )
    return Call(func, args)


def parse(text: str) -> Node:
    """Parse a filter expression (raises `ODataError`)."""
    return _Parser(tokenize(text)).parse()


# ---- evaluation --------------------------------------------------------------
_COMPARATORS: dict[type[Node], Callable[[Any, Any], Any]] = {
    Eq: operator.eq,
    Gt: operator.gt,
    Lt: operator.lt,
}
_EXTRA_COMPARATORS: dict[type[Node], Callable[[Any, Any], Any]] = {
    NotEq: operator.ne,
    GtE: operator.ge,
    LtE: operator.le,
}


def _operand(node: Node, row: dict[str, Any]) -> Any:
    if isinstance(node, Identifier):
        return row.get(node.name)
    if isinstance(node, String):
        return node.val
    if isinstance(node, Integer):
        return int(node.val)
    if isinstance(node, Float):
        return float(node.val)
    if isinstance(node, Boolean):
        return node.val
    return node


def matches(node: Node, row: dict[str, Any], full_comparisons: bool) -> bool:
    """Whether `row` passes the filter (raises `ODataError` on ordering errors)."""
    if isinstance(node, BoolOp):
        if isinstance(node.op, And):
            return matches(node.left, row, full_comparisons) and matches(node.right, row, full_comparisons)
        return matches(node.left, row, full_comparisons) or matches(node.right, row, full_comparisons)
    if isinstance(node, Compare):
        fn = _COMPARATORS.get(type(node.comparator))
        if fn is None and full_comparisons:
            fn = _EXTRA_COMPARATORS.get(type(node.comparator))
        if fn is None:
            return True
        left = _operand(node.left, row)
        right = _operand(node.right, row)
        try:
            return bool(fn(left, right))
        except TypeError as exc:
            raise ODataError(str(exc)) from exc
    return True


def filter_rows(text: str, rows: list[dict[str, Any]], full_comparisons: bool) -> list[dict[str, Any]]:
    tree = parse(text)
    return [row for row in rows if matches(tree, row, full_comparisons)]
