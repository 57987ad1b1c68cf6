"""Mask secret values before a connector config is logged."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SECRET_KEY_PATTERN = re.compile(r"password|secret|token|connection\.string|sasl\.jaas\.config", re.IGNORECASE)
MASK = "***"
_REFERENCE = re.compile(r"^\$\{[A-Za-z][A-Za-z0-9_-]*:[^{}]+\}$")


def mask_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Copy of ``config`` whose secret-looking keys have their values replaced by ``***``.

    A value that is exactly one config-provider reference (``${env:VAR}``) is kept: it names where the
    secret lives, not the secret.
    """
    return {key: _mask(key, value) for key, value in config.items()}


def _mask(key: str, value: Any) -> Any:
    if not SECRET_KEY_PATTERN.search(key) or value is None:
        return value
    if isinstance(value, str) and _REFERENCE.match(value):
        return value
    return MASK
