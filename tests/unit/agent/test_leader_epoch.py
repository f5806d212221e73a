"""The agent's leadership epoch (agent.proto: Leadership, docs/architecture.md §5):
it admits a master of
its highest epoch seen or a newer one, never an older one, and the epoch survives a restart
(checkpointed in ``meta``)."""

from __future__ import annotations

import random
from itertools import count
from pathlib import Path

from fairshare.backoff import Backoff
from fairshare.resources import ResourceVector

from agent.core import AgentState
from agent.core.records import AgentSpec
from agent.durability.checkpoint import CHECKPOINT_FILE, CheckpointStore

SPEC = AgentSpec("host-a", 7000, ResourceVector.parse("cpus:4;mem:1024"), ())


def make_state() -> AgentState:
    counter = count(1)
    return AgentState(
        SPEC,
        retry=Backoff(1.0, 8.0).jittered(random.Random(7)),
        new_uuid=lambda: next(counter).to_bytes(16, "big"),
    )


def test_an_older_epoch_is_refused_and_a_newer_one_raises_the_bar() -> None:
    state = make_state()
    assert state.admits(0) and state.admits(12)  # a fresh agent admits anyone
    state.saw_epoch(12)
    assert state.admits(12) and state.admits(13) and not state.admits(11)
    state.saw_epoch(5)  # seeing an older epoch changes nothing
    assert state.epoch == 12


def test_the_epoch_is_checkpointed_once_when_it_grows(tmp_path: Path) -> None:
    store = CheckpointStore.open(tmp_path / CHECKPOINT_FILE, SPEC)
    state = make_state()
    state.saw_epoch(9)
    assert state.has_changes()
    changes = state.take_changes()
    assert changes.epoch == 9
    store.write(changes)
    state.saw_epoch(9)
    assert not state.has_changes()
    store.close()

    reopened = CheckpointStore.open(tmp_path / CHECKPOINT_FILE, SPEC)
    restored = AgentState.restore(
        SPEC,
        reopened.load(),
        retry=Backoff(1.0, 8.0).jittered(random.Random(7)),
        new_uuid=lambda: b"x",
    )
    reopened.close()
    assert restored.epoch == 9 and not restored.admits(8)
