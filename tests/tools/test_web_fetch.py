"""web_fetch against servers of our own on 127.0.0.1: pages, redirects, caps, timeouts,
proxies, and the permission rule for public and private hosts.

Host names are resolved by a fixed table (`FakeDns`), and 127.0.0.1 is let pass for a public
address (`judge`), so that "a public host" can be served locally; every other loopback
address (127.0.0.2) stays private, and is never connected to. No test leaves this machine.
"""

from __future__ import annotations

import dataclasses
import gzip
import ipaddress
import json
import re
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError
from tool_fakes import FakeEditor, make_context

from acp_agent.engine import ModelSettings, ModelSetup, Turn
from acp_agent.messages import (
    Message,
    Stop,
    StreamEvent,
    TextPart,
    ToolCallEnd,
    ToolCallPart,
    ToolResultPart,
    TurnEvent,
)
from acp_agent.protocol.client import _permission_options
from acp_agent.tools import (
    Decision,
    PermissionMemory,
    PermissionMode,
    PermissionQuestion,
    SessionToolState,
    ToolContext,
    ToolFailed,
    ToolOutcome,
    builtin_tools,
    decide,
)
from acp_agent.tools._web_address import IPAddress, address_reason
from acp_agent.tools.permissions import mode_refusal
from acp_agent.tools.web_fetch import DOWNLOAD_CAP_BYTES, WebFetch, WebFetchParams

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures" / "web"
PUBLIC = ipaddress.ip_address("127.0.0.1")


# --- a site, a proxy, a server that never answers -----------------------------------------


@dataclass
class Route:
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/plain"})
    body: bytes = b""


@dataclass
class Request:
    path: str
    host: str | None


