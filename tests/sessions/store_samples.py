"""Records of every kind, with every part, event and tool-content kind inside them.

`V1_RECORDS` is what `fixtures/store-v1.jsonl` holds. Never change it, nor the file: every
future version must still load that file to exactly these records (through its upgrades).
Cover new kinds in `EXTRA_RECORDS` and in a new `store-v<n>.jsonl` fixture.
"""

from __future__ import annotations

from pathlib import Path

from acp_agent.messages import (
    BackgroundChanged,
    CommandInfo,
    CommandsChanged,
    CompactionFinished,
    CompactionStarted,
    CompactionSummaryChunk,
    DiffContent,
    DocumentPart,
    ImagePart,
    Location,
    Message,
    MessageChunk,
    Notice,
    PlanEntry,
    PlanUpdated,
    ResourceLinkPart,
    SessionInfoChanged,
    SubagentChanged,
    TerminalContent,
    TerminalStream,
    TextPart,
    ThinkingPart,
    ThoughtChunk,
    ToolCallPart,
    ToolCallStarted,
    ToolCallUpdated,
    ToolResultPart,
    UsageUpdated,
    UserMessageChunk,
)
from acp_agent.sessions.records import (
    ArchiveRecord,
    ChoiceRecord,
    CompactionRecord,
    EditorPromptRecord,
    EventRecord,
    MessageRecord,
    PermissionsRecord,
    Record,
    RootsRecord,
    SessionHeader,
    TitleRecord,
    TurnEndRecord,
    UsageRecord,
)

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_V1 = FIXTURES / "store-v1.jsonl"
FIXTURE_V1_ID = "fixture-v1"

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
    "RU5ErkJggg=="
)

V1_RECORDS: list[Record] = [
    SessionHeader(
        FIXTURE_V1_ID,
        "/home/ada/project",
        ("/home/ada/lib", "/srv/shared"),
        "2025-06-01T09:30:00.000000Z",
        forked_from="parent-session",
    ),
    ChoiceRecord(model="openai/gpt-5", mode="ask", thought_level="high"),
    ChoiceRecord(mode="accept-edits"),
    ChoiceRecord(),
    MessageRecord(
        Message(
            "user",
            [
                TextPart('Fix the bug in café.py:\nline one\u2028line two "quoted" \\ tab\t'),
                ImagePart(PNG, "image/png"),
            ],
        ),
        message_id="msg-user-1",
    ),
    EventRecord(UserMessageChunk(TextPart("Fix the bug in café.py"), message_id="msg-user-1")),
    EventRecord(UserMessageChunk(ImagePart(PNG, "image/png"))),
    EventRecord(ThoughtChunk("Let me look at the file.", message_id="msg-2")),
    EventRecord(ThoughtChunk("unlabelled thought")),
    EventRecord(MessageChunk("I will read it first. 🙂", message_id="msg-2")),
    EventRecord(MessageChunk("")),
    MessageRecord(
        Message(
            "assistant",
            [
                ThinkingPart("Let me look at the file.", {"signature": "c2ln", "n": [1, 2.5]}),
                ThinkingPart("no vendor data"),
                TextPart("I will read it first. 🙂"),
                ToolCallPart("call_1", "read_file", {"path": "café.py", "limit": 40}),
                ToolCallPart("call_2", "shell", {"_invalid_json": "{oops"}),
            ],
        ),
        message_id="msg-2",
    ),
    EventRecord(
        ToolCallStarted(
            "call_1",
            "Read café.py",
            "read",
            raw_input={"path": "café.py", "limit": 40},
            locations=(Location("/home/ada/project/café.py", 1), Location("/tmp/x")),
        )
    ),
    EventRecord(
        ToolCallStarted(
            "call_2",
            "Run tests",
            "execute",
            "in_progress",
            content=(
                TextPart("running"),
                DiffContent("/a.py", "old\n", "new\n"),
                DiffContent("/new.py", None, "created\n"),
                TerminalContent("term-1"),
            ),
        )
    ),
    EventRecord(ToolCallUpdated("call_1")),
    EventRecord(
        ToolCallUpdated(
            "call_1",
            status="completed",
            title="Read café.py (40 lines)",
            content=(TextPart("print('hi')"),),
            locations=(Location("/home/ada/project/café.py", 12),),
            raw_output={"lines": 40, "truncated": False, "nested": [None, "x"]},
        )
    ),
    EventRecord(ToolCallUpdated("call_2", content=(), locations=())),
    EventRecord(ToolCallUpdated("call_2", terminal=TerminalStream("term-1", cwd="/home/ada"))),
    EventRecord(ToolCallUpdated("call_2", terminal=TerminalStream("term-1", output="ok\n"))),
    EventRecord(
        ToolCallUpdated(
            "call_2",
            status="failed",
            terminal=TerminalStream("term-1", exited=True, exit_code=1, signal="SIGTERM"),
        )
    ),
    EventRecord(ToolCallUpdated("call_3", raw_output="plain text output")),
    MessageRecord(
        Message(
            "tool",
            [
                ToolResultPart("call_1", (TextPart("print('hi')"),)),
                ToolResultPart(
                    "call_2", (TextPart("1 failed"), ImagePart(PNG, "image/png")), is_error=True
                ),
                ToolResultPart("call_3", ()),
            ],
        )
    ),
    EventRecord(
        PlanUpdated(
            (
                PlanEntry("Read the file"),
                PlanEntry("Fix the bug", "high", "in_progress"),
                PlanEntry("Run the tests", "low", "completed"),
            )
        )
    ),
    EventRecord(PlanUpdated(())),
    EventRecord(UsageUpdated(12_345, 200_000, 0.0421)),
    EventRecord(UsageUpdated(0, 128_000)),
    EventRecord(SessionInfoChanged("Fix the café bug", "2025-06-01T09:31:00.000000Z")),
    EventRecord(SessionInfoChanged()),
    UsageRecord(cost_usd=0.0421, used=12_345, estimated=False),
    UsageRecord(cost_usd=None, used=900, estimated=True),
    UsageRecord(),
    PermissionsRecord(("tool:edit_file", "cmd:git status"), ("cmd:rm -rf /",)),
    PermissionsRecord(),
    TitleRecord("Fix the café bug"),
    MessageRecord(Message("assistant", [])),
    CompactionRecord(
        "compaction-1",
        Message("user", [TextPart("Summary of the conversation so far: fixed café.py.")]),
        replaced=3,
    ),
    TurnEndRecord("end_turn", "2025-06-01T09:31:05.000000Z"),
    TurnEndRecord("cancelled", "2025-06-01T09:32:00.000000Z"),
]

