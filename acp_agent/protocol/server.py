"""The agent side of an ACP connection: dispatch, validation and lazy start-up.

`initialize` and `authenticate` are answered from hand-parsed params (no pydantic) so they
never wait for the heavy imports or the start-up. Once `initialize`'s answer is written,
the `Loader` the composition root gave us runs in a worker thread (config, sessions, the
default provider) and returns how to start the agent; every other method waits for that.
The schema models come last, in the background (see `schema`). The server knows the agent
only as `methods.AcpAgent`.

Every error it answers carries its readable reason in `data.details` as well: some clients
(Toad, acpx) show only that.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from ..rpc.endpoint import Endpoint, FollowedBy, Work, short_failure
from ..rpc.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, RpcError
from ..rpc.framing import ByteSink, ByteSource
from .dialect import V1, Dialect, dialect_for, negotiate
from .handshake import ClientCapabilities, Handshake, answer_authenticate

if TYPE_CHECKING:
    # Not at import time: the client proxy loads the schema, which `initialize` must not
    # wait for.
    from .client import ClientProxy
    from .methods import AcpAgent, PromptPlace
    from .v2_prompts import V2Prompts

log = logging.getLogger(__name__)

CLOSE_SECONDS = 2.0
SCHEMA_WARM_DELAY = 1.0
"""Seconds after start-up before the schema models load in the background."""

Startup = Callable[["ClientProxy", TaskGroup], "AcpAgent"]
"""Builds the agent on the event loop, given the client and the connection's task group."""
Loader = Callable[[], Startup | str]
"""Runs in a worker thread: imports and loads what the agent needs; returns how to start
it, or what is wrong (a config error), which then answers every later request."""


async def serve(
    source: ByteSource, sink: ByteSink, *, load: Loader, greeted: Handshake | None = None
) -> None:
    """Serve one client until its input ends; `greeted`: its `initialize` was answered
    already (`dialect.answer_first_initialize`), so start-up begins at once."""
    endpoint = Endpoint(source, sink)
    async with anyio.create_task_group() as background:
        server = AcpServer(endpoint, background, load)
        if greeted is not None:
            server.greeted(greeted)
        await endpoint.serve(server, on_drain_timeout=server.wind_down)
        background.cancel_scope.cancel()
    await server.aclose()


