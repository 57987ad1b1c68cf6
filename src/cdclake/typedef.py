"""Type aliases and base models shared across cdclake."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

#: A decoded JSON object.
JsonDict = dict[str, Any]


class FrozenModel(BaseModel):
    """Immutable pydantic model; fields may be given by Python name or by their wire alias."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")
