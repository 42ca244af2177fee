"""The `providers/set` reader: what an editor may send, and the refusals that name the
field without quoting a header's value (it may be a secret)."""

from __future__ import annotations

import logging
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


# --- any header map (hypothesis) ----------------------------------------------------------

BREAKS = "\r\n\0"
MARK = "v@lue-"
"""Every generated value starts with it: no name (token characters) and no message
wording contains it, so its absence shows no value was quoted."""

names = st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=20)
safe_values = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters=BREAKS), max_size=30
).map(lambda tail: MARK + tail)
header_maps = st.dictionaries(names, safe_values, max_size=6)


def broken(text: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """`text` with a CR, LF or NUL put somewhere in it."""
    return st.tuples(text, st.sampled_from(BREAKS), st.integers(0, 60)).map(
        lambda t: t[0][: t[2]] + t[1] + t[0][t[2] :]
    )


@given(header_maps)
def test_any_header_map_without_line_breaks_is_kept_exactly(headers: dict[str, str]) -> None:
    assert read(GOOD | {"headers": headers}).headers == headers


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header_maps, names, broken(safe_values))
def test_a_value_with_a_line_break_is_refused_naming_its_header_and_never_quoted(
    caplog: pytest.LogCaptureFixture, headers: dict[str, str], name: str, value: str
) -> None:
    message = refusal(caplog, headers | {name: value})
    assert f"headers.{name}:" in message
    assert_never_quoted(caplog, message)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header_maps, broken(names), safe_values)
def test_a_name_with_a_line_break_is_refused_naming_it_and_no_value_is_quoted(
    caplog: pytest.LogCaptureFixture, headers: dict[str, str], name: str, value: str
) -> None:
    message = refusal(caplog, headers | {name: value})
    assert repr(name) in message
    assert_never_quoted(caplog, message)


def refusal(caplog: pytest.LogCaptureFixture, headers: dict[str, str]) -> str:
    caplog.clear()
    with caplog.at_level(logging.DEBUG), pytest.raises(RpcError) as refused:
        read(GOOD | {"headers": headers})
    assert refused.value.code == INVALID_PARAMS
    return refused.value.message


def assert_never_quoted(caplog: pytest.LogCaptureFixture, message: str) -> None:
    assert MARK not in message and MARK not in caplog.text
