"""Ad hoc snapshot filters (``additional-conditions``), parsed with sqlglot and regenerated from what was checked.

Debezium runs a snapshot filter as its capture user: an incremental filter is appended to its chunk query with
``AND``, a blocking filter replaces the snapshot's ``SELECT``. A filter is therefore parsed in the source's SQL
dialect, every node of the parse tree must be on an allowlist, and the text sent to Debezium is regenerated from
that tree (so what runs is what was checked; comments, including MySQL's executable ``/*! ... */``, are never
sent).

What a filter may be:

* **incremental**: one condition over the table's own columns: comparisons (``= <> < <= > >=``, ``<=>``,
  ``IS [NOT] DISTINCT FROM``), ``AND``/``OR``/``NOT``, ``IN`` with a list of values, ``BETWEEN``,
  ``IS [NOT] NULL``/``TRUE``/``FALSE``, ``LIKE`` (and PostgreSQL ``ILIKE``, ``ESCAPE``), arithmetic
  (``+ - * / %``, MySQL ``DIV``), literals (strings, numbers, booleans, NULL, ``DATE '...'``, ``INTERVAL``),
  ``CAST`` (and ``::``) to a number, text, date/time, boolean or uuid type, and the functions of
  :data:`ALLOWED_FUNCTIONS`. An ``OR`` at the top is put in parentheses, because Debezium appends the filter
  to its own condition with ``AND``.
* **blocking**: ``SELECT * FROM <the table> [WHERE <an incremental filter>]``, or ``SELECT <columns of the
  table> FROM ...``. The table is named as its data collection (``inventory.orders``; Informix also
  ``owner.table``). No alias, join, subquery, ``WITH``, ``DISTINCT``, ``GROUP BY``, ``HAVING``, ``ORDER BY``
  (a snapshot reads every selected row: an order only costs a sort), ``LIMIT``/``OFFSET`` (it would snapshot an
  arbitrary part of the rows), locking clause or ``INTO``.

Refused anywhere: subqueries, table references, ``UNION``/``INTERSECT``/``EXCEPT``, more than one statement (any
``;``), comments, functions off the allowlist (``pg_read_file``, ``load_file``, ``sleep``, ``benchmark``...),
placeholders and variables (``?``, ``$1``, ``@x``, ``@@version``), column names qualified by another table,
system columns (PostgreSQL ``ctid``, ``xmin``...), backslashes in PostgreSQL and Informix strings (whether they
escape depends on the server's settings), and, when the table's columns are given, any other column.

Dialects: PostgreSQL is parsed as ``postgres``, MySQL and MariaDB as ``mysql``. sqlglot has no Informix dialect:
Informix filters are parsed as ANSI SQL (sqlglot's generic dialect) and must not quote identifiers (without
``DELIMIDENT`` Informix reads ``"..."`` as a string). MongoDB filters are not SQL: :func:`filter_dialect` is
None for MongoDB and its filters are not parsed here.

Identifiers are regenerated quoted (PostgreSQL ``"id"``, MySQL ```id```) after the dialect's case folding, so a
name can only mean a column (PostgreSQL reads a bare ``user`` as the current user).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.tokens import TokenType

from cdclake.connectors.spec import ConnectorKind
from cdclake.exceptions import SignalValidationError

ANSI = ""
"""sqlglot's generic (ANSI) dialect, used for Informix, which sqlglot has no dialect for."""

FILTER_DIALECTS: dict[ConnectorKind, str] = {
    ConnectorKind.POSTGRESQL: "postgres",
    ConnectorKind.MYSQL: "mysql",
    ConnectorKind.MARIADB: "mysql",
    ConnectorKind.INFORMIX: ANSI,
}
"""The sqlglot dialect a connector's filters are parsed in (MongoDB has none: its filters are not SQL)."""

_DIALECT_NAMES = {"postgres": "PostgreSQL", "mysql": "MySQL", ANSI: "ANSI"}

