"""A provider the editor adds (`providers/set` of an id the config does not have): its
models come from its gateway's model list (fake OpenAI and Anthropic servers on
127.0.0.1), else from the configuration's models of that protocol; what we cannot build
is refused with the field named, and nothing changes. A hostile gateway (`hostile_http`:
huge, endless, malformed or redirected answers) changes nothing of that."""

from __future__ import annotations

import logging
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator

import anyio
import pytest
from fake_anthropic import FakeAnthropic
from fake_llm import FakeLLM
from hostile_http import Answer, HostileServer, Wire, json_list

from acp_agent.config import (
    AgentConfig,
    AnthropicProviderConfig,
    ModelConfig,
    OpenAIProviderConfig,
)
from acp_agent.protocol.providers import SetProvider
from acp_agent.provider_routes import MODELS_TIMEOUT, ProviderRoutes, RouteError
from acp_agent.providers.gateway_models import MAX_BODY_BYTES, MAX_MODELS
from acp_agent.providers.pool import ProviderPool

pytestmark = pytest.mark.anyio

SECRET = "gw-secret-5d1e"
HEADERS = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture
def gateway() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def routes(*, with_anthropic: bool = True) -> ProviderRoutes:
    """`main` (OpenAI-compatible, the default) and, unless told, `claude` (Anthropic)."""
    providers: dict[str, OpenAIProviderConfig | AnthropicProviderConfig] = {
        "main": OpenAIProviderConfig(
            type="openai-compatible",
            base_url="http://127.0.0.1:9/v1",
            models=(ModelConfig(id="fake-model", context_window=12_345),),
        )
    }
    if with_anthropic:
        providers["claude"] = AnthropicProviderConfig(
            type="anthropic", models=(ModelConfig(id="claude-x"),)
        )
    config = AgentConfig(providers=providers)  # type: ignore[arg-type]
    return ProviderRoutes(config, ProviderPool(config, {}))


def offered(table: ProviderRoutes, provider: str) -> list[str]:
    return [choice for choice, _, _ in table.config.model_choices() if choice.startswith(provider)]


async def test_a_new_provider_offers_the_models_its_gateway_lists_asked_with_the_editors_headers(
    gateway: FakeLLM,
) -> None:
    gateway.model_list = ["gw-large", "fake-model", "gw-large", "", "bad\nid"]
    table = routes()
    await table.set(SetProvider("air", "openai", gateway.base_url, HEADERS))

    assert offered(table, "air/") == ["air/gw-large", "air/fake-model"]
    (asked,) = gateway.exchanges
    assert (asked.method, asked.path) == ("GET", "/v1/models")
    assert asked.headers["authorization"] == f"Bearer {SECRET}"
    # A model the configuration has keeps what the configuration says of it.
    assert table.config.find_model("air/fake-model")[2].context_window == 12_345
    (air,) = [p for p in table.listing() if p["providerId"] == "air"]
    assert air == {
        "providerId": "air",
        "supported": ["openai"],
        "required": False,
        "current": {"apiType": "openai", "baseUrl": gateway.base_url},
    }
    assert table.routed("air") and SECRET not in repr(table.config)


async def test_an_anthropic_gateway_is_asked_at_v1_models_with_an_api_version() -> None:
    table = routes()
    with FakeAnthropic() as gateway:
        await table.set(SetProvider("air", "anthropic", gateway.base_url, {"x-api-key": SECRET}))
        (asked,) = gateway.exchanges
    assert asked.path.startswith("/v1/models")
    assert asked.headers["x-api-key"] == SECRET and asked.headers["anthropic-version"]
    _, section, model = table.config.find_model("air/claude-fake")
    assert (section.type, model.name) == ("anthropic", "Claude Fake")


