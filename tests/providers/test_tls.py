"""TLS to a provider: set up on the first `https` request (`TlsWhenNeeded`), verified as
httpx verifies by default, and never loaded for a plain-`http` local server."""

from __future__ import annotations

import http.server
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from acp_agent.providers._http_client import new_client, verified_tls

pytestmark = pytest.mark.anyio


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(server: http.server.HTTPServer) -> Iterator[str]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def certificate(tmp_path: Path) -> Path:
    """A self-signed certificate (and its key, in the same file) for 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    pem = tmp_path / "server.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(pem), "-out", str(pem)],
        check=True, capture_output=True,
    )  # fmt: skip
    return pem


@pytest.fixture
def tls_server(certificate: Path) -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Hello)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    yield from _serve(server)


@pytest.fixture
def plain_server() -> Iterator[str]:
    yield from _serve(http.server.HTTPServer(("127.0.0.1", 0), _Hello))


class _ToTls(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", f"https://{self.server.tls_server}/")  # type: ignore[attr-defined]
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def redirect_to_tls(tls_server: str) -> Iterator[str]:
    """A plain-http server that sends every request on to `tls_server`."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _ToTls)
    server.tls_server = tls_server  # type: ignore[attr-defined]
    yield from _serve(server)


@pytest.fixture(autouse=True)
def fresh_tls() -> Iterator[None]:
    """Each test sees the CAs loaded (or not) by its own requests and environment."""
    verified_tls.cache_clear()
    yield
    verified_tls.cache_clear()


async def test_a_server_whose_certificate_no_ca_signed_is_refused(tls_server: str) -> None:
    client = new_client(5)
    try:
        with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.get(f"https://{tls_server}/")
    finally:
        await client.aclose()


async def test_a_redirect_from_plain_http_to_an_untrusted_https_server_is_refused(
    redirect_to_tls: str,
) -> None:
    """The plain-http pool never carries TLS: a redirect to https goes through the
    verified transport, whatever the first request's scheme was."""
    client = new_client(5)
    try:
        with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.get(f"http://{redirect_to_tls}/")
    finally:
        await client.aclose()


async def test_the_certificates_the_environment_names_are_trusted(
    tls_server: str, certificate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate))  # as httpx's default honours it
    client = new_client(5)
    try:
        response = await client.get(f"https://{tls_server}/")
    finally:
        await client.aclose()
    assert response.text == "hello"


async def test_a_plain_http_server_is_reached_without_loading_any_ca(
    plain_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpcore2  # where httpx gets its default context: the CAs load there

    loads: list[None] = []
    real = httpcore2.default_ssl_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        loads.append(None)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(httpcore2, "default_ssl_context", counted)
    client = new_client(5)
    try:
        first = await client.get(f"http://{plain_server}/")
        second = await client.get(f"http://{plain_server}/")
    finally:
        await client.aclose()
    assert first.text == second.text == "hello"
    assert loads == []
