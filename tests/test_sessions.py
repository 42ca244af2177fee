"""`Session.run_turn`: prompts queue in arrival order; `cancel()` stops the running turn and
every prompt queued behind it, never a later one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from acp_agent.messages import TurnStopReason
from acp_agent.sessions import Session
from acp_agent.sessions.session import QueuePlace

pytestmark = pytest.mark.anyio

Turn = Callable[[], Awaitable[TurnStopReason]]


def make_session(tmp_path: Path) -> Session:
    return Session(id="sess_test", cwd=tmp_path, roots=(tmp_path,), model_choice="echo/echo")


class Script:
    """Turns that log when they start and end, and wait for a gate when asked to."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.gates: dict[str, anyio.Event] = {}
        self.started: dict[str, anyio.Event] = {}
        self.cancelled: list[str] = []
        self.results: dict[str, TurnStopReason] = {}

    def turn(self, name: str, *, gated: bool = False, stop: TurnStopReason = "end_turn") -> Turn:
        gate = self.gates.setdefault(name, anyio.Event())
        started = self.started.setdefault(name, anyio.Event())
        if not gated:
            gate.set()

        async def run() -> TurnStopReason:
            self.log.append(f"start {name}")
            started.set()
            try:
                await gate.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(name)
                raise
            self.log.append(f"end {name}")
            return stop

        return run

    async def submit(self, session: Session, name: str, turn: Turn) -> None:
        self.results[name] = await session.run_turn(turn)

    async def submit_in_place(self, session: Session, name: str, place: QueuePlace) -> None:
        self.results[name] = await session.run_turn(self.turn(name), place)


async def test_a_turns_stop_reason_is_returned(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    script = Script()
    assert await session.run_turn(script.turn("a", stop="max_tokens")) == "max_tokens"
    assert script.log == ["start a", "end a"]


async def test_a_session_is_busy_only_while_a_turn_runs(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    script = Script()
    assert not session.busy
    async with anyio.create_task_group() as tg:
        tg.start_soon(script.submit, session, "a", script.turn("a", gated=True))
        await script.started["a"].wait()
        assert session.busy
        script.gates["a"].set()
    assert not session.busy


async def test_prompts_on_a_busy_session_run_one_at_a_time_in_arrival_order(
    tmp_path: Path,
) -> None:
    session = make_session(tmp_path)
    script = Script()
    names = ["first", "second", "third", "fourth"]
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(script.submit, session, name, script.turn(name, gated=True))
                await anyio.wait_all_tasks_blocked()
            await script.started["first"].wait()
            # Release in reverse: order must still follow arrival, not release.
            for name in reversed(names):
                script.gates[name].set()
    assert script.log == [entry for name in names for entry in (f"start {name}", f"end {name}")]
    assert script.results == dict.fromkeys(names, "end_turn")


async def test_cancel_stops_the_running_turn_which_returns_cancelled(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    script = Script()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script.submit, session, "a", script.turn("a", gated=True))
            await script.started["a"].wait()
            session.cancel()
    assert script.results == {"a": "cancelled"}
    assert script.cancelled == ["a"]
    assert not session.busy


async def test_cancel_also_cancels_every_prompt_queued_behind_the_running_one(
    tmp_path: Path,
) -> None:
    session = make_session(tmp_path)
    script = Script()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for name in ("running", "queued 1", "queued 2"):
                tg.start_soon(script.submit, session, name, script.turn(name, gated=True))
                await anyio.wait_all_tasks_blocked()
            await script.started["running"].wait()
            session.cancel()
    assert script.results == dict.fromkeys(("running", "queued 1", "queued 2"), "cancelled")
    assert script.log == ["start running"]  # the queued turns never started


async def test_a_prompt_arriving_after_a_cancel_runs_normally(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    script = Script()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script.submit, session, "old", script.turn("old", gated=True))
            await script.started["old"].wait()
            session.cancel()
            tg.start_soon(script.submit, session, "new", script.turn("new"))
    assert script.results == {"old": "cancelled", "new": "end_turn"}
    assert script.log == ["start old", "start new", "end new"]


async def test_a_prompt_queued_after_a_cancel_but_while_the_old_turn_winds_down_runs(
    tmp_path: Path,
) -> None:
    session = make_session(tmp_path)
    script = Script()
    wound_down = anyio.Event()

    async def slow_to_stop() -> TurnStopReason:
        script.log.append("start old")
        script.started.setdefault("old", anyio.Event()).set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await wound_down.wait()  # e.g. saving partial work
        return "end_turn"

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script.submit, session, "old", slow_to_stop)
            await anyio.wait_all_tasks_blocked()
            session.cancel()
            tg.start_soon(script.submit, session, "new", script.turn("new"))
            await anyio.wait_all_tasks_blocked()
            assert "start new" not in script.log  # still waiting for the old turn
            wound_down.set()
    assert script.results == {"old": "cancelled", "new": "end_turn"}


async def test_cancel_with_nothing_running_does_not_cancel_a_later_prompt(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    script = Script()
    session.cancel()
    assert await session.run_turn(script.turn("a")) == "end_turn"
    assert await session.run_turn(script.turn("b")) == "end_turn"


async def test_cancelling_one_session_leaves_another_running(tmp_path: Path) -> None:
    first, second = make_session(tmp_path), make_session(tmp_path)
    script = Script()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script.submit, first, "a", script.turn("a", gated=True))
            tg.start_soon(script.submit, second, "b", script.turn("b", gated=True))
            await script.started["a"].wait()
            await script.started["b"].wait()
            first.cancel()
            await anyio.wait_all_tasks_blocked()
            assert second.busy
            script.gates["b"].set()
    assert script.results == {"a": "cancelled", "b": "end_turn"}


async def test_two_sessions_run_turns_at_the_same_time(tmp_path: Path) -> None:
    first, second = make_session(tmp_path), make_session(tmp_path)
    script = Script()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script.submit, first, "a", script.turn("a", gated=True))
            tg.start_soon(script.submit, second, "b", script.turn("b", gated=True))
            await script.started["a"].wait()
            await script.started["b"].wait()  # both started before either ended
            script.gates["a"].set()
            script.gates["b"].set()
    assert script.results == {"a": "end_turn", "b": "end_turn"}