class AcpServer:
    def __init__(self, endpoint: Endpoint, background: TaskGroup, load: Loader) -> None:
        self._endpoint = endpoint
        self._background = background
        self._load = load
        self._handshake = Handshake(
            protocol_version=1, client=ClientCapabilities(), client_name=None
        )
        self._dialect: Dialect = V1
        """The connection's protocol version, chosen by `initialize` (see `dialect`)."""
        self._spoken = False
        """An `initialize` was negotiated: the dialect is fixed for the connection."""
        self._agent: AcpAgent | None = None
        self._client: ClientProxy | None = None
        self._v2_prompts: V2Prompts | None = None
        """v2 only: its prompts answer at insertion (see `v2_prompts`)."""
        self._startup_error: str | None = None
        self._ready = anyio.Event()
        self._warming = False

    def receive_request(self, method: str, params: Any) -> Work:
        place = None
        if method == "initialize" and not self._spoken:
            # In effect as its frame is read: the next frame may be a batch, only v2 takes.
            # A repeated `initialize` is answered as the first was: the client proxy and the
            # agent were built for that dialect and those capabilities.
            with contextlib.suppress(RpcError):  # its work answers the error
                self._speak(negotiate(params))
        if method == "session/prompt" and self._agent is not None:
            # A cancel in the next frame must find this prompt (ARCHITECTURE rule 10).
            place = self._agent.queue_prompt(_field(params, "sessionId"))
        return partial(self.handle_request, method, params, place)

    async def handle_request(
        self, method: str, params: Any, place: PromptPlace | None = None
    ) -> Any:
        try:
            return await self._handle_request(method, params, place)
        except RpcError as exc:
            raise with_details(exc) from None
        except Exception as exc:
            # What the endpoint would answer, with the details a client shows.
            log.exception("%s failed", method[:100])
            failure = short_failure(method, exc)
            raise RpcError(INTERNAL_ERROR, failure, {"details": failure}) from None

    async def _handle_request(self, method: str, params: Any, place: PromptPlace | None) -> Any:
        if method == "initialize":
            negotiate(params)  # negotiated as read (`receive_request`); here the errors
            answer = self._dialect.initialize_response(self._handshake)
            # Warm up once the answer is out: the import thread would slow its writing.
            return FollowedBy(answer, self._warm_up_after_answer)
        if method == self._dialect.login_method:
            answer = answer_authenticate(self._handshake, params)  # no waiting for start-up
            return FollowedBy(answer, self._auth_changed)
        from .requests import read_params

        spec = self._dialect.request_method(method)
        if spec is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")
        try:
            agent = await self._ready_agent()
            request = read_params(method, spec.read, params)
        except BaseException:
            if place is not None:  # the prompt never reached its queue
                place.release()
            raise
        if method == "session/prompt" and self._v2_prompts is not None:
            key = _field(params, "idempotencyKey")  # its place is theirs to release now
            answer = await self._v2_prompts.prompt(
                agent, request, place, key if isinstance(key, str) else None
            )
        elif method == "session/prompt":
            try:
                answer = await agent.prompt(request, place)
            finally:
                if place is not None:
                    place.release()
        elif method == "session/resume" and self._v2_prompts is not None:
            from .v2_prompts import resume

            assert self._client is not None  # set with the agent
            answer = await resume(agent, self._client, request, params)
        elif method == "session/status" and self._client is not None:
            # What this connection was last told of the session, where it was told.
            answer = self._client.states.status(request.session_id, await spec.call(agent, request))
        else:
            answer = await spec.call(agent, request)
        return self._in_dialect(method, answer)

    async def _auth_changed(self) -> None:
        """After a login: `auth/status_update`, once the agent that knows the keys is up."""
        with contextlib.suppress(RpcError):  # it failed to start: every request says so
            agent = await self._ready_agent()
            await agent.auth_changed()

    def greeted(self, handshake: Handshake) -> None:
        self._speak(handshake)
        self._start_warm_up()

    def _speak(self, handshake: Handshake) -> None:
        """Take the negotiated handshake: its dialect for the rest of the connection."""
        self._handshake = handshake
        self._dialect = dialect_for(handshake)
        self._spoken = True
        # Batches are read before the next frame: on from the frame after `initialize`.
        self._endpoint.accept_batches = self._dialect.batches
        log.info(
            "initialize from %s (ACP v%d)",
            handshake.client_name or "an unnamed client",
            self._dialect.version,
        )

    def _in_dialect(self, method: str, answer: Any) -> Any:
        if isinstance(answer, FollowedBy):
            return FollowedBy(self._dialect.answer(method, answer.result), answer.follow_up)
        return self._dialect.answer(method, answer)

    async def handle_notification(self, method: str, params: Any) -> None:
        from .methods import NOTIFICATIONS
        from .requests import read_params

        if method == "mcp/message":
            self._mcp_notification(params)
            return
        spec = NOTIFICATIONS.get(method)
        if spec is None:
            if not method.startswith("_"):
                log.info("unknown notification %s ignored", method)
            return
        if self._agent is None:
            return  # no session can exist before the agent does
        await spec.call(self._agent, read_params(method, spec.read, params))

    def _mcp_notification(self, params: Any) -> None:
        """The editor's `mcp/message`: to the request of ours (MCP over ACP) it names."""
        from .mcp_messages import notification
        from .requests import read_params

        if self._client is None:
            return  # no request of ours can be active yet
        try:
            message = read_params("mcp/message", notification, params)
        except RpcError as exc:
            log.warning("%s", exc.message)
            return
        self._client.editor_mcp.deliver(message)

    def wind_down(self) -> None:
        """The client is gone and work still runs: cancel every turn, which then answers
        `cancelled` as a prompt should."""
        if self._agent is not None:
            self._agent.cancel_all()

    async def aclose(self) -> None:
        """Release what the agent holds open (providers' HTTP clients); bounded."""
        if self._agent is not None:
            with anyio.move_on_after(CLOSE_SECONDS):
                await self._agent.aclose()

    # --- warm-up -------------------------------------------------------------------------

    async def _warm_up_after_answer(self) -> None:
        self._start_warm_up()

    def _start_warm_up(self) -> None:
        if not self._warming:
            self._warming = True
            self._background.start_soon(self._warm_up)

    async def _ready_agent(self) -> AcpAgent:
        self._start_warm_up()
        await self._ready.wait()
        if self._agent is None:
            raise RpcError(INTERNAL_ERROR, self._startup_error or "the agent failed to start")
        return self._agent

    async def _warm_up(self) -> None:
        try:
            # Nothing heavy (pydantic, the schema, vendor SDKs) may load on the loop's thread.
            started = await anyio.to_thread.run_sync(self._load)
            if isinstance(started, str):
                self._startup_error = started
                log.error("%s", started)
                return
            from .client import ClientProxy

            client = ClientProxy(self._endpoint, self._handshake.client, self._dialect)
            self._client = client
            if self._dialect.version >= 2:
                from .v2_prompts import V2Prompts

                self._v2_prompts = V2Prompts(client, self._background)
            self._agent = started(client, self._background)
            self._background.start_soon(self._warm_schema, self._agent)
        except Exception as exc:
            self._startup_error = f"the agent failed to start: {type(exc).__name__}: {exc}"
            log.exception("start-up failed")
        finally:
            self._ready.set()

    async def _warm_schema(self, agent: AcpAgent) -> None:
        """Load the schema models while the editor is still idle, so that the first request
        that needs them (a file read through the editor, a terminal, a mode change) does
        not wait ~0.5 s for them; not sooner, or it would slow the first session and chunk,
        nor while MCP servers start: the import's CPU would slow theirs, which the next
        prompt waits for."""
        await anyio.sleep(SCHEMA_WARM_DELAY)
        log.debug("the schema models load once no MCP server is still connecting")
        await agent.settled()
        from . import schema

        await anyio.to_thread.run_sync(schema.load, abandon_on_cancel=True)


def with_details(error: RpcError) -> RpcError:
    """`error` with its message in `data.details` (added to object data, set when there is
    none); other data is left as it is."""
    data = error.data
    if data is None:
        data = {"details": error.message}
    elif isinstance(data, dict) and "details" not in data:
        data = {**data, "details": error.message}
    else:
        return error
    return RpcError(error.code, error.message, data)


def _field(params: Any, name: str) -> Any:
    return params.get(name) if isinstance(params, dict) else None
