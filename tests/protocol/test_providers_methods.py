"""The `providers/set` reader: what an editor may send, and the refusals that name the
field without quoting a header's value (it may be a secret)."""

from __future__ import annotations

from typing import Any

import pytest

from acp_agent.protocol.providers import SetProvider, set_provider
from acp_agent.protocol.requests import read_params
from acp_agent.rpc.errors import INVALID_PARAMS, RpcError

GOOD = {"providerId": "main", "apiType": "anthropic", "baseUrl": "https://gw.example/v1"}


def read(params: dict[str, Any]) -> SetProvider:
    answer: SetProvider = read_params("providers/set", set_provider, params)
    return answer


def test_headers_default_to_none_and_are_kept_exactly() -> None:
    assert read(GOOD).headers == {}
    headers = {"x-api-key": "s3cret", "anthropic-beta": "a,b"}
    assert read(GOOD | {"headers": headers}).headers == headers
    assert "s3cret" not in repr(read(GOOD | {"headers": headers}))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"apiType": "_custom"}, "apiType"),
        ({"apiType": 3}, "apiType"),
        ({"baseUrl": "ftp://gw.example"}, "baseUrl"),
        ({"baseUrl": "http://"}, "baseUrl"),
        ({"baseUrl": "https://gw.example/\r\nx"}, "baseUrl"),
        ({"headers": ["x"]}, "headers"),
        ({"headers": {"X-A": None}}, "headers.X-A"),
        ({"headers": {"X-A": "hidden-value\n"}}, "headers.X-A"),
        ({"headers": {"X:A": "v"}}, "headers"),
        ({"providerId": None}, "providerId"),
    ],
)
def test_bad_input_is_invalid_params_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(RpcError) as refused:
        read(GOOD | change)
    assert refused.value.code == INVALID_PARAMS
    assert field in refused.value.message
    assert "hidden-value" not in refused.value.message


def test_the_reader_takes_what_the_sdk_schema_takes() -> None:
    from acp import schema

    params = GOOD | {"headers": {"X-A": "1"}, "_meta": {"k": "v"}, "later": True}
    model = schema.SetProviderRequest.model_validate(params)
    read_back = read(params)
    assert (read_back.provider_id, read_back.api_type, read_back.base_url) == (
        model.provider_id,
        model.api_type,
        model.base_url,
    )
    assert read_back.headers == model.headers
