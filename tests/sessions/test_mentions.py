"""Mentions: `file://` URIs parsed, a message's mentions read under the permission policy,
and what the model reads for a message with mentions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from acp_agent.messages import (
    DocumentPart,
    ImagePart,
    Message,
    ResourceLinkPart,
    TextPart,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEvent,
    model_parts,
)
from acp_agent.sessions.mentions import (
    FileTarget,
    MentionReader,
    MentionsCancelled,
    NotLocal,
    parse_file_uri,
    parse_lines,
)
from acp_agent.tools import (
    Decision,
    PermissionMemory,
    PermissionMode,
    PermissionQuestion,
    ToolContext,
)
from acp_agent.tools.file_context import LineRange

pytestmark = pytest.mark.anyio

# --- URIs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:///w/src/app.py", FileTarget("/w/src/app.py")),
        ("file:///w/my%20file%20%C3%A9.py", FileTarget("/w/my file é.py")),
        ("file:///w/a%23b.py#L3", FileTarget("/w/a#b.py", LineRange(3, 3))),
        ("file:///w/a.py#L10-25", FileTarget("/w/a.py", LineRange(10, 25))),
        ("file:///w/a.py#L10:25", FileTarget("/w/a.py", LineRange(10, 25))),
        ("file:///w/a.py#L10-L25", FileTarget("/w/a.py", LineRange(10, 25))),
        ("file:///w/a.py#L10C4-L12C1", FileTarget("/w/a.py", LineRange(10, 12))),
        ("file:///w/a.py#L10", FileTarget("/w/a.py", LineRange(10, 10))),
        ("file:///w/a.py#L25-10", FileTarget("/w/a.py", LineRange(10, 25))),
        ("file:///w/a.py#section", FileTarget("/w/a.py")),
        ("file://localhost/w/a.py", FileTarget("/w/a.py")),
        ("FILE:///w/a.py", FileTarget("/w/a.py")),
        ("file:src/a.py", FileTarget("src/a.py")),
        ("file:///w/dir/", FileTarget("/w/dir/")),
    ],
)
def test_a_file_uri_names_a_decoded_path_and_its_line_range(uri: str, expected: FileTarget) -> None:
    assert parse_file_uri(uri) == expected


@pytest.mark.parametrize(
    "uri",
    [
        "https://example.com/a.py",
        "zed:///agent/thread/123",
        "mcp://server/resource",
        "untitled:Untitled-1",
        "/w/a.py",
    ],
)
def test_other_schemes_are_not_files(uri: str) -> None:
    assert parse_file_uri(uri) is None


def test_a_file_on_another_host_is_not_local() -> None:
    with pytest.raises(NotLocal, match="host fileserver"):
        parse_file_uri("file://fileserver/share/a.py")


def test_line_zero_counts_as_the_first_line() -> None:
    assert parse_lines("L0-3") == LineRange(1, 3)


# --- what the model reads -----------------------------------------------------------------


def test_the_model_reads_each_link_where_it_was_typed_and_the_contents_after_the_message() -> None:
    link = ResourceLinkPart(
        "file:///w/a.py", "a.py", context=(TextPart('<file path="/w/a.py">\nx = 1\n</file>'),)
    )
    other = ResourceLinkPart("https://example.com/doc", "doc")
    parts = model_parts([TextPart("look at "), link, TextPart(" and "), other, TextPart(" now")])
    assert parts == [
        TextPart("look at [@a.py](file:///w/a.py) and [@doc](https://example.com/doc) now"),
        TextPart('<file path="/w/a.py">\nx = 1\n</file>'),
    ]


def test_a_link_the_editor_sent_without_spaces_is_not_glued_to_the_text() -> None:
    """Toad and CodeCompanion send the typed text and the mention with nothing between."""
    link = ResourceLinkPart("file:///w/notes.txt", "notes.txt", context=(TextPart("<file/>"),))
    parts = model_parts([TextPart("summarise [[this]]"), link, TextPart("please")])
    assert parts == [
        TextPart("summarise [[this]] [@notes.txt](file:///w/notes.txt) please"),
        TextPart("<file/>"),
    ]


def test_a_message_without_links_is_read_as_it_is() -> None:
    parts = [TextPart("a"), TextPart("b")]
    assert model_parts(parts) is parts


def test_adjacent_links_are_separated_and_media_follow_the_text() -> None:
    image = ImagePart("aW1n", "image/png")
    document = DocumentPart("cGRm", "application/pdf", "r.pdf")
    first = ResourceLinkPart("file:///w/a.png", "a.png", context=(TextPart("[a.png]"), image))
    second = ResourceLinkPart("file:///w/r.pdf", "r.pdf", context=(document,))
    assert model_parts([first, second]) == [
        TextPart("[@a.png](file:///w/a.png) [@r.pdf](file:///w/r.pdf)"),
        TextPart("[a.png]"),
        image,
        document,
    ]


# --- reading a message's mentions ---------------------------------------------------------


class Host:
    """The turn's host: what was shown, what was asked, and the user's answer."""

    def __init__(self, answer: Decision = "allow_once") -> None:
        self.answer: Decision = answer
        self.events: list[TurnEvent] = []
        self.questions: list[PermissionQuestion] = []

    async def emit(self, event: TurnEvent) -> None:
        self.events.append(event)

    async def ask_permission(self, question: PermissionQuestion) -> Decision:
        self.questions.append(question)
        return self.answer


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return Path(os.path.realpath(workspace))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("secret notes\n")
    return Path(os.path.realpath(elsewhere))


def reader(
    root: Path,
    host: Host,
    mode: PermissionMode = "ask",
    memory: PermissionMemory | None = None,
) -> MentionReader:
    context = ToolContext(session_id="s", cwd=root, roots=(root,), editor=NoEditor())
    return MentionReader(context, host, mode, memory or PermissionMemory(), max_bytes=4096)


class NoEditor:
    """A client that offers no files: mentions are read from the disk."""

    can_read_files = can_write_files = can_run_terminals = False

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} called on a client that offers nothing")


def mention(path: Path, name: str | None = None) -> Message:
    link = ResourceLinkPart(path.as_uri(), name or path.name)
    return Message("user", [TextPart("see "), link])


def context_of(message: Message) -> tuple[TextPart | ImagePart | DocumentPart, ...] | None:
    link = message.parts[1]
    assert isinstance(link, ResourceLinkPart)
    return link.context


async def test_a_mention_inside_the_roots_is_read_without_asking(root: Path) -> None:
    (root / "a.py").write_text("x = 1\n")
    host = Host()
    read = await reader(root, host).read(mention(root / "a.py"))
    assert context_of(read) == (TextPart(f'<file path="{root}/a.py">\nx = 1\n</file>'),)
    assert host.questions == [] and host.events == []


async def test_a_mention_outside_the_roots_asks_and_a_refusal_leaves_a_note(
    root: Path, outside: Path
) -> None:
    host = Host("reject_once")
    read = await reader(root, host).read(mention(outside / "notes.txt"))
    (note,) = context_of(read) or ()
    assert isinstance(note, TextPart)
    assert "was not read" in note.text and "did not allow" in note.text
    assert "secret" not in note.text
    (question,) = host.questions
    assert question.kind == "read"
    assert question.title == f"Read {outside}/notes.txt (mentioned)"
    assert question.always_scope == f"read_file in {outside}"
    started, ended = host.events
    assert isinstance(started, ToolCallStarted) and started.id == question.tool_call_id
    assert isinstance(ended, ToolCallUpdated) and ended.status == "failed"


async def test_always_allowing_a_mention_outside_the_roots_holds_for_the_next_one(
    root: Path, outside: Path
) -> None:
    host, memory = Host("allow_always"), PermissionMemory()
    first = await reader(root, host, memory=memory).read(mention(outside / "notes.txt"))
    assert "secret notes" in str(context_of(first))
    assert memory.allowed == {f"tool:read_file:{outside}"}
    second = await reader(root, host, memory=memory).read(mention(outside / "notes.txt"))
    assert "secret notes" in str(context_of(second))
    assert len(host.questions) == 1
    assert [type(e).__name__ for e in host.events] == ["ToolCallStarted", "ToolCallUpdated"]
    completed = host.events[1]
    assert isinstance(completed, ToolCallUpdated) and completed.status == "completed"


async def test_bypass_mode_reads_outside_the_roots_without_asking(
    root: Path, outside: Path
) -> None:
    host = Host("reject_once")
    read = await reader(root, host, "bypass").read(mention(outside / "notes.txt"))
    assert "secret notes" in str(context_of(read))
    assert host.questions == []


async def test_an_always_rejected_directory_is_not_asked_about_again(
    root: Path, outside: Path
) -> None:
    memory = PermissionMemory(rejected={f"tool:read_file:{outside}"})
    host = Host()
    read = await reader(root, host, memory=memory).read(mention(outside / "notes.txt"))
    assert "always reject" in str(context_of(read))
    assert host.questions == []


async def test_a_cancelled_question_cancels_the_reading(root: Path, outside: Path) -> None:
    host = Host("cancelled")
    with pytest.raises(MentionsCancelled):
        await reader(root, host).read(mention(outside / "notes.txt"))
    ended = host.events[-1]
    assert isinstance(ended, ToolCallUpdated) and ended.status == "failed"


async def test_links_of_other_schemes_and_other_hosts_are_not_read(root: Path) -> None:
    message = Message(
        "user",
        [
            ResourceLinkPart("https://example.com/a", "a"),
            ResourceLinkPart("file://server/share/b.py", "b.py"),
        ],
    )
    read = await reader(root, Host()).read(message)
    web, remote = read.parts
    assert isinstance(web, ResourceLinkPart) and web.context is None
    assert isinstance(remote, ResourceLinkPart) and remote.context is not None
    assert "not this machine" in str(remote.context)


async def test_a_message_without_mentions_is_left_as_it_is(root: Path) -> None:
    message = Message("user", [TextPart("hi")])
    assert await reader(root, Host()).read(message) is message
