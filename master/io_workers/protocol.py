"""The link between an I/O worker and the core: its socket, its frames, and what one batch
carries (docs/architecture.md §13).

One link per worker: a stream connection to the core's link socket (``LINK_SOCKET``, a Unix
socket beside the core's gRPC one), whose frames (``write_frame``, ``read_frame``: a 4-byte
big-endian length, then that many bytes) are batches. Not gRPC: a frame costs asyncio a read
and a write, where a gRPC message costs several times that in grpc.aio's machinery, and the link
carries every message of the worker's clients. The worker's first frame is its index (pickled);
the core's first is an empty batch (the core is ready, the worker may serve). A batch is a
pickled list of operations, each a tuple whose first item names it; a worker's batch is
``(depth, operations)``, ``depth`` being how many operations were queued when the batch left
(the core shows it as a metric).

Worker to core (``sid``: the worker's number for one agent stream, framework stream or call,
never reused by it):
  ``(HELLO, 0)``: the worker serves the public port now (its first operation);
  ``(OPEN, sid, principal, agent_id | None, spec, tasks)``: register (``agent_id`` None) or
  reregister; ``(UPDATES, sid, updates)``; ``(HEARD, sid)``; ``(CLOSE, sid, end | None)``: the
  agent's stream ended (``end``: the refusal that ended it);
  ``(CALL, sid, principal, unreachable, method, args)``: one Scheduler API call, ``method`` one
  of ``FRAMEWORK_METHODS`` of ``FrameworkCalls``, ``args`` its arguments but the principal,
  already converted (``unreachable``: the leader the caller said it could not reach, or None);
  ``(SUBSCRIBE, sid, principal, unreachable, spec, demand, suppressed)``; ``(UNSUBSCRIBE, sid)``:
  the framework's stream ended; ``(RPC_COUNTS, 0, counts)``: the calls the worker served itself
  since its last report, ``{(method, code): n}`` (the core adds them to its ``fairshare_rpc_*``).
Core to worker:
  ``(OPENED, sid, agent_id, master_id, heartbeat_interval, reconnect_jitter, epoch, log_key)``;
  ``(REFUSED, sid, code, message[, trailing metadata])`` (a follower's names the leader): an
  open, a call or a subscription refused; ``(ANSWERED, sid)``: a call applied;
  ``(SUBSCRIBED, sid, framework_id, master_id, heartbeat_interval, resubscribed, weight)``;
  ``(COMMANDS, sid, items)``, ``(EVENTS, sid, items)``: what an agent's or a framework's channel
  gave, in order; ``(END, sid, end)``: the session's channel closed with ``end`` (its last item).

Invariants: frames arrive whole and in order (one stream connection); operations of one link
are applied in the order they were queued, so one agent's
messages (all on one worker) reach ``AgentCalls`` in the order the agent sent them, and its
commands reach its stream in the order the core queued them; the values are the runtime's own
(``master.model``), so nothing is converted twice. Pickle is safe here because only processes of
the master's own user can open the socket (mode 0600, in a directory of mode 0700): the link
never carries anything from a process that the master's user did not start.

``encode`` pickles the runtime's dataclasses (``LINK_VALUE_TYPES``: those of
``LINK_VALUE_MODULES`` whose ``__init__`` is the generated one, every field positional, with no
``__post_init__``) as their class and field values, rebuilt by that ``__init__``. It is the
link's own dispatch table: the process's pickling is untouched. The default for a slots
dataclass walks ``dataclasses.fields`` for every object on both ends; a batch of updates,
events, launches and offers costs 2.6 times as much with it (``tests/bench/bench_link_batches.py``).
"""

from __future__ import annotations

import asyncio
import copyreg
import dataclasses
import importlib
import io
import operator
import os
import pickle
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

__all__ = [
    "ANSWERED",
    "CALL",
    "CLOSE",
    "COMMANDS",
    "END",
    "EVENTS",
    "FORWARDED_PRINCIPAL",
    "FRAMEWORK_METHODS",
    "HEARD",
    "HELLO",
    "LINK_OPTIONS",
    "LINK_SOCKET",
    "LINK_VALUE_MODULES",
    "LINK_VALUE_TYPES",
    "MAX_BATCH",
    "OPEN",
    "OPENED",
    "REFUSED",
    "RPC_COUNTS",
    "SUBSCRIBE",
    "SUBSCRIBED",
    "UNSUBSCRIBE",
    "UPDATES",
    "Operation",
    "decode",
    "encode",
    "read_frame",
    "socket_dir",
    "write_frame",
]

