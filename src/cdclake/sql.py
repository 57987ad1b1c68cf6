"""Spark SQL quoting: the one place a name (or a string value) is quoted for the SQL text cdclake builds.

A part is wrapped in backticks with every embedded backtick doubled, so any column or table name (dots,
spaces, backticks, SQL-looking text) stays one identifier: ``a`b`` becomes ```a``b```. Spark's column
references (``F.col``, ``selectExpr``) read the same quoting. MySQL and MariaDB quote identifiers the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["quote_identifier", "quote_name", "quote_string"]


def quote_identifier(part: str) -> str:
    """One identifier part in backticks, embedded backticks doubled: ``x`` -> ```x```, ``a`b`` -> ```a``b```."""
    return "`" + part.replace("`", "``") + "`"


def quote_name(parts: Iterable[str]) -> str:
    """A multi-part name with every part quoted (:func:`quote_identifier`), joined by dots:
    ``("lake", "pg", "t")`` -> ```lake`.`pg`.`t```."""
    return ".".join(quote_identifier(p) for p in parts)


def quote_string(value: str) -> str:
    """A Spark SQL string literal: ``value`` in single quotes, backslashes and single quotes escaped with a
    backslash: ``it's`` -> ``'it\\'s'``."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
