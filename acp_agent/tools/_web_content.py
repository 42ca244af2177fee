"""What web_fetch makes of a body: Markdown for HTML, JSON pretty-printed, other text as it
is, and a note in place of what the model cannot read here (PDFs, images, other binaries).

HTML becomes Markdown with markdownify over a BeautifulSoup tree (both imported only when a
page is converted). Chosen over trafilatura and html2text on three real pages (a Wikipedia
article, a Node.js API page, a news page heavy with scripts): it keeps code blocks fenced
(with their language), tables as Markdown tables, formulas and every part of the main text,
where trafilatura's article extraction dropped formulas and table cells and html2text gave
unfenced code and no way to drop navigation. Navigation is our part, done on the tree
before converting: scripts, styles, navigation and page chrome are dropped, and the page's
`main` element (or its only `article`) is kept when there is one.

Text is decoded by the charset the headers give, else the byte order mark, else (HTML) the
page's own `<meta charset>`, else UTF-8; bytes that do not decode are replaced, never fatal.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias
from urllib.parse import urljoin

if TYPE_CHECKING:
    from bs4 import BeautifulSoup, Tag

Kind: TypeAlias = Literal["html", "json", "text", "pdf", "image", "binary"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
JSON_TYPES = frozenset({"application/json", "text/json"})
TEXT_APPLICATION_TYPES = frozenset(
    {
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/toml",
        "application/yaml",
        "application/x-yaml",
        "application/x-sh",
        "application/sql",
        "application/graphql",
        "application/x-ndjson",
        "application/jsonl",
    }
)
UNTYPED = frozenset({"", "application/octet-stream", "binary/octet-stream"})
"""What servers send when they do not know: the bytes decide."""

DROPPED_TAGS = (
    "script",
    "style",
    "noscript",
    "template",
    "link",
    "meta",
    "svg",
    "canvas",
    "iframe",
    "frame",
    "frameset",
    "object",
    "embed",
    "nav",
    "aside",
    "button",
    "input",
    "select",
    "textarea",
    "dialog",
)
"""Never text for the reader. Not `form`: some sites wrap the whole page in one."""
DROPPED_SELECTOR = (
    '[role="navigation"], [role="banner"], [role="contentinfo"], [role="search"], '
    '[aria-hidden="true"], [hidden]'
)
CHROME_TAGS = ("header", "footer")
"""Page chrome when outside the page's main content; an article's own header (its
headline, its byline) stays."""
CODE_CLASS_PREFIXES = ("language-", "lang-", "highlight-source-", "highlight-")

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_HTML_START = re.compile(rb"\s*(<!--.*?-->\s*)*<(!doctype\s+html|html|head|body)\b", re.I | re.S)
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_DISPLAYSTYLE = re.compile(r"^\{\\displaystyle\s*(.*)\}$", re.S)


@dataclass(frozen=True, slots=True)
class Rendered:
    kind: Kind
    media_type: str
    text: str
    """What the model reads of the body (before the size cap); a note for what it cannot."""


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def render(body: bytes, content_type: str, url: str) -> Rendered:
    """The body as text for the model. CPU-bound for a large HTML page: run it in a worker
    thread."""
    kind, media = classify(body, content_type)
    if kind == "html":
        text = decode(body, content_type, html=True)
        return Rendered(kind, media, html_to_markdown(text, url))
    if kind == "json":
        return Rendered(kind, media, _pretty_json(decode(body, content_type)))
    if kind == "text":
        text = decode(body, content_type)
        if "\0" in text[:4096]:  # declared as text, but binary (UTF-16 would have decoded)
            return Rendered("binary", media, _note("binary", media, len(body)))
        return Rendered(kind, media, text)
    return Rendered(kind, media, _note(kind, media, len(body)))


def classify(body: bytes, content_type: str) -> tuple[Kind, str]:
    """What the body is, by its declared type (`text/html`), else by its first bytes."""
    media = media_type(content_type)
    if media in HTML_TYPES:
        return "html", media
    if media in JSON_TYPES or media.endswith("+json"):
        return "json", media
    if media == "application/pdf":
        return "pdf", media
    if media == "image/svg+xml":
        return "text", media
    if media.startswith("image/"):
        return "image", media
    if media.startswith("text/") or media in TEXT_APPLICATION_TYPES or media.endswith("+xml"):
        return "text", media
    if media in UNTYPED:
        return _sniff(body), media
    return "binary", media


def _sniff(body: bytes) -> Kind:
    head = body[:1024].removeprefix(codecs.BOM_UTF8)
    if _HTML_START.match(head):
        return "html"
    if head.startswith(b"%PDF-"):
        return "pdf"
    if b"\0" in head:
        return "binary"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sniff
            return "binary"
    return "text"


def decode(body: bytes, content_type: str, *, html: bool = False) -> str:
    return body.decode(charset_of(body, content_type, html=html), errors="replace")


def charset_of(body: bytes, content_type: str, *, html: bool = False) -> str:
    """The headers' charset, else the byte order mark's, else (HTML) the page's own, else
    UTF-8; names Python does not know are passed over."""
    declared = _charset_parameter(content_type)
    candidates: list[str | None] = [declared, _bom_charset(body)]
    if html:
        found = _META_CHARSET.search(body[:4096])
        candidates.append(found.group(1).decode("ascii", "replace") if found else None)
    for name in candidates:
        if name and _known_codec(name):
            return name
    return "utf-8"


def _charset_parameter(content_type: str) -> str | None:
    for parameter in content_type.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def _bom_charset(body: bytes) -> str | None:
    if body.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    return None


def _known_codec(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True


def _pretty_json(text: str) -> str:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return f"[not valid JSON; shown as sent]\n{text}"
    return json.dumps(value, indent=2, ensure_ascii=False)


def _note(kind: Kind, media: str, size: int) -> str:
    if kind == "pdf":
        return (
            f"[The URL is a PDF document ({size:,} bytes). web_fetch cannot pass documents "
            "to the model, only text: look for an HTML or text version of it.]"
        )
    if kind == "image":
        return f"[The URL is an image ({media}, {size:,} bytes); web_fetch passes on text only.]"
    return f"[The URL is binary content ({media or 'no type given'}, {size:,} bytes), not text.]"


# --- HTML ----------------------------------------------------------------------------------


def html_to_markdown(html: str, url: str) -> str:
    """The page as Markdown: its title as a heading, then its main content, links made
    absolute (so the model can fetch them), without scripts, styles and navigation."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    title = " ".join(soup.title.get_text(" ").split()) if soup.title else ""
    base = _base_url(soup, url)
    _drop_chrome(soup)
    root = _main_content(soup)
    _absolute_links(root, base)
    _formulas_as_tex(root)
    _separate_code_flavours(root)
    try:
        body = _markdown(root)
    except RecursionError:
        # markdownify recurses per element: a page nested thousands deep gets its text.
        body = "[The page is nested too deeply to convert; its text follows.]\n\n" + (
            root.get_text("\n")
        )
    body = _BLANK_LINES.sub("\n\n", body).strip()
    return f"# {title}\n\n{body}" if title else body