#: The functions a filter may call (sqlglot's expression class -> the name a message shows). ``NOW()`` is also
#: accepted: PostgreSQL's parses as ``CURRENT_TIMESTAMP``, MySQL's is taken by name (without arguments).
ALLOWED_FUNCTIONS: dict[type[exp.Expression], str] = {
    exp.Lower: "LOWER",
    exp.Upper: "UPPER",
    exp.Trim: "TRIM",
    exp.Length: "LENGTH",
    exp.Coalesce: "COALESCE",
    exp.Abs: "ABS",
    exp.CurrentDate: "CURRENT_DATE",
    exp.CurrentTime: "CURRENT_TIME",
    exp.CurrentTimestamp: "CURRENT_TIMESTAMP",
}
_ALLOWED_BY_NAME = frozenset({"NOW"})

#: Types a filter may CAST to: numbers, text, dates and times, booleans, uuids.
ALLOWED_CAST_TYPES: frozenset[exp.DataType.Type] = frozenset(
    exp.DataType.NUMERIC_TYPES
    | exp.DataType.TEXT_TYPES
    | exp.DataType.TEMPORAL_TYPES
    | {exp.DataType.Type.BOOLEAN, exp.DataType.Type.UUID}
)

#: Columns every table has that are not its data: refused whatever the table's columns.
SYSTEM_COLUMNS: dict[str, frozenset[str]] = {
    "postgres": frozenset({"ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"}),
    "mysql": frozenset({"_rowid"}),
    ANSI: frozenset({"rowid"}),
}

_CONDITIONS = (exp.Predicate, exp.And, exp.Or, exp.Not, exp.Boolean, exp.Escape)
_ALLOWED_NODES: frozenset[type[exp.Expression]] = frozenset(
    {
        exp.And,
        exp.Or,
        exp.Not,
        exp.Paren,
        exp.EQ,
        exp.NEQ,
        exp.GT,
        exp.GTE,
        exp.LT,
        exp.LTE,
        exp.NullSafeEQ,
        exp.NullSafeNEQ,
        exp.Is,
        exp.In,
        exp.Between,
        exp.Like,
        exp.ILike,
        exp.Escape,
        exp.Add,
        exp.Sub,
        exp.Mul,
        exp.Div,
        exp.Mod,
        exp.IntDiv,
        exp.Neg,
        exp.Literal,
        exp.Boolean,
        exp.Null,
        exp.Interval,
        exp.Cast,
    }
)
_SELECT_CLAUSES = frozenset({"expressions", "from", "from_", "where"})
_CLAUSE_NAMES = {
    "with": "WITH",
    "with_": "WITH",
    "joins": "a JOIN",
    "laterals": "LATERAL",
    "group": "GROUP BY",
    "having": "HAVING",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "distinct": "DISTINCT",
    "locks": "a locking clause (FOR UPDATE/SHARE)",
    "into": "INTO",
    "hint": "an optimizer hint",
    "windows": "WINDOW",
    "qualify": "QUALIFY",
}
_TABLE_CLAUSE_NAMES = {
    "alias": "a table alias",
    "hints": "an index hint",
    "joins": "a JOIN",
    "laterals": "LATERAL",
    "pivots": "PIVOT",
    "sample": "TABLESAMPLE",
    "only": "ONLY",
}
_SNIPPET = 80


def filter_dialect(connector: ConnectorKind) -> str | None:
    """The sqlglot dialect of a connector's filters, or None when they are not SQL (MongoDB)."""
    return FILTER_DIALECTS.get(connector)


def check_filter(
    text: str,
    data_collection: str,
    snapshot_type: str,
    dialect: str = ANSI,
    columns: Collection[str] | None = None,
) -> str:
    """Check a snapshot filter and return it regenerated in ``dialect``.

    Args:
        text: the filter as given.
        data_collection: the table it applies to (``inventory.orders``, ``demo.informix.orders``).
        snapshot_type: ``incremental`` (a condition) or ``blocking`` (a full ``SELECT``).
        dialect: the sqlglot dialect (:data:`FILTER_DIALECTS`; :data:`ANSI` for Informix).
        columns: the table's column names; None when they are not known (names are then not checked).

    Returns:
        The filter as sqlglot regenerates it from the checked parse tree. The returned text passes the same
        checks and regenerates to itself.

    Raises:
        SignalValidationError: naming the data collection and why the filter is refused.
    """
    if snapshot_type not in ("incremental", "blocking"):
        raise ValueError(f"snapshot type must be incremental or blocking, got {snapshot_type!r}")
    checker = _FilterChecker(data_collection, snapshot_type == "blocking", dialect, columns)
    normalised = checker.check(text)
    if checker.check(normalised) != normalised:
        raise checker.refuse(f"sqlglot does not regenerate it stably ({_snippet(normalised)}); simplify the filter")
    return normalised