LINK_SOCKET: Final = "link.sock"
"""The link socket's name, beside the core's gRPC socket."""
_LENGTH: Final = struct.Struct(">I")
FORWARDED_PRINCIPAL: Final = "fairshare-forwarded-principal"
"""The principal a worker authenticated, in the metadata of a call it forwards to the core."""

HELLO: Final = 0
OPEN: Final = 1
UPDATES: Final = 2
HEARD: Final = 3
CLOSE: Final = 4
OPENED: Final = 5
REFUSED: Final = 6
COMMANDS: Final = 7
END: Final = 8
CALL: Final = 9
ANSWERED: Final = 10
SUBSCRIBE: Final = 11
SUBSCRIBED: Final = 12
EVENTS: Final = 13
UNSUBSCRIBE: Final = 14
RPC_COUNTS: Final = 15

FRAMEWORK_METHODS: Final = frozenset(
    {
        "accept",
        "acknowledge_many",
        "decline",
        "kill",
        "reconcile",
        "revive",
        "suppress",
        "teardown",
        "update_demand",
    }
)
"""The ``FrameworkCalls`` methods a ``CALL`` may name (each takes the principal last)."""

MAX_BATCH: Final = 2048
"""Operations in one batch at most (what is queued beyond goes in the next)."""
LINK_OPTIONS: Final[tuple[tuple[str, Any], ...]] = (
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
    ("grpc.max_concurrent_streams", 1_000_000),  # every forwarded call of a worker's clients
    ("grpc.max_connection_idle_ms", 2**31 - 1),
)
"""Options of the core's Unix socket server and of the workers' channels to it, overriding the
public ones: one connection per worker carries every call of its clients (and a batch may be
larger than a public message: the public limit is the workers' to enforce)."""

Operation = tuple[Any, ...]
_UNIX_PATH_MAX: Final = 100  # sun_path is 108 bytes; leave room


LINK_VALUE_MODULES: Final = (
    "master.model",
    "master.core.messages",
    "master.core.records",
    "fairshare.agent_spec",
    "fairshare.command",
)
"""The modules whose dataclasses cross the link pickled by their fields."""


def _by_fields(cls: type) -> Callable[[Any], tuple[type, tuple[Any, ...]]]:
    """A reducer rebuilding ``cls`` from its fields in order (every field is an ``__init__``
    argument)."""
    names = [field.name for field in dataclasses.fields(cls)]
    if len(names) == 1:
        (name,) = names
        return lambda value: (cls, (getattr(value, name),))
    fields_of = operator.attrgetter(*names)
    return lambda value: (cls, fields_of(value))


def _value_types() -> frozenset[type]:
    found = set()
    for module_name in LINK_VALUE_MODULES:
        for value in vars(importlib.import_module(module_name)).values():
            if (
                isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and value.__module__ == module_name
                and value.__dataclass_params__.init  # type: ignore[attr-defined]
                and not hasattr(value, "__post_init__")
                and all(field.init and not field.kw_only for field in dataclasses.fields(value))
            ):
                found.add(value)
    return frozenset(found)


LINK_VALUE_TYPES: Final = _value_types()
"""The dataclasses ``encode`` pickles by their fields."""
_DISPATCH_TABLE: Final = {
    **copyreg.dispatch_table,
    **{cls: _by_fields(cls) for cls in LINK_VALUE_TYPES},
}


def encode(value: Any) -> bytes:
    """One batch, for the link."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH_TABLE
    pickler.dump(value)
    return buffer.getvalue()


def decode(data: bytes) -> Any:
    """One batch from the link (only ever from a process of the master's own user)."""
    return pickle.loads(data)


def write_frame(writer: asyncio.StreamWriter, data: bytes) -> None:
    """Queue one frame on ``writer`` (the caller awaits ``drain``)."""
    writer.write(_LENGTH.pack(len(data)) + data)


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next frame, or None once the other end closed the connection."""
    try:
        head = await reader.readexactly(_LENGTH.size)
        return await reader.readexactly(_LENGTH.unpack(head)[0])
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def socket_dir(work_dir: Path) -> Path:
    """A fresh directory of mode 0700 for the core's socket: ``<work-dir>/io`` when its path is
    short enough for a Unix socket, else a new one under the temporary directory."""
    candidate = work_dir.resolve() / "io"
    if len(str(candidate / "core.sock")) <= _UNIX_PATH_MAX:
        candidate.mkdir(mode=0o700, exist_ok=True)
        os.chmod(candidate, 0o700)
        (candidate / "core.sock").unlink(missing_ok=True)
        return candidate
    return Path(tempfile.mkdtemp(prefix="fairshare-io-"))