def _markdown(root: Tag | BeautifulSoup) -> str:
    from markdownify import MarkdownConverter

    converter = MarkdownConverter(
        heading_style="ATX",
        bullets="-",
        code_language_callback=_code_language,
        # The model reads the Markdown as text, unrendered: escapes would only be noise
        # (`snake\_case`, `x\_{1}` in TeX).
        escape_asterisks=False,
        escape_underscores=False,
        escape_misc=False,
    )
    return converter.convert_soup(root)


def _base_url(soup: BeautifulSoup, url: str) -> str:
    base = soup.find("base", href=True)
    href = base.get("href") if base is not None else None
    return urljoin(url, href) if isinstance(href, str) else url


def _drop_chrome(soup: BeautifulSoup) -> None:
    for tag in soup(DROPPED_TAGS):
        tag.decompose()
    for tag in soup.select(DROPPED_SELECTOR):
        tag.decompose()
    for tag in soup(CHROME_TAGS):
        if tag.find_parent(["main", "article"]) is None:
            tag.decompose()


def _main_content(soup: BeautifulSoup) -> Tag | BeautifulSoup:
    """The page's one `main` (or `role=main`) element, else its one `article`, else the
    body: what the page says is its content, when it says so unambiguously."""
    for selector in ("main, [role=main]", "article"):
        found = soup.select(selector)
        if len(found) == 1:
            return found[0]
    return soup.body or soup


def _absolute_links(root: Tag | BeautifulSoup, base: str) -> None:
    for link in root.find_all("a", href=True):
        href = link.get("href")
        if "title" in link.attrs:
            del link["title"]  # mostly the link text again, for a hover
        if not isinstance(href, str) or href.startswith("#"):
            continue
        if href.strip().lower().startswith(("javascript:", "data:", "vbscript:")):
            link.unwrap()
            continue
        link["href"] = urljoin(base, href)
    for image in root.find_all("img"):
        source = image.get("src")
        alt = image.get("alt")
        if not isinstance(source, str) or source.startswith("data:"):
            # An inline image is kilobytes of base64 the model cannot see: its words stay.
            image.replace_with(alt if isinstance(alt, str) else "")
        else:
            image["src"] = urljoin(base, source)


def _formulas_as_tex(root: Tag | BeautifulSoup) -> None:
    """MathML as its TeX source (`$x_1$`), which Wikipedia and MathJax pages carry: the
    markup itself would become a column of stray symbols."""
    for formula in root.find_all("math"):
        annotation = formula.find("annotation", encoding="application/x-tex")
        alttext = formula.get("alttext")
        tex = annotation.get_text() if annotation is not None else alttext
        if isinstance(tex, str) and tex.strip():
            tex = tex.strip()
            tex = match.group(1).strip() if (match := _DISPLAYSTYLE.match(tex)) else tex
            formula.replace_with(f"${tex}$")


def _separate_code_flavours(root: Tag | BeautifulSoup) -> None:
    """Code blocks holding several `code` elements (one per language flavour, of which the
    page shows one) keep them on separate lines."""
    for block in root.find_all("pre"):
        codes = block.find_all("code", recursive=False)
        for code in codes[1:]:
            code.insert_before("\n")


def _code_language(element: Tag) -> str | None:
    """The language a code block names in its class (`language-js`, `highlight-source-py`)."""
    inner = element.find("code")
    for node in (element, inner):
        if node is None or not hasattr(node, "get"):
            continue
        classes = node.get("class")
        for name in classes if isinstance(classes, list) else ():
            for prefix in CODE_CLASS_PREFIXES:
                if name.startswith(prefix) and len(name) > len(prefix):
                    return name[len(prefix) :]
    return None


__all__ = ["Kind", "Rendered", "charset_of", "classify", "html_to_markdown", "render"]
