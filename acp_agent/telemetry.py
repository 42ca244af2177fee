"""Optional tracing: an OpenTelemetry span for each turn, model request and tool call, named
and attributed as the GenAI semantic conventions say (`invoke_agent`, `chat`, `execute_tool`).

Off until turned on, and then nothing of OpenTelemetry is imported: `span()` hands out a
do-nothing span. Two ways on:

- `from_environment(env)`, the agent's own: when a standard exporter variable is set
  (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), spans go to that
  OTLP endpoint. Without the `[otel]` extra or an OTLP exporter package it logs one warning
  and the agent runs untraced: tracing must never be why an agent does not start.
- `configure(tracer_provider)`, for a program embedding the agent, and for tests (an
  in-memory exporter).

Spans are never made current across an `await` they do not own: a model request's span
lives in an async generator, where a context attached at one `yield` could be detached in
another context. A turn's span is current for the turn (its task), so model requests and
tool calls become its children.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, Protocol

log = logging.getLogger(__name__)

TRACER_NAME = "acp_agent"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_EXPORTERS = {
    "grpc": ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter", "grpc"),
    "http/protobuf": ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "http"),
}

Attribute = str | bool | int | float | tuple[str, ...]
SpanKind = Literal["client", "internal"]

_tracer: Any = None
"""The OpenTelemetry tracer once tracing is on; None: off."""
_own_provider: Any = None
"""The tracer provider `from_environment` made, which `shutdown` flushes."""


class Span(Protocol):
    def set(self, attributes: Mapping[str, Attribute | None]) -> None:
        """Add attributes (None values are left out)."""
        ...

    def fail(self, error_type: str) -> None:
        """Mark the span failed, `error_type` as the conventions' `error.type`."""
        ...


class _Off:
    def set(self, attributes: Mapping[str, Attribute | None]) -> None:
        pass

    def fail(self, error_type: str) -> None:
        pass


OFF: Span = _Off()


class _Live:
    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, attributes: Mapping[str, Attribute | None]) -> None:
        self._span.set_attributes({k: v for k, v in attributes.items() if v is not None})

    def fail(self, error_type: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR))


def enabled() -> bool:
    return _tracer is not None


def configure(tracer_provider: Any) -> None:
    """Trace to `tracer_provider` (an OpenTelemetry `TracerProvider`); None turns it off."""
    global _tracer
    _tracer = None if tracer_provider is None else tracer_provider.get_tracer(TRACER_NAME)


def from_environment(env: Mapping[str, str]) -> bool:
    """Turn tracing on when the standard OTLP variables ask for it; whether it is on.

    The exporter reads its endpoint, headers and protocol from those same variables.
    """
    global _own_provider
    wanted = next((name for name in ENDPOINT_VARIABLES if env.get(name, "").strip()), None)
    disabled = env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    if wanted is None or disabled or env.get("OTEL_TRACES_EXPORTER", "").strip() == "none":
        return False
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    ) or "http/protobuf"
    module, extra = _EXPORTERS.get(protocol.strip(), _EXPORTERS["http/protobuf"])
    try:
        import importlib

        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        exporter = importlib.import_module(module).OTLPSpanExporter()
    except ImportError as exc:
        package = f"opentelemetry-exporter-otlp-proto-{extra}"
        missing = (
            f"no OTLP exporter is installed ({exc}): install {package}"
            if (exc.name or "").startswith("opentelemetry.exporter")
            else f"OpenTelemetry is not installed ({exc}): install the `otel` extra and {package}"
        )
        log.warning("tracing is off: %s is set, but %s", wanted, missing)
        return False
    except Exception as exc:  # a malformed variable the exporter refuses
        log.warning("tracing is off: the OTLP exporter could not be set up: %s", exc)
        return False
    from . import __version__

    resource = Resource.create({"service.name": "acp-agent", "service.version": __version__})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    configure(provider)
    _own_provider = provider
    log.info("tracing to %s (%s)", env[wanted].strip(), wanted)
    return True


def shutdown() -> None:
    """Send the spans still queued (bounded by the exporter's timeout): for an exit that
    skips the interpreter's own clean-up (`os._exit`)."""
    global _own_provider
    provider, _own_provider = _own_provider, None
    if provider is not None:
        try:
            provider.shutdown()
        except Exception as exc:  # an exit must go on whatever the exporter does
            log.warning("tracing: the last spans were not sent: %s", exc)


@contextmanager
def span(
    name: str,
    attributes: Mapping[str, Attribute | None],
    *,
    kind: SpanKind = "internal",
    current: bool = False,
) -> Iterator[Span]:
    """A span around the block; `current`: its children start inside it (only where the
    block is one coroutine's, never across a generator's `yield`).

    An exception leaving the block fails the span with its class name, unless the block
    already said why; cancellation and a closed generator only end it.
    """
    if _tracer is None:
        yield OFF
        return
    from opentelemetry import trace

    otel_kind = trace.SpanKind.CLIENT if kind == "client" else trace.SpanKind.INTERNAL
    clean = {k: v for k, v in attributes.items() if v is not None}
    if current:
        with _tracer.start_as_current_span(
            name, kind=otel_kind, attributes=clean, end_on_exit=True, **_QUIET
        ) as otel_span:
            yield from _guarded(otel_span)
    else:
        otel_span = _tracer.start_span(name, kind=otel_kind, attributes=clean, **_QUIET)
        try:
            yield from _guarded(otel_span)
        finally:
            otel_span.end()


_QUIET = {"record_exception": False, "set_status_on_exception": False}


def _guarded(otel_span: Any) -> Iterator[Span]:
    live = _Live(otel_span)
    try:
        yield live
    except Exception as exc:
        if "error.type" not in (getattr(otel_span, "attributes", None) or {}):
            live.fail(type(exc).__name__)
        raise


__all__ = ["OFF", "Span", "configure", "enabled", "from_environment", "shutdown", "span"]
