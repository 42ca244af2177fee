"""The agent side of an ACP connection: dispatch, validation and lazy start-up.

`initialize` is answered from hand-parsed params (no pydantic) so it never waits for the
heavy imports; it starts a background warm-up that loads the schema, the config and the
default provider's SDK in a worker thread. Every other method waits for that warm-up.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from .. import logs
from ..rpc.endpoint import Endpoint, FollowedBy
from ..rpc.errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError
from ..rpc.framing import ByteSink, ByteSource
from .handshake import ClientCapabilities, Handshake, initialize_response, parse_initialize
from .methods import NOTIFICATIONS, REQUESTS, Method

if TYPE_CHECKING:
    from ..agent import Agent
    from ..config import AgentConfig
    from ..providers.usage import Encoder

log = logging.getLogger(__name__)


async def serve(
    source: ByteSource, sink: ByteSink, *, config_path: str | None, env: Mapping[str, str]
) -> None:
    """Serve one client until its input ends."""
    endpoint = Endpoint(source, sink)
    async with anyio.create_task_group() as background:
        server = AcpServer(endpoint, background, config_path=config_path, env=env)
        await endpoint.serve(server, on_drain_timeout=server.wind_down)
        background.cancel_scope.cancel()


class AcpServer:
    def __init__(
        self,
        endpoint: Endpoint,
        background: TaskGroup,
        *,
        config_path: str | None,
        env: Mapping[str, str],
    ) -> None:
        self._endpoint = endpoint
        self._background = background
        self._config_path = config_path
        self._env = env
        self._handshake = Handshake(
            protocol_version=1, client=ClientCapabilities(), client_name=None
        )
        self._agent: Agent | None = None
        self._startup_error: str | None = None
        self._ready = anyio.Event()
        self._warming = False

    async def handle_request(self, method: str, params: Any) -> Any:
        if method == "initialize":
            self._handshake = parse_initialize(params)
            log.info("initialize from %s", self._handshake.client_name or "an unnamed client")
            # Warm up once the answer is out: the import thread would slow its writing.
            return FollowedBy(initialize_response(self._handshake), self._warm_up_after_flush)
        spec = REQUESTS.get(method)
        if spec is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")
        agent = await self._ready_agent()
        request = _parse_params(spec, params)
        result = await getattr(agent, spec.handler)(request)
        answer = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        if method == "session/new":
            return FollowedBy(answer, partial(agent.after_new_session, answer["sessionId"]))
        return answer

    async def handle_notification(self, method: str, params: Any) -> None:
        spec = NOTIFICATIONS.get(method)
        if spec is None:
            if not method.startswith("_"):
                log.info("unknown notification %s ignored", method)
            return
        if self._agent is None:
            return  # no session can exist before the agent does
        await getattr(self._agent, spec.handler)(_parse_params(spec, params))

    def wind_down(self) -> None:
        """The client is gone and work still runs: cancel every turn, which then answers
        `cancelled` as a prompt should."""
        if self._agent is not None:
            self._agent.cancel_all()

    # --- warm-up -------------------------------------------------------------------------

    async def _warm_up_after_flush(self) -> None:
        await self._endpoint.flush()
        self._start_warm_up()

    def _start_warm_up(self) -> None:
        if not self._warming:
            self._warming = True
            self._background.start_soon(self._warm_up)

    async def _ready_agent(self) -> Agent:
        self._start_warm_up()
        await self._ready.wait()
        if self._agent is None:
            raise RpcError(INTERNAL_ERROR, self._startup_error or "the agent failed to start")
        return self._agent

    async def _warm_up(self) -> None:
        try:
            loaded = await anyio.to_thread.run_sync(self._load_heavy_modules)
            if isinstance(loaded, str):
                self._startup_error = loaded
                log.error("%s", loaded)
                return
            config, encoder = loaded
            from ..agent import Agent
            from .client import ClientProxy

            client = ClientProxy(self._endpoint, self._handshake.client)
            self._agent = Agent(config, client, self._env, encoder, self._background)
        except Exception as exc:
            self._startup_error = f"the agent failed to start: {type(exc).__name__}: {exc}"
            log.exception("start-up failed")
        finally:
            self._ready.set()

    def _load_heavy_modules(self) -> tuple[AgentConfig, Encoder | None] | str:
        """The configuration and the token encoder, or what is wrong with the configuration.

        Runs in a worker thread, so the event loop keeps answering meanwhile: nothing heavy
        (pydantic, the schema, vendor SDKs) may be imported on the loop's thread.
        """
        importlib.import_module("acp_agent.protocol.schema")
        importlib.import_module("acp_agent.agent")
        from ..config import ConfigError, load_config
        from ..providers import provider_module_for

        try:
            config = load_config(self._config_path, self._env)
        except ConfigError as exc:
            return str(exc)
        if config.log_file or config.log_level != "info":
            logs.configure(config.log_level, config.log_file)
        log.info("configuration: %s; default model %s", config.source, config.default_choice)
        _, provider, _ = config.find_model(config.default_choice)
        importlib.import_module(provider_module_for(provider))
        from ..providers.usage import load_encoder

        return config, load_encoder()


def _parse_params(spec: Method, params: Any) -> Any:
    from pydantic import ValidationError

    from . import legacy, schema

    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, f"{spec.name}: params must be an object")
    if spec.name == "session/new":
        params = {"mcpServers": [], **params}  # optional in early v1 clients
    try:
        model = getattr(schema, spec.params_model, None) or getattr(legacy, spec.params_model)
        return model.model_validate(params)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'params'}: {err['msg']}"
            for err in exc.errors()
        )
        raise RpcError(INVALID_PARAMS, f"{spec.name}: invalid params: {problems}") from None