def _snippet(text: str) -> str:
    return text if len(text) <= _SNIPPET else text[: _SNIPPET - 3] + "..."


class _FilterChecker:
    """One filter's checks: the table it applies to, its kind, the dialect and (maybe) the table's columns."""

    def __init__(self, data_collection: str, blocking: bool, dialect: str, columns: Collection[str] | None) -> None:
        if dialect not in _DIALECT_NAMES:
            raise ValueError(f"no filter dialect {dialect!r}; use one of {', '.join(map(repr, _DIALECT_NAMES))}")
        self.data_collection = data_collection
        self.blocking = blocking
        self.dialect = dialect
        self.dialect_name = _DIALECT_NAMES[dialect]
        self.table_parts = data_collection.split(".")
        self.columns = None if columns is None else list(columns)
        self._folded = None if columns is None else {self._fold(c): c for c in columns}
        # Informix reads "..." as a string unless DELIMIDENT is set: its identifiers stay bare.
        self.identify = dialect != ANSI

    # ---- helpers -------------------------------------------------------------------------------------

    def refuse(self, reason: str) -> SignalValidationError:
        return SignalValidationError(f"filter of {self.data_collection}: {reason}")

    def _sql(self, node: exp.Expression) -> str:
        return node.sql(dialect=self.dialect or None, identify=self.identify, comments=False)

    def _fold(self, name: str) -> str:
        # PostgreSQL: folding already happened (unquoted names are lower-cased by normalize_identifiers);
        # MySQL/MariaDB column names and Informix names are case-insensitive.
        return name if self.dialect == "postgres" else name.casefold()

    def _same_table_name(self, a: str, b: str) -> bool:
        # MySQL/MariaDB table names are case-sensitive on most servers; PostgreSQL's are after folding.
        return a == b if self.dialect in ("postgres", "mysql") else a.casefold() == b.casefold()

    def _names_table(self, parts: Sequence[str], *, bare_ok: bool) -> bool:
        """Whether ``parts`` (catalog, db, table) name this data collection: all its parts, the last two of a
        three-part one (Informix ``owner.table``) or, when ``bare_ok``, the table name alone."""
        n = len(parts)
        if n == 0 or n > len(self.table_parts):
            return False
        if n == 1 and not bare_ok and len(self.table_parts) > 1:
            return False
        return all(self._same_table_name(a, b) for a, b in zip(parts, self.table_parts[-n:], strict=True))

    # ---- parsing -------------------------------------------------------------------------------------

    def _parse(self, text: str) -> exp.Expression:
        dialect = Dialect.get_or_raise(self.dialect or None)
        if not text.strip():
            raise self.refuse("it is empty")
        try:
            tokens = dialect.tokenize(text)
        except TokenError as exc:
            raise self.refuse(f"cannot be read as {self.dialect_name} SQL ({exc})") from exc
        if any(token.comments for token in tokens):
            raise self.refuse("comments are not allowed")
        if any(token.token_type is TokenType.SEMICOLON for token in tokens):
            raise self.refuse("only one statement is allowed (no ';')")
        try:
            trees = [tree for tree in dialect.parser().parse(tokens, text) if tree is not None]
        except ParseError as exc:
            first = exc.errors[0] if exc.errors else {}
            where = f" at line {first.get('line')}, column {first.get('col')}" if first else ""
            reason = first.get("description") or str(exc)
            raise self.refuse(f"cannot be parsed as {self.dialect_name} SQL{where}: {reason}") from exc
        except SqlglotError as exc:
            raise self.refuse(f"cannot be parsed as {self.dialect_name} SQL: {exc}") from exc
        if len(trees) != 1:
            raise self.refuse("only one statement is allowed")
        return normalize_identifiers(trees[0], dialect=self.dialect or None)

    # ---- checks --------------------------------------------------------------------------------------

    def check(self, text: str) -> str:
        tree = self._parse(text)
        if self.blocking:
            return self._check_select(tree)
        return self._check_where(tree)

    def _check_where(self, tree: exp.Expression) -> str:
        if isinstance(tree, exp.SetOperation):
            raise self.refuse(
                f"set operations (UNION, INTERSECT, EXCEPT) are not allowed ({_snippet(self._sql(tree))})"
            )
        if isinstance(tree, exp.Query):
            raise self.refuse(
                f"an incremental snapshot filter is a WHERE condition (e.g. \"status = 'open'\"), not a query "
                f"({_snippet(self._sql(tree))})"
            )
        self._check_condition(tree)
        if isinstance(tree, exp.Or):
            tree = exp.Paren(this=tree)
        return self._sql(tree)

    def _check_select(self, tree: exp.Expression) -> str:
        example = f"SELECT * FROM {self.data_collection} WHERE ..."
        if isinstance(tree, exp.SetOperation):
            raise self.refuse(
                f"set operations (UNION, INTERSECT, EXCEPT) are not allowed ({_snippet(self._sql(tree))})"
            )
        if not isinstance(tree, exp.Select):
            raise self.refuse(
                f"a blocking snapshot filter must be a full SELECT statement (e.g. {example}), "
                f"got {_snippet(self._sql(tree))}"
            )
        for key, value in tree.args.items():
            if key in _SELECT_CLAUSES or value in (None, False, [], ()):
                continue
            clause = _CLAUSE_NAMES.get(key, key.upper())
            raise self.refuse(f"{clause} is not allowed in a blocking snapshot filter (use {example})")
        source = tree.args.get("from_") or tree.args.get("from")
        if not isinstance(source, exp.From):
            raise self.refuse(f"a blocking snapshot filter must select FROM {self.data_collection}")
        self._check_from(source.this)
        self._check_projection(tree.expressions)
        where = tree.args.get("where")
        if isinstance(where, exp.Where):
            self._check_condition(where.this)
        return self._sql(tree)

    def _check_from(self, table: exp.Expression) -> None:
        if isinstance(table, exp.Subquery | exp.Query):
            raise self.refuse(f"subqueries are not allowed ({_snippet(self._sql(table))})")
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
            raise self.refuse(f"a blocking snapshot filter must select FROM {self.data_collection}")
        for key, value in table.args.items():
            if key not in ("this", "db", "catalog") and value not in (None, False, [], ()):
                what = _TABLE_CLAUSE_NAMES.get(key, f"{key.upper()} on the table")
                raise self.refuse(f"{what} is not allowed in a blocking snapshot filter")
        self._check_identifiers(table)
        if not self._names_table([p.name for p in table.parts], bare_ok=False):
            raise self.refuse(
                f"a blocking snapshot filter must select FROM {self.data_collection}, not {self._sql(table)}"
            )

    def _check_projection(self, expressions: list[exp.Expression]) -> None:
        for item in expressions:
            subquery = item.find(exp.Subquery, exp.Query)
            if subquery is not None:
                raise self.refuse(f"subqueries are not allowed ({_snippet(self._sql(subquery))})")
        for item in expressions:
            if isinstance(item, exp.Star) and len(expressions) == 1 and not any(item.args.values()):
                continue
            if not isinstance(item, exp.Column):
                raise self.refuse(
                    f"select * alone or plain columns of {self.data_collection}, not {_snippet(self._sql(item))}"
                )
            self._check_column(item)

    def _check_condition(self, tree: exp.Expression) -> None:
        for node in tree.walk():
            self._check_node(node)
        if not isinstance(tree.unnest(), _CONDITIONS):
            raise self.refuse(
                "a filter must be a condition (comparisons, IN, BETWEEN, LIKE, IS NULL, joined by AND/OR/NOT), "
                f"got {_snippet(self._sql(tree))}"
            )

    def _check_node(self, node: exp.Expression) -> None:
        kind = type(node)
        if kind is exp.Literal and node.is_string and "\\" in node.this and self.dialect != "mysql":
            # PostgreSQL with standard_conforming_strings off (and Informix) may read \' as an escaped quote,
            # ending the string somewhere else than the parser did.
            raise self.refuse(
                f"backslashes are not allowed in {self.dialect_name} strings ({_snippet(self._sql(node))})"
            )
        if kind in _ALLOWED_NODES or kind in ALLOWED_FUNCTIONS:
            return
        if isinstance(node, exp.SetOperation):
            raise self.refuse(
                f"set operations (UNION, INTERSECT, EXCEPT) are not allowed ({_snippet(self._sql(node))})"
            )
        if isinstance(node, exp.Subquery | exp.Query | exp.Exists):
            raise self.refuse(f"subqueries are not allowed ({_snippet(self._sql(node))})")
        if isinstance(node, exp.Table | exp.From | exp.Join):
            raise self.refuse(f"table references are not allowed ({_snippet(self._sql(node))})")
        if isinstance(node, exp.Placeholder | exp.Parameter | exp.SessionParameter):
            raise self.refuse(f"placeholders and variables are not allowed ({_snippet(self._sql(node))})")
        if kind is exp.Column:
            self._check_column(node)  # type: ignore[arg-type]
        elif kind is exp.Identifier and isinstance(node.parent, exp.Column):
            pass  # a part of a column name: checked with its column
        elif kind is exp.Var and isinstance(node.parent, exp.Interval) and node.arg_key == "unit":
            pass  # INTERVAL '7' DAY
        elif kind in (exp.DataType, exp.DataTypeParam) and isinstance(node.parent, exp.Cast | exp.DataType):
            self._check_type(node)
        elif kind is exp.Anonymous and node.name.upper() in _ALLOWED_BY_NAME and not node.expressions:
            pass  # MySQL NOW()
        elif isinstance(node, exp.Func):
            name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
            allowed = ", ".join([*ALLOWED_FUNCTIONS.values(), *sorted(_ALLOWED_BY_NAME)])
            raise self.refuse(f"function {name.upper()} is not allowed (allowed: {allowed})")
        else:
            raise self.refuse(f"{_snippet(self._sql(node))} is not allowed in a filter")

    def _check_type(self, node: exp.Expression) -> None:
        if isinstance(node, exp.DataTypeParam):
            if not isinstance(node.this, exp.Literal) or node.this.is_string:
                raise self.refuse(f"type parameter {self._sql(node)} is not allowed")
            return
        assert isinstance(node, exp.DataType)
        if node.this not in ALLOWED_CAST_TYPES or node.args.get("nested") or isinstance(node.parent, exp.DataType):
            raise self.refuse(
                f"CAST to {self._sql(node)} is not allowed (only number, text, date/time, boolean and uuid types)"
            )

    def _check_identifiers(self, node: exp.Expression) -> None:
        if self.dialect == ANSI:
            for identifier in node.find_all(exp.Identifier):
                if identifier.quoted:
                    raise self.refuse(
                        f'quoted identifier "{identifier.name}" is not allowed: Informix reads "..." as a string '
                        "without DELIMIDENT"
                    )

    def _check_column(self, column: exp.Column) -> None:
        if isinstance(column.this, exp.Star):
            raise self.refuse(f"{self._sql(column)} is not allowed (select * or plain columns)")
        self._check_identifiers(column)
        qualifier = [p.name for p in column.parts[:-1]]
        if qualifier and not self._names_table(qualifier, bare_ok=True):
            raise self.refuse(
                f"column {self._sql(column)} refers to another table (only columns of {self.data_collection} "
                "may be used)"
            )
        name = column.name
        if self._fold(name) in {self._fold(c) for c in SYSTEM_COLUMNS[self.dialect]}:
            raise self.refuse(f"system column {name} is not allowed")
        if self._folded is not None and self._fold(name) not in self._folded:
            known = ", ".join(self.columns or ()) or "none could be read"
            raise self.refuse(f"{name} is not a column of {self.data_collection} (its columns: {known})")
