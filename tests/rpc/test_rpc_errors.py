from __future__ import annotations

from acp_agent.rpc import errors
from acp_agent.rpc.errors import ConnectionClosed, RpcError


def test_error_codes_are_the_json_rpc_and_acp_numbers() -> None:
    assert errors.PARSE_ERROR == -32700
    assert errors.INVALID_REQUEST == -32600
    assert errors.METHOD_NOT_FOUND == -32601
    assert errors.INVALID_PARAMS == -32602
    assert errors.INTERNAL_ERROR == -32603
    assert errors.REQUEST_CANCELLED == -32800
    assert errors.AUTH_REQUIRED == -32000
    assert errors.RESOURCE_NOT_FOUND == -32002


def test_an_error_object_carries_code_message_and_data_only_when_given() -> None:
    assert RpcError(-32602, "bad").to_dict() == {"code": -32602, "message": "bad"}
    assert RpcError(-32602, "bad", {"field": "cwd"}).to_dict() == {
        "code": -32602,
        "message": "bad",
        "data": {"field": "cwd"},
    }


def test_an_rpc_error_reads_as_its_message() -> None:
    error = RpcError(-32601, "method not found: x")
    assert str(error) == "method not found: x"
    assert error.code == -32601
    assert error.message == "method not found: x"


def test_connection_closed_is_an_rpc_error_with_the_internal_error_code() -> None:
    error = ConnectionClosed()
    assert isinstance(error, RpcError)
    assert error.code == -32603
    assert "closed" in error.message
