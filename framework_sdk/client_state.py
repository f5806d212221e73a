"""The state a ``SchedulerClient`` keeps, and what it shows of it.

``ClientState`` declares the fields the client's parts share (the connection loop in
``framework_sdk.session_loop``, the calls in ``framework_sdk.scheduler_calls``, the lifecycle in
``framework_sdk.client``) and the read-only properties over them; ``SchedulerClient.__init__``
sets every field.

Invariants:
- ``_stub`` is not None exactly while a subscription is open (``connected``); only the
  connection loop sets or clears it.
- ``_framework_id`` is the id of the last ``Subscribed`` ('' before the first, unless given).
- Every background task (acknowledgements, reconciliation, a channel's closing) is started by
  ``_spawn`` and stays in ``_background`` until it ends, so ``close`` can wait for it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Coroutine
from typing import Any

from fairshare.masters import MasterFinder
from fairshare.v1 import scheduler_pb2_grpc

from framework_sdk.acknowledgements import AckBatcher
from framework_sdk.delivery import DeliveryLedger
from framework_sdk.errors import CallError
from framework_sdk.events import Event
from framework_sdk.options import ClientOptions
from framework_sdk.types import Demand, FrameworkInfo

__all__ = ["ClientState"]


class ClientState:
    """The fields of one scheduler client and the properties over them."""

    _master: str
    _info: FrameworkInfo
    _demand: Demand | None
    _suppressed: bool
    _options: ClientOptions
    _rng: random.Random
    _finder: MasterFinder
    _framework_id: str
    _master_id: str
    _stub: scheduler_pb2_grpc.SchedulerServiceAsyncStub | None
    _queue: asyncio.Queue[Event | None]
    _subscribed: asyncio.Event
    _task: asyncio.Task[None] | None
    _background: set[asyncio.Task[None]]
    _closed: bool
    _stopping: bool
    _ended: bool
    _fatal: CallError | None
    _last_error: str
    _last_address: str | None  # the master tried last
    _diagnosed: bool  # a failure was looked into (fairshare.tls_probe), once
    _ledger: DeliveryLedger
    _duplicates: int
    _acks: AckBatcher

    # -- state ------------------------------------------------------------------------------

    @property
    def master(self) -> str:
        """Where the master is, as given (HOST:PORT, a list, or etcd://...)."""
        return self._master

    @property
    def framework_id(self) -> str:
        """The framework id ('' until the first subscription)."""
        return self._framework_id

    @property
    def master_id(self) -> str:
        """Id of the master instance of the last subscription ('' before)."""
        return self._master_id

    @property
    def connected(self) -> bool:
        """True while the event stream is open and subscribed."""
        return self._stub is not None

    @property
    def info(self) -> FrameworkInfo:
        """The FrameworkInfo, with the framework id once known."""
        return dataclasses.replace(self._info, framework_id=self._framework_id)

    @property
    def duplicates_dropped(self) -> int:
        """How many re-sent copies of already delivered status updates were dropped so far."""
        return self._duplicates

    @property
    def fatal_error(self) -> CallError | None:
        """Why the client stopped for good, if the master refused or ended the subscription."""
        return self._fatal

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
