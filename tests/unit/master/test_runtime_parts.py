"""The runtime's pure parts: ``TaskBook``, channels and links, event logs."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest
from fairshare.logs import EventFormatter, configure_logging, log_event
from fairshare.resources import ResourceVector
from fairshare.task_states import TaskState

from master.core import KillTask, TaskLaunch
from master.model import AgentSpec, StatusUpdate, StreamEnd
from master.runtime.sessions import AgentLink, Channel
from master.runtime.taskbook import AckOutcome, TaskBook, UpdateOutcome

R = ResourceVector.parse


# -- TaskBook -------------------------------------------------------------------------------------


def agent_update(state: TaskState, uuid: bytes) -> StatusUpdate:
    return StatusUpdate("t", "ag", state, uuid=uuid, source="AGENT")


def test_taskbook_tracks_until_the_terminal_update_is_acknowledged() -> None:
    book = TaskBook()
    book.launch("fw", "ag", TaskLaunch("t", "t", R("cpus:1")))
    assert book.get("fw", "t").state == TaskState.STAGING  # type: ignore[union-attr]
    assert book.record_agent_update(
        "fw", agent_update(TaskState.RUNNING, b"1"), TaskState.RUNNING
    ) is (UpdateOutcome.NEW)
    assert book.record_agent_update(
        "fw", agent_update(TaskState.FINISHED, b"2"), TaskState.FINISHED
    ) is (UpdateOutcome.NEW)
    assert [s.uuid for s in book.pending("fw")] == [b"1", b"2"]
    assert book.acknowledge("fw", "t", b"1") is AckOutcome.FORWARD
    assert book.acknowledge("fw", "t", b"1") is AckOutcome.DUPLICATE
    assert book.acknowledge("fw", "t", b"9") is AckOutcome.UNKNOWN
    assert book.record_agent_update(
        "fw", agent_update(TaskState.RUNNING, b"1"), TaskState.FINISHED
    ) is (UpdateOutcome.ACKED)
    assert book.get("fw", "t").state == TaskState.FINISHED  # type: ignore[union-attr]
    assert book.acknowledge("fw", "t", b"2") is AckOutcome.FORWARD
    assert book.get("fw", "t") is None and len(book) == 0  # terminal and acknowledged
    assert book.acknowledge("fw", "t", b"2") is AckOutcome.DUPLICATE  # remembered after the end


def test_taskbook_state_only_moves_forward() -> None:
    book = TaskBook()
    book.launch("fw", "ag", TaskLaunch("t", "t", R("cpus:1")))
    book.mark_killing("fw", "t")
    book.record_agent_update(
        "fw", agent_update(TaskState.RUNNING, b"1"), TaskState.RUNNING
    )  # a late retry
    assert book.get("fw", "t").state == TaskState.KILLING  # type: ignore[union-attr]
    book.record_agent_update("fw", agent_update(TaskState.KILLED, b"2"), TaskState.KILLED)
    book.record_agent_update("fw", agent_update(TaskState.RUNNING, b"3"), TaskState.RUNNING)
    assert book.get("fw", "t").state == TaskState.KILLED  # type: ignore[union-attr]


def test_taskbook_master_decisions_and_indexes() -> None:
    book = TaskBook()
    book.launch("fw", "ag1", TaskLaunch("a", "a", R("cpus:1")))
    book.launch("fw", "ag2", TaskLaunch("b", "b", R("cpus:1")))
    book.launch("other", "ag1", TaskLaunch("a", "a", R("cpus:1")))
    assert [e.task_id for e in book.on_agent("ag1")] == ["a", "a"]
    book.set_state("fw", "b", StatusUpdate("b", "ag2", TaskState.LOST))
    assert book.get("fw", "b") is None and not book.on_agent("ag2")  # nothing pending: dropped
    book.remove_framework("fw")
    assert [(e.framework_id, e.task_id) for e in book] == [("other", "a")]
    replaced = book.launch("other", "ag3", TaskLaunch("a", "again", R("cpus:2")))
    assert book.get("other", "a") is replaced and not book.on_agent("ag1")


def test_taskbook_adopts_updates_of_tasks_it_forgot() -> None:
    book = TaskBook()
    assert book.record_agent_update(
        "fw", agent_update(TaskState.KILLED, b"1"), TaskState.KILLED
    ) is (UpdateOutcome.NEW)
    assert book.get("fw", "t").terminal  # type: ignore[union-attr]
    assert book.acknowledge("fw", "t", b"1") is AckOutcome.FORWARD
    assert len(book) == 0


# -- channels and agent links ---------------------------------------------------------------------


def test_channel_ends_with_its_stream_end() -> None:
    async def main() -> None:
        channel: Channel[int] = Channel()
        channel.put(1)
        channel.close(StreamEnd("UNAVAILABLE"))
        channel.put(2)  # dropped
        channel.close(StreamEnd())  # ignored
        assert await channel.get() == 1
        assert await channel.get() == StreamEnd("UNAVAILABLE")
        assert channel.get_nowait() is None

    asyncio.run(main())


def test_agent_link_keeps_commands_across_streams() -> None:
    async def main() -> None:
        link = AgentLink("ag", AgentSpec("h", 0, R("cpus:1")), 0.0, 0.0)
        link.send(KillTask("ag", "fw", "early"))  # no stream yet: waits in the outbox
        first = link.attach()
        assert first.get_nowait() == KillTask("ag", "fw", "early")
        link.send(KillTask("ag", "fw", "queued"))
        second = link.attach()  # replaces the first: unsent commands move over
        assert first.get_nowait() == StreamEnd(
            "ABORTED", "a newer stream of this agent replaced this one"
        )
        assert second.get_nowait() == KillTask("ag", "fw", "queued")
        link.send(KillTask("ag", "fw", "late"))
        link.detach(first)  # a stale stream ending changes nothing
        assert link.connected
        link.detach(second)
        assert not link.connected and list(link.outbox) == [KillTask("ag", "fw", "late")]
        link.end_stream(StreamEnd("NOT_FOUND"))
        assert not link.outbox

    asyncio.run(main())


# -- event logs -----------------------------------------------------------------------------------


def test_event_lines_text_and_json() -> None:
    logger = logging.getLogger("fairshare.test")
    stream = io.StringIO()
    configure_logging("text", "INFO", stream)
    log_event(logger, "offer.sent", framework_id="fw-1", reason="two words", count=3)
    log_event(logger, "hidden", logging.DEBUG)
    [line] = stream.getvalue().splitlines()
    assert line.endswith('INFO offer.sent framework_id=fw-1 reason="two words" count=3')

    stream = io.StringIO()
    configure_logging("json", "DEBUG", stream)
    log_event(logger, "multi", note="a\nb", value=None)
    [line] = stream.getvalue().splitlines()
    record = json.loads(line)
    assert record["event"] == "multi" and record["note"] == "a\nb" and record["value"] is None
    assert record["level"] == "INFO" and record["ts"].endswith("Z")
    logging.getLogger().handlers.clear()


def test_formatter_rejects_unknown_formats() -> None:
    with pytest.raises(ValueError):
        EventFormatter("xml")