class Site:
    """An HTTP server in a thread: answers by path (`default` for any other), and records
    every request it gets."""

    def __init__(self, default: Route | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.default = default
        self.requests: list[Request] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.requests.append(Request(self.path, self.headers.get("Host")))
                route = site.routes.get(self.path, site.default) or Route(404, body=b"no page")
                self.send_response(route.status)
                for name, value in route.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                self.wfile.write(route.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)
        self.thread.start()

    def url(self, path: str, host: str = "docs.test") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site() -> Iterator[Site]:
    served = Site()
    yield served
    served.close()


@pytest.fixture
def proxy() -> Iterator[Site]:
    served = Site(default=Route(body=b"answered by the proxy"))
    yield served
    served.close()


class FakeDns:
    """Names the tests use, and the lookups made."""

    TABLE: ClassVar[dict[str, tuple[str, ...]]] = {
        "docs.test": ("127.0.0.1",),
        "other.test": ("127.0.0.1",),
        "sneaky.test": ("127.0.0.2",),
        "mixed.test": ("127.0.0.1", "10.0.0.7"),
    }

    def __init__(self) -> None:
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> tuple[IPAddress, ...]:
        self.lookups.append(host)
        if host not in self.TABLE:
            raise ToolFailed(f"{host}: the name could not be resolved.")
        return tuple(ipaddress.ip_address(a) for a in self.TABLE[host])


def judge(address: IPAddress) -> str | None:
    return None if address == PUBLIC else address_reason(address)


@pytest.fixture
def dns() -> FakeDns:
    return FakeDns()


@pytest.fixture
def tool(dns: FakeDns) -> WebFetch:
    return WebFetch(resolver=dns, judge=judge)


@pytest.fixture
def ctx(root: Path) -> ToolContext:
    context = make_context(root, FakeEditor())
    return _with_env(context, {})


def _with_env(ctx: ToolContext, env: dict[str, str] | None) -> ToolContext:
    return dataclasses.replace(ctx, child_env=env)


async def fetch(tool: WebFetch, ctx: ToolContext, url: str, **arguments: Any) -> ToolOutcome:
    return await tool.run(WebFetchParams(url=url, **arguments), ctx)


def html(body: str, title: str = "A page") -> Route:
    page = f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"
    return Route(headers={"Content-Type": "text/html; charset=utf-8"}, body=page.encode())


# --- what comes back -----------------------------------------------------------------------


async def test_an_html_page_becomes_markdown_without_scripts_styles_or_navigation(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    site.routes["/guide"] = html(
        "<nav><a href='/'>Home</a> <a href='/blog'>Blog</a></nav>"
        "<script>track('visit')</script><style>.x{color:red}</style>"
        "<main><h1>Install</h1><p>Run the <a href='setup.html'>setup</a> first.</p>"
        "<pre><code class='language-python'>import acp\nacp.run()</code></pre>"
        "<table><tr><th>Option</th><th>Default</th></tr><tr><td>cache</td><td>on</td></tr>"
        "</table></main><footer>© 2024 Nobody</footer>",
        title="The guide",
    )

    outcome = await fetch(tool, ctx, site.url("/guide"))

    text = outcome.model_text
    assert "# The guide" in text
    assert "# Install" in text
    assert f"[setup](http://docs.test:{site.port}/setup.html)" in text  # absolute, to fetch
    assert "```python\nimport acp\nacp.run()\n```" in text
    assert "| Option | Default |" in text and "| cache | on |" in text
    for gone in ("Blog", "track(", "color:red", "Nobody"):
        assert gone not in text, gone
    assert outcome.title == f"Fetch {site.url('/guide')}"
    assert outcome.raw_output is not None
    assert outcome.raw_output["status"] == 200
    assert outcome.raw_output["final_url"] == site.url("/guide")
    assert outcome.raw_output["content_type"] == "text/html; charset=utf-8"


REAL_PAGES = {
    # an article with site navigation and formulas
    "wikipedia_tsne.html": (
        [
            "# t-distributed stochastic neighbor embedding",
            "Kullback\u2013Leibler divergence",
            "$p_{ij}",
        ],
        ["Personal tools", "Random article", "RLCONF", "mw.config"],
    ),
    # API documentation: code blocks and tables, a sidebar of every module
    "nodejs_os.html": (
        ["```js\nimport os from 'node:os';", "os.constants.signals", "| `SIGHUP` |"],
        ["localStorage", "About this documentation", "Table of contents"],
    ),
    # Sphinx documentation: scripts, a search box, previous/next and "this page" sidebars
    "python_idle_help.html": (
        ["# IDLE", "## Menus", "Integrated Development and Learning Environment"],
        ["Quick search", "Previous topic", "Show Source", "documentation_options"],
    ),
}


@pytest.mark.parametrize("page", list(REAL_PAGES))
async def test_real_pages_keep_their_text_code_and_tables_and_lose_scripts_and_navigation(
    tool: WebFetch, ctx: ToolContext, site: Site, page: str
) -> None:
    kept, dropped = REAL_PAGES[page]
    body = (FIXTURES / page).read_bytes()
    site.routes["/page"] = Route(headers={"Content-Type": "text/html"}, body=body)

    text = (await fetch(tool, ctx, site.url("/page"), max_bytes=400_000)).model_text

    for words in kept:
        assert words in text, words
    for words in dropped:
        assert words not in text, words


async def test_json_is_pretty_printed(tool: WebFetch, ctx: ToolContext, site: Site) -> None:
    site.routes["/api"] = Route(
        headers={"Content-Type": "application/json"}, body=b'{"name":"acp","tags":["a","b"]}'
    )

    text = (await fetch(tool, ctx, site.url("/api"))).model_text

    assert json.dumps({"name": "acp", "tags": ["a", "b"]}, indent=2) in text


async def test_text_is_decoded_by_the_charset_the_server_names(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    site.routes["/latin"] = Route(
        headers={"Content-Type": "text/plain; charset=iso-8859-1"}, body="café".encode("latin-1")
    )
    site.routes["/meta"] = Route(
        headers={"Content-Type": "text/html"},
        body=b'<html><head><meta charset="windows-1252"></head>'
        + "<body><p>naïve €</p></body></html>".encode("cp1252"),
    )
    site.routes["/broken"] = Route(body=b"ok \xff\xfe bytes")

    assert "café" in (await fetch(tool, ctx, site.url("/latin"))).model_text
    assert "naïve €" in (await fetch(tool, ctx, site.url("/meta"))).model_text
    assert "ok \ufffd\ufffd bytes" in (await fetch(tool, ctx, site.url("/broken"))).model_text


async def test_a_pdf_or_an_image_comes_back_as_a_note(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    site.routes["/paper.pdf"] = Route(
        headers={"Content-Type": "application/pdf"}, body=b"%PDF-1.7 x"
    )
    site.routes["/logo.png"] = Route(headers={"Content-Type": "image/png"}, body=b"\x89PNG\r\n")

    pdf = (await fetch(tool, ctx, site.url("/paper.pdf"))).model_text
    image = (await fetch(tool, ctx, site.url("/logo.png"))).model_text

    assert "PDF document" in pdf and "cannot pass documents" in pdf
    assert "image (image/png" in image


async def test_an_error_status_is_shown_with_its_body_and_fails_on_screen(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    outcome = await fetch(tool, ctx, site.url("/missing"))

    assert "HTTP 404" in outcome.model_text and "no page" in outcome.model_text
    assert outcome.failed


async def test_a_long_text_is_cut_with_a_note_and_read_on_from_the_offset(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    whole = "".join(f"ligne {n} é\n" for n in range(600))  # multi-byte letters at the cuts
    site.routes["/long"] = Route(
        headers={"Content-Type": "text/plain; charset=utf-8"}, body=whole.encode()
    )

    pieces = []
    offset = 0
    for _ in range(10):
        outcome = await fetch(tool, ctx, site.url("/long"), max_bytes=1000, offset=offset)
        assert outcome.raw_output is not None
        returned = outcome.raw_output["returned_bytes"]
        pieces.append(outcome.model_text.split("\n\n", 1)[1].rsplit("\n\n[Cut:", 1)[0])
        if not outcome.raw_output["truncated"]:
            break
        assert f"offset={offset + returned}" in outcome.model_text
        assert returned <= 1000
        offset += returned

    assert "".join(pieces).strip() == whole.strip()
    assert len(pieces) == len(whole.encode()) // 1000 + 1


async def test_a_download_stops_at_the_cap_with_a_note(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    site.routes["/huge"] = Route(body=b"x" * (DOWNLOAD_CAP_BYTES + 100_000))

    outcome = await fetch(tool, ctx, site.url("/huge"))

    assert outcome.raw_output is not None
    assert outcome.raw_output["bytes"] == DOWNLOAD_CAP_BYTES
    assert outcome.raw_output["download_cut"] is True
    assert "only its beginning was downloaded" in outcome.model_text


async def test_a_compressed_body_is_capped_by_what_it_unpacks_to(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    bomb = gzip.compress(b"\0" * (DOWNLOAD_CAP_BYTES * 5))  # 50 MB from ~50 KB
    site.routes["/bomb"] = Route(
        headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"}, body=bomb
    )

    outcome = await fetch(tool, ctx, site.url("/bomb"))

    assert outcome.raw_output is not None
    assert outcome.raw_output["bytes"] == DOWNLOAD_CAP_BYTES
    assert "binary content (text/plain" in outcome.model_text  # NULs are no text


async def test_a_page_nested_thousands_deep_still_gives_its_text(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    site.routes["/deep"] = html("<div>" * 5000 + "deep words" + "</div>" * 5000)

    assert "deep words" in (await fetch(tool, ctx, site.url("/deep"))).model_text


# --- redirects -----------------------------------------------------------------------------


def chain(site: Site, hops: int, host: str = "docs.test") -> None:
    for n in range(hops):
        site.routes[f"/r{n}"] = Route(302, {"Location": site.url(f"/r{n + 1}", host)})
    site.routes[f"/r{hops}"] = Route(body=b"the end")


async def test_five_redirects_are_followed_and_a_sixth_is_refused(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    chain(site, 5)
    outcome = await fetch(tool, ctx, site.url("/r0"))
    assert "the end" in outcome.model_text
    assert outcome.raw_output is not None and outcome.raw_output["redirects"] == 5
    assert f"Redirected from {site.url('/r0')}" in outcome.model_text

    chain(site, 6)
    with pytest.raises(ToolFailed, match="redirected more than 5 times"):
        await fetch(tool, ctx, site.url("/r0"))


async def test_a_redirect_to_another_public_host_is_checked_and_followed(
    tool: WebFetch, ctx: ToolContext, site: Site, dns: FakeDns
) -> None:
    site.routes["/moved"] = Route(301, {"Location": site.url("/here", "other.test")})
    site.routes["/here"] = Route(body=b"new home")

    outcome = await fetch(tool, ctx, site.url("/moved"))

    assert "new home" in outcome.model_text
    assert dns.lookups == ["docs.test", "other.test"]
    assert [r.host for r in site.requests] == [f"docs.test:{site.port}", f"other.test:{site.port}"]


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.2:{port}/admin",
        "http://sneaky.test:{port}/admin",
        "http://169.254.169.254/latest/meta-data/",
        "http://localhost:{port}/admin",
        "http://[::1]:{port}/",
        "http://2130706434:{port}/",  # 127.0.0.2, spelt as a number
    ],
)
async def test_a_redirect_from_a_public_host_to_a_private_address_is_refused(
    tool: WebFetch, ctx: ToolContext, site: Site, target: str
) -> None:
    site.routes["/go"] = Route(302, {"Location": target.format(port=site.port)})

    with pytest.raises(ToolFailed) as failure:
        await fetch(tool, ctx, site.url("/go"))

    message = str(failure.value)
    assert "call web_fetch with that URL directly" in message
    assert [r.path for r in site.requests] == ["/go"]  # the private address got nothing


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://docs.test/x", "gopher://x/"])
async def test_a_redirect_to_another_scheme_is_refused(
    tool: WebFetch, ctx: ToolContext, site: Site, target: str
) -> None:
    site.routes["/go"] = Route(302, {"Location": target})

    with pytest.raises(ToolFailed, match="only http and https"):
        await fetch(tool, ctx, site.url("/go"))


async def test_a_private_host_the_user_was_asked_about_may_redirect_to_itself_only(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    local = f"http://localhost:{site.port}"
    site.routes["/a"] = Route(302, {"Location": f"{local}/b"})
    site.routes["/b"] = Route(302, {"Location": f"http://127.0.0.1:{site.port}/c"})

    # The real judge and resolver (localhost comes from the hosts file): localhost is the
    # local host the user said yes to; 127.0.0.1 is another host, never asked about.
    with pytest.raises(ToolFailed, match=re.escape("redirected to http://127.0.0.1")):
        await WebFetch(judge=address_reason).run(WebFetchParams(url=f"{local}/a"), ctx)
    assert [r.path for r in site.requests] == ["/a", "/b"]


# --- names that lead home ------------------------------------------------------------------


async def test_a_name_resolving_to_a_private_address_fails_then_asks_every_time(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    url = site.url("/", "sneaky.test")
    params = WebFetchParams(url=url)
    memory = PermissionMemory()
    assert decide(tool, params, ctx, "ask", memory) == "ask"
    assert memory.describe(tool, params, ctx) == "web_fetch from sneaky.test"

    with pytest.raises(ToolFailed, match="call web_fetch again with the same URL to ask"):
        await tool.run(params, ctx)

    assert site.requests == []
    assert memory.describe(tool, params, ctx) is None  # no "always" any more
    memory.remember("allow_always", tool, params, ctx)
    assert decide(tool, params, ctx, "ask", memory) == "ask"
    assert decide(tool, params, ctx, "read-only", memory) == "reject"
    assert "127.0.0.2" in (mode_refusal(tool, params, ctx, "read-only") or "")


async def test_a_name_with_any_private_address_is_refused(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    with pytest.raises(ToolFailed, match=re.escape("10.0.0.7")):
        await fetch(tool, ctx, site.url("/", "mixed.test"))
    assert site.requests == []


async def test_the_request_goes_to_the_address_judged_with_the_name_as_host(
    tool: WebFetch, ctx: ToolContext, site: Site, dns: FakeDns
) -> None:
    site.routes["/"] = Route(body=b"hello")

    await fetch(tool, ctx, site.url("/"))

    # One lookup, and the connection went where it said (no second lookup to rebind).
    assert dns.lookups == ["docs.test"]
    assert site.requests == [Request("/", f"docs.test:{site.port}")]


# --- limits and refusals -------------------------------------------------------------------


async def test_a_server_that_never_answers_times_out(tool: WebFetch, ctx: ToolContext) -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # listens, never accepts
    try:
        port = silent.getsockname()[1]
        with pytest.raises(ToolFailed, match="Timed out after 1 s"):
            await fetch(tool, ctx, f"http://docs.test:{port}/", timeout_seconds=1)
    finally:
        silent.close()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("ftp://ftp.example.org/pub", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("example.com/docs", "give a full URL"),
        ("http:///nohost", "names no host"),
        ("https://exa mple.com\n/", "not a valid URL"),
    ],
)
def test_anything_but_an_http_url_is_refused_before_any_question(url: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        WebFetchParams(url=url)


def test_the_limits_are_bounded() -> None:
    for arguments in (
        {"max_bytes": 10},
        {"max_bytes": 10**9},
        {"timeout_seconds": 0.1},
        {"timeout_seconds": 600},
        {"offset": -1},
    ):
        with pytest.raises(ValidationError):
            WebFetchParams(url="https://docs.test/", **arguments)


async def test_a_name_that_does_not_resolve_is_a_clear_error(
    tool: WebFetch, ctx: ToolContext
) -> None:
    with pytest.raises(ToolFailed, match="could not be resolved"):
        await fetch(tool, ctx, "https://nowhere.test/")


# --- proxies -------------------------------------------------------------------------------


async def test_the_child_environment_proxy_carries_the_request(
    tool: WebFetch, ctx: ToolContext, proxy: Site, dns: FakeDns
) -> None:
    env = {"HTTP_PROXY": f"http://127.0.0.1:{proxy.port}"}

    outcome = await fetch(tool, _with_env(ctx, env), "http://docs.test:1/page?q=1")

    assert "answered by the proxy" in outcome.model_text
    assert proxy.requests == [Request("http://docs.test:1/page?q=1", "docs.test:1")]
    assert dns.lookups == []  # the proxy resolves names


async def test_no_proxy_sends_the_request_directly(
    tool: WebFetch, ctx: ToolContext, proxy: Site, site: Site
) -> None:
    site.routes["/"] = Route(body=b"direct")
    env = {"http_proxy": f"http://127.0.0.1:{proxy.port}", "no_proxy": "example.org,.test"}

    outcome = await fetch(tool, _with_env(ctx, env), site.url("/"))

    assert "direct" in outcome.model_text
    assert proxy.requests == []


async def test_the_agents_own_proxy_settings_are_not_used(
    tool: WebFetch, ctx: ToolContext, proxy: Site, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    site.routes["/"] = Route(body=b"direct")

    outcome = await fetch(tool, ctx, site.url("/"))  # the child environment has none

    assert "direct" in outcome.model_text
    assert proxy.requests == []


# --- the permission rule -------------------------------------------------------------------

WEB_FETCH = builtin_tools()["web_fetch"]
PUBLIC_URL = "https://docs.python.org/3/library/"
PRIVATE_URLS = [
    "http://127.0.0.1:8080/",
    "http://localhost/admin",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://10.1.2.3/",
    "http://192.168.0.1/",
    "http://[::1]/",
    "http://[fe80::1]/",
    "http://[fd00:ec2::254]/",
    "http://[::ffff:127.0.0.1]/",
    "http://0.0.0.0:9000/",
    "http://2130706433/",
    "http://127.1/",
    "http://printer.local/",
]
EXPECTED = {
    #               public   private
    "ask": ("ask", "ask"),
    "accept-edits": ("ask", "ask"),
    "bypass": ("allow", "allow"),
    "read-only": ("ask", "reject"),
}


@pytest.fixture
def policy_ctx(root: Path) -> ToolContext:
    return make_context(root, FakeEditor(), state=SessionToolState())


@pytest.mark.parametrize("mode", list(EXPECTED))
@pytest.mark.parametrize("private", PRIVATE_URLS)
def test_each_mode_decides_public_and_private_hosts(
    policy_ctx: ToolContext, mode: PermissionMode, private: str
) -> None:
    public_params = WEB_FETCH.params_model.model_validate({"url": PUBLIC_URL})
    private_params = WEB_FETCH.params_model.model_validate({"url": private})
    memory = PermissionMemory()

    got = (
        decide(WEB_FETCH, public_params, policy_ctx, mode, memory),
        decide(WEB_FETCH, private_params, policy_ctx, mode, memory),
    )

    assert got == EXPECTED[mode]
    # A public host may be allowed for good, a private one never.
    assert memory.describe(WEB_FETCH, public_params, policy_ctx) == "web_fetch from docs.python.org"
    assert memory.describe(WEB_FETCH, private_params, policy_ctx) is None
    assert [kind for kind, _ in _permission_options(None)] == ["allow_once", "reject_once"]


def test_always_allow_covers_that_host_only(policy_ctx: ToolContext) -> None:
    memory = PermissionMemory()
    docs = WEB_FETCH.params_model.model_validate({"url": "https://docs.python.org/3/"})
    other_page = WEB_FETCH.params_model.model_validate({"url": "https://docs.python.org/2/x"})
    elsewhere = WEB_FETCH.params_model.model_validate({"url": "https://evil.example/"})

    memory.remember("allow_always", WEB_FETCH, docs, policy_ctx)

    assert memory.allowed == {"tool:web_fetch:docs.python.org"}
    assert decide(WEB_FETCH, other_page, policy_ctx, "ask", memory) == "allow"
    assert decide(WEB_FETCH, elsewhere, policy_ctx, "ask", memory) == "ask"


def test_read_only_refuses_a_private_host_with_a_reason(policy_ctx: ToolContext) -> None:
    params = WEB_FETCH.params_model.model_validate({"url": "http://169.254.169.254/"})

    reason = mode_refusal(WEB_FETCH, params, policy_ctx, "read-only")

    assert reason is not None and "metadata" in reason and "read-only" in reason
    assert mode_refusal(WEB_FETCH, params, policy_ctx, "ask") is None


def test_a_look_alike_host_is_asked_about_in_its_ascii_form(policy_ctx: ToolContext) -> None:
    cyrillic_a = "\u0430"
    params = WEB_FETCH.params_model.model_validate({"url": f"https://{cyrillic_a}pple.com/"})

    assert PermissionMemory().describe(WEB_FETCH, params, policy_ctx) == (
        "web_fetch from xn--pple-43d.com"
    )
    assert WEB_FETCH.title(params, policy_ctx) == "Fetch https://xn--pple-43d.com/"


async def test_the_question_for_a_private_host_says_why(policy_ctx: ToolContext) -> None:
    params = WEB_FETCH.params_model.model_validate({"url": "http://localhost:3000/"})

    preview = await WEB_FETCH.preview(params, policy_ctx)

    assert "localhost is this machine (localhost)" in preview[0].text  # type: ignore[union-attr]


# --- through a turn: what the user is asked, what the model reads --------------------------


class OneFetchModel:
    """Asks for one web_fetch of `url`, then ends the turn."""

    name = "scripted"

    def __init__(self, url: str) -> None:
        call = ToolCallEnd(ToolCallPart("c1", "web_fetch", {"url": url}))
        self.replies: list[list[StreamEvent]] = [[call, Stop("tool_use")], [Stop("end_turn")]]

    @asynccontextmanager
    async def stream(self, request: Any) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        reply = self.replies.pop(0)

        async def events() -> AsyncIterator[StreamEvent]:
            for event in reply:
                yield event

        yield events()


class Session:
    """The engine's host and choices: records questions, answers them with `decision`."""

    def __init__(self, model: OneFetchModel, mode: PermissionMode, decision: Decision) -> None:
        self.provider = model
        self.mode = mode
        self.settings = ModelSettings(model="m", system_prompt="test", context_window=10_000)
        self.decision = decision
        self.questions: list[PermissionQuestion] = []

    async def model_setup(self) -> ModelSetup:
        return ModelSetup(self.provider, self.settings)  # type: ignore[arg-type]

    async def emit(self, event: TurnEvent) -> None:
        pass

    def keep(self, message: Message, message_id: str | None) -> None:
        pass

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        self.questions.append(question)
        return self.decision


async def run_turn(
    tool: WebFetch, ctx: ToolContext, url: str, mode: PermissionMode, decision: Decision
) -> tuple[Session, ToolResultPart]:
    session = Session(OneFetchModel(url), mode, decision)
    turn = Turn(
        choices=session,  # type: ignore[arg-type]
        history=[],
        tools={"web_fetch": tool},
        context=ctx,
        host=session,  # type: ignore[arg-type]
    )
    await turn.run(Message("user", [TextPart("fetch it")]))
    [result] = [p for m in turn.history for p in m.parts if isinstance(p, ToolResultPart)]
    return session, result


async def test_the_user_is_asked_about_the_url_with_always_for_its_host(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    site.routes["/"] = Route(body=b"the page")

    session, result = await run_turn(tool, ctx, site.url("/"), "ask", "allow_once")

    [question] = session.questions
    assert question.title == f"Fetch {site.url('/')}"
    assert question.kind == "fetch"
    assert question.always_scope == "web_fetch from docs.test"
    assert "the page" in result.text and not result.is_error


async def test_a_private_address_is_asked_about_without_always_and_a_no_sends_nothing(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    url = f"http://127.0.0.2:{site.port}/"

    session, result = await run_turn(tool, ctx, url, "accept-edits", "reject_once")

    [question] = session.questions
    assert question.always_scope is None
    assert "a loopback address" in question.content[0].text  # type: ignore[union-attr]
    assert result.is_error and site.requests == []


async def test_read_only_refuses_a_private_address_and_tells_the_model_why(
    tool: WebFetch, ctx: ToolContext, site: Site
) -> None:
    url = f"http://169.254.169.254:{site.port}/latest/meta-data/"

    session, result = await run_turn(tool, ctx, url, "read-only", "allow_once")

    assert session.questions == []
    assert result.is_error
    assert "a cloud metadata address" in result.text and "read-only" in result.text