EXTRA_RECORDS: list[Record] = [
    TitleRecord("My own name for it", chosen=True),
    ArchiveRecord(archived=True),
    ArchiveRecord(archived=False),
    EventRecord(CompactionStarted("cmp-1")),
    EventRecord(CompactionSummaryChunk("cmp-1", "Goals: fix café.py.")),
    EventRecord(
        CompactionFinished(
            "cmp-1", "completed", summary="Goals: fix café.py.", summarised=12, share=0.84
        )
    ),
    EventRecord(CompactionFinished("cmp-2", "failed", error="echo: overloaded")),
    EventRecord(CompactionFinished("cmp-3", "cancelled")),
    EventRecord(Notice("openai: rate limited", "retrying in 2.0s (attempt 2 of 5)", "warning")),
    EventRecord(Notice("a plain notice")),
    EventRecord(Notice("openai: the reply broke off", None, "error", message_id="msg-9")),
    EventRecord(
        CommandsChanged(
            (CommandInfo("model", "Switch the model", "provider/model"), CommandInfo("mcp", "MCP"))
        )
    ),
    EventRecord(
        ToolCallStarted(
            "call_9",
            "Edit /w/a.py",
            "edit",
            raw_input={"path": "a.py", "old_text": "x", "new_text": "y"},
            locations=(Location("/w/a.py"),),
            content=(DiffContent("/w/a.py", "x\n", "y\n"),),
            name="edit_file",
        )
    ),
    EventRecord(
        ToolCallUpdated(
            "call_9",
            status="failed",
            content=(TerminalContent("term-2"), TextPart("Exited with code 2.")),
            raw_output={"exit_code": 2, "signal": None, "timed_out": False},
        )
    ),
    SessionHeader("plain", "/w", (), "2025-01-01T00:00:00.000000Z"),
    MessageRecord(Message("user", [TextPart("x" * 10_000)])),
    UsageRecord(cost_usd=3.0, used=1, estimated=True),
    EventRecord(SubagentChanged("sess_child", "Review the parser", "running")),
    EventRecord(SubagentChanged("sess_child", "Review the parser", "idle", "end_turn")),
    # Live only (never kept by the recorder), but it encodes like every event.
    EventRecord(BackgroundChanged(("local-job-1",))),
    EventRecord(ToolCallUpdated("call_9", status="cancelled", raw_output={"error": "cancelled"})),
    EditorPromptRecord("append", "Answer in French.\n\nKeep it short: «court»."),
    EditorPromptRecord("override", "You are the editor's own agent."),
    RootsRecord("/w", ("/lib", "/docs")),
    RootsRecord("/other"),
    # Mentions: the link as typed, with what was read for it (or nothing: another scheme),
    # and an embedded PDF.
    MessageRecord(
        Message(
            "user",
            [
                TextPart("compare "),
                ResourceLinkPart(
                    "file:///w/caf%C3%A9.py#L2-3",
                    "café.py",
                    "text/x-python",
                    (TextPart('<file path="/w/café.py" lines="2-3">\na\nb\n</file>'),),
                ),
                ResourceLinkPart(
                    "file:///w/shot.png",
                    "shot.png",
                    context=(
                        TextPart('<file path="/w/shot.png" type="image/png"/>'),
                        ImagePart("iVBORw0KGgo=", "image/png"),
                        DocumentPart("JVBERi0=", "application/pdf", "spec.pdf"),
                    ),
                ),
                ResourceLinkPart("https://example.com/doc", "doc"),
                DocumentPart("JVBERi0xLjQ=", "application/pdf", "file:///tmp/r.pdf"),
            ],
        ),
        "u-mention",
    ),
    EventRecord(UserMessageChunk(ResourceLinkPart("file:///w/a.py", "a.py"), "u-mention")),
    EventRecord(UserMessageChunk(DocumentPart("JVBERi0=", "application/pdf", "file:///tmp/r.pdf"))),
]


def turn_messages(n: int) -> list[Record]:
    """The records one realistic turn writes (used by the crash test's child process too)."""
    call_id = f"call_{n}"
    return [
        MessageRecord(Message("user", [TextPart(f"prompt {n}")]), f"u{n}"),
        EventRecord(UserMessageChunk(TextPart(f"prompt {n}"), f"u{n}")),
        EventRecord(MessageChunk(f"reply {n}", f"a{n}")),
        MessageRecord(
            Message("assistant", [TextPart(f"reply {n}"), ToolCallPart(call_id, "read", {})]),
            f"a{n}",
        ),
        EventRecord(ToolCallStarted(call_id, "Read", "read")),
        EventRecord(ToolCallUpdated(call_id, status="completed")),
        MessageRecord(Message("tool", [ToolResultPart(call_id, (TextPart("ok"),))])),
        TurnEndRecord("end_turn", "2025-01-01T00:00:00.000000Z"),
    ]