async def test_a_gateway_without_a_model_list_offers_the_configurations_models_of_its_protocol(
    gateway: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    gateway.model_list = None
    table = routes()
    with caplog.at_level(logging.INFO):
        await table.set(SetProvider("air", "openai", gateway.base_url, HEADERS))
    assert offered(table, "air/") == ["air/fake-model"]
    assert "HTTP 404" in caplog.text and "air" in caplog.text
    assert SECRET not in caplog.text


async def test_a_silent_model_list_does_not_hold_the_set_past_its_timeout(
    gateway: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    gateway.model_list_gate = release = threading.Event()
    table = routes()
    table.models_timeout = 0.3
    try:
        with anyio.fail_after(5), caplog.at_level(logging.INFO):
            await table.set(SetProvider("air", "openai", gateway.base_url, HEADERS))
    finally:
        release.set()
    assert offered(table, "air/") == ["air/fake-model"]
    assert "no answer within 0.3s" in caplog.text and SECRET not in caplog.text


async def test_setting_an_added_provider_again_makes_it_anew(gateway: FakeLLM) -> None:
    table = routes()
    await table.set(SetProvider("air", "openai", gateway.base_url, HEADERS))
    with FakeAnthropic() as other:
        await table.set(SetProvider("air", "anthropic", other.base_url, {"x-api-key": SECRET}))
        other_url = other.base_url
    assert offered(table, "air/") == ["air/claude-fake"]
    routing = table.pool.routing("air")
    assert routing is not None and (routing.api_type, routing.base_url) == ("anthropic", other_url)


@pytest.mark.parametrize(
    ("provider_id", "api_type", "field"),
    [
        ("air", "azure", "apiType"),
        ("air", "bedrock", "apiType"),
        ("a/b", "openai", "providerId"),
        ("", "openai", "providerId"),
        ("main", "anthropic", "apiType"),  # configured: it speaks openai only
    ],
)
async def test_what_cannot_be_built_is_refused_naming_the_field_and_nothing_changes(
    gateway: FakeLLM, provider_id: str, api_type: str, field: str
) -> None:
    table = routes()
    before = table.listing()
    with pytest.raises(RouteError, match=f"^{field}:"):
        await table.set(SetProvider(provider_id, api_type, gateway.base_url, HEADERS))
    assert table.listing() == before and not gateway.exchanges


async def test_no_model_list_and_no_configured_models_of_that_protocol_is_refused(
    gateway: FakeLLM,
) -> None:
    gateway.model_list = None
    table = routes(with_anthropic=False)
    before = table.listing()
    with FakeAnthropic() as other:
        other_url = other.base_url
    # Nothing listens there any more: no model list, and no anthropic model configured.
    with pytest.raises(RouteError, match=r"^providerId: .*no anthropic models"):
        await table.set(SetProvider("air", "anthropic", other_url, HEADERS))
    assert table.listing() == before and "air" not in table.config.providers


# --- a hostile gateway: whatever its model list is, the set goes on with the configured
# models, in bounded time and memory, and the log says why without a header's value.


def answering(status: str, body: bytes, **headers: str | int) -> Answer:
    def answer(wire: Wire) -> None:
        wire.head(status, Content_Length=len(body), Content_Type="application/json", **headers)
        wire.send(body)

    return answer


def endless_chunks(wire: Wire) -> None:
    """A list that never ends, as fast as the client reads (no Content-Length)."""
    wire.head(Transfer_Encoding="chunked", Content_Type="application/json")
    pieces = json_list(10**12, lambda i: b'{"id": "gw-%d", "object": "model"}' % i)
    while True:
        wire.chunk(b"".join(next(pieces) for _ in range(1000)))


async def fallback_through(
    answer: Answer, caplog: pytest.LogCaptureFixture, *, wait: float = MODELS_TIMEOUT
) -> tuple[ProviderRoutes, HostileServer, float]:
    """`providers/set` of a new provider whose gateway answers so: the table, the server,
    and the seconds it took. The provider is usable, with the configuration's models."""
    table = routes()
    table.models_timeout = wait
    with HostileServer(answer) as server, caplog.at_level(logging.INFO):
        started = time.monotonic()
        with anyio.fail_after(wait + 5):
            await table.set(SetProvider("air", "openai", server.base_url, HEADERS))
        took = time.monotonic() - started
    assert offered(table, "air/") == ["air/fake-model"] and table.routed("air")
    assert "air: the gateway's model list is unavailable" in caplog.text
    assert SECRET not in caplog.text
    return table, server, took


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (answering("200 OK", b'{"data": [{"id": "gw-1"'), "Expecting"),
        (answering("200 OK", b"<html>Sign in</html>"), "Expecting value"),
        (answering("200 OK", b'{"data": ["\xff\xfe"]}'), "codec can't decode"),
        (answering("200 OK", b"[" * 200_000), "nested too deeply"),
        (answering("200 OK", b'[{"id": "gw-1"}]'), "no `data` list"),
        (answering("200 OK", b'{"data": {"id": "gw-1"}}'), "no `data` list"),
        (answering("200 OK", b'{"data": [{"id": 1}, {"id": null}, {"id": ["x"]}]}'), "no model"),
        (answering("401 Unauthorized", b'{"error": "bad key gw-secret-5d1e"}'), "HTTP 401"),
        (answering("500 Internal Server Error", b"oops"), "HTTP 500"),
        (answering("200 OK", b"\x1f\x8b not gzip", Content_Encoding="gzip"), "corrupt"),
        (answering("200 OK", b"{}", Content_Encoding="br"), "encoded as 'br'"),
    ],
)
async def test_a_model_list_that_is_no_list_leaves_the_configured_models_and_says_why(
    answer: Answer, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    await fallback_through(answer, caplog)
    assert reason in caplog.text


async def test_a_redirect_is_not_followed_with_the_editors_headers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with HostileServer(answering("200 OK", b'{"data": [{"id": "elsewhere"}]}')) as elsewhere:
        moved = answering("302 Found", b"", Location=f"{elsewhere.base_url}/models")
        await fallback_through(moved, caplog)
    assert "HTTP 302, a redirect (not followed" in caplog.text
    assert not elsewhere.heads


async def test_ten_thousand_models_are_cut_to_what_a_picker_can_show() -> None:
    body = b"".join(json_list(10_000, lambda i: b'{"id": "gw-%d"}' % i))
    table = routes()
    with HostileServer(answering("200 OK", body)) as server, anyio.fail_after(MODELS_TIMEOUT):
        await table.set(SetProvider("air", "openai", server.base_url, HEADERS))
    listed = offered(table, "air/")
    assert len(listed) == MAX_MODELS and listed[:2] == ["air/gw-0", "air/gw-1"]


async def test_a_huge_model_list_is_not_read_past_its_cap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    promised = 64 * MAX_BODY_BYTES

    def huge(wire: Wire) -> None:  # promises 512 MB, and would send them
        wire.head(Content_Length=promised, Content_Type="application/json")
        for piece in json_list(10**12, lambda i: b'{"id": "gw-%d"}' % i):
            wire.send(piece * 4096)

    _, server, _ = await fallback_through(huge, caplog)
    assert "larger than 8 MB" in caplog.text
    assert server.sent < 2 * MAX_BODY_BYTES  # what the socket buffers took, at most


async def test_an_endless_or_compressed_list_is_read_up_to_its_cap_in_bounded_memory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, server, _ = await fallback_through(endless_chunks, caplog)
    assert "larger than 8 MB" in caplog.text
    assert server.sent < 3 * MAX_BODY_BYTES

    # 64 MB of whitespace in a 64 kB gzip body: decompressed by us, up to the cap only.
    caplog.clear()
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    spaces = b" " * (1 << 20)
    pieces = [squeeze.compress(b'{"data": [')] + [squeeze.compress(spaces) for _ in range(64)]
    bomb = b"".join(pieces) + squeeze.flush()
    tracemalloc.start()
    try:
        await fallback_through(answering("200 OK", bomb, Content_Encoding="gzip"), caplog)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "larger than 8 MB" in caplog.text
    assert peak < 3 * MAX_BODY_BYTES, f"peak {peak / 1e6:.1f} MB"


@pytest.mark.parametrize("dribble", [True, False], ids=["dribbled", "silent"])
async def test_a_body_that_never_ends_does_not_hold_the_set_past_its_timeout(
    dribble: bool, caplog: pytest.LogCaptureFixture
) -> None:
    def never_ends(wire: Wire) -> None:
        if dribble:  # no Content-Length: a byte now and then, forever
            wire.head(Content_Type="application/json", Connection="close")
            wire.send(b'{"data": [')
            while True:
                wire.pause(0.02)
                wire.send(b" ")
        else:  # promises a body, sends none
            wire.head(Content_Length=1000, Content_Type="application/json")
            wire.pause(60)

    _, server, took = await fallback_through(never_ends, caplog, wait=0.5)
    assert "no answer within 0.5s" in caplog.text
    assert took < 3
    if dribble:
        assert server.hung_up.is_set() or server.sent < 1000


async def test_the_log_shows_no_credential_of_the_gateways_url(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with HostileServer(answering("404 Not Found", b"")) as server:
        host = server.base_url.removeprefix("http://")
        url = f"http://editor:pw-9f2c@{host}?key=q-7a1b"
        table = routes()
        with caplog.at_level(logging.INFO):
            await table.set(SetProvider("air", "openai", url, HEADERS))
    # Ours only: the HTTP stack's request lines are silenced below WARNING (`logs.py`).
    said = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("acp_agent"))
    assert f"GET http://{host.split('/')[0]}/" in said and "HTTP 404" in said
    assert "pw-9f2c" not in said and "q-7a1b" not in said
