"""Request shapes of the older v1 surface (../shared/spec/000) that `acp.schema` dropped."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SetSessionModelRequest(BaseModel):
    """`session/set_model`, from clients that predate session config options."""

    model_config = ConfigDict(populate_by_name=True)

    session_id: str = Field(alias="sessionId")
    model_id: str = Field(alias="modelId")
    field_meta: dict[str, Any] | None = Field(None, alias="_meta")