async def test_a_failing_turn_raises_and_the_next_prompt_still_runs(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    script = Script()

    async def broken() -> TurnStopReason:
        raise RuntimeError("provider exploded")

    with pytest.raises(RuntimeError, match="exploded"):
        await session.run_turn(broken)
    assert not session.busy
    assert await session.run_turn(script.turn("after")) == "end_turn"


async def test_a_queued_prompt_whose_caller_gives_up_does_not_block_the_queue(
    tmp_path: Path,
) -> None:
    session = make_session(tmp_path)
    script = Script()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script.submit, session, "running", script.turn("running", gated=True))
            await script.started["running"].wait()
            with anyio.move_on_after(0.01):  # e.g. $/cancel_request for the queued prompt
                await session.run_turn(script.turn("abandoned"))
            tg.start_soon(script.submit, session, "later", script.turn("later"))
            await anyio.wait_all_tasks_blocked()
            script.gates["running"].set()
    assert script.results == {"running": "end_turn", "later": "end_turn"}
    assert "start abandoned" not in script.log


async def test_a_place_taken_first_runs_first_even_when_its_prompt_arrives_later(
    tmp_path: Path,
) -> None:
    # The frames were read in this order; the first prompt had more to do before its turn.
    session = make_session(tmp_path)
    script = Script()
    first, second = session.take_place(), session.take_place()

    async def submit_in(place: QueuePlace, name: str) -> None:
        try:
            script.results[name] = await session.run_turn(script.turn(name), place)
        finally:
            place.release()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(submit_in, second, "second")
            await anyio.wait_all_tasks_blocked()
            assert script.log == [], "the second waits for the first place"
            tg.start_soon(submit_in, first, "first")
    assert script.log == ["start first", "end first", "start second", "end second"]


async def test_a_place_released_without_a_turn_lets_the_next_one_run(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    failed_early, next_place = session.take_place(), session.take_place()
    failed_early.release()  # e.g. its params could not be read
    failed_early.release()  # twice is harmless
    with anyio.fail_after(5):
        assert await session.run_turn(Script().turn("next"), next_place) == "end_turn"
    next_place.release()
    assert session.idle


async def test_a_cancel_reaches_a_prompt_waiting_for_an_earlier_place(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    script = Script()
    held, waiting = session.take_place(), session.take_place()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script.submit_in_place, session, "waiting", waiting)
            await anyio.wait_all_tasks_blocked()
            session.cancel()  # the earlier place is still held: the cancel must not wait
    assert script.results == {"waiting": "cancelled"}
    assert "start waiting" not in script.log
    held.release()


async def test_a_place_of_one_session_never_frees_another_sessions_queue(tmp_path: Path) -> None:
    first, second = make_session(tmp_path), make_session(tmp_path)
    script = Script()
    second.take_place()  # held: second's next place must wait for it
    behind = second.take_place()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script.submit_in_place, second, "behind", behind)
            await anyio.wait_all_tasks_blocked()
            first.take_place().release()
            first.take_place().release()
            await anyio.wait_all_tasks_blocked()
            assert "start behind" not in script.log
            tg.cancel_scope.cancel()
    assert not second.idle, "a place still held keeps the session from being let go"


# --- work beside the turns --------------------------------------------------------------


async def test_end_aside_cancels_the_work_beside_the_turns_and_waits_for_its_cleanup(
    tmp_path: Path,
) -> None:
    session = make_session(tmp_path)
    started, finished = anyio.Event(), []

    async def slow_title() -> None:
        try:
            started.set()
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()  # cleanup that takes a step of its own
                finished.append("cleaned up")

    async with anyio.create_task_group() as tg:
        tg.start_soon(session.run_aside, slow_title)
        await started.wait()
        await session.end_aside()
        assert finished == ["cleaned up"], "end_aside returned before the work had ended"


async def test_a_failure_beside_the_turns_is_logged_and_takes_nothing_down(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session = make_session(tmp_path)

    async def broken() -> None:
        raise OSError("disk full")

    async with anyio.create_task_group() as tg:
        tg.start_soon(session.run_aside, broken)
    assert "work beside the turns failed" in caplog.text
    assert await session.run_turn(Script().turn("next")) == "end_turn", "the session goes on"
