"""A provider type for acp-agent, from a package of its own: `type = "demo"`.

It answers every prompt with `<greeting>, you said: <the prompt>`, streamed word by word,
then reports usage and ends the turn: the whole contract a real provider keeps (see
`acp_agent.providers.base.Provider`), without a network.

    [providers.hello]
    type = "demo"
    greeting = "Hi there"
    [[providers.hello.models]]
    id = "demo-1"
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from pydantic import Field

from acp_agent.config import PluginProviderConfig
from acp_agent.messages import Stop, StreamEvent, TextDelta, Usage
from acp_agent.plugins import ProviderPlugin
from acp_agent.providers import ModelRequest


class DemoConfig(PluginProviderConfig):
    """`[providers.<name>]` of type "demo": what every provider has, plus a greeting."""

    greeting: str = Field("Hello", description="The first words of every answer.")


class DemoProvider:
    def __init__(self, name: str, config: DemoConfig, env: Mapping[str, str]) -> None:
        self.name = name
        self._greeting = config.greeting

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        yield self._events(request)

    async def _events(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        said = request.messages[-1].text if request.messages else ""
        for word in f"{self._greeting}, you said: {said}".split(" "):
            yield TextDelta(word + " ")
        yield Usage(input_tokens=len(said.split()), output_tokens=len(said.split()) + 4)
        yield Stop("end_turn")

    async def aclose(self) -> None:
        pass


plugin = ProviderPlugin(create=DemoProvider, config_model=DemoConfig)
