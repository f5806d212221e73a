"""``EtcdRegistry``: the registry of HA masters in etcd (docs/architecture.md §4, §5),
written only by the
leader and fenced by its leadership.

Keys, under the cluster's prefix (``--registry etcd://...[/prefix]``):
``registry/meta`` (schema version, cluster id, creation time), ``registry/agents/<agent id>``,
``registry/frameworks/<framework id>``, ``registry/weights/<role|framework>/<target>``,
``registry/quotas/<role path>`` (schema 3), ``registry/reservations/<agent id>`` (schema 4:
an agent's dynamic reservations, role path -> resources); an agent's row holds its operator's
drain under ``drain`` (schema 5; absent: none); each value one JSON object, the row
written whole
(``operations.Change``).

Invariants (beside those of ``operations.Registry``):
- every write is one etcd transaction whose compare is the leader key's create revision (the
  term's epoch): a master that is no longer the leader, or leads a later term, cannot write
  (the transaction fails, ``RegistryFenced`` is raised and ``on_fenced`` tells the leadership
  to step down at once); at most ``MAX_ROWS`` rows per write (etcd's default limit of
  operations per transaction is 128);
- a write blocks the runtime's loop until etcd answered, or at most ``timeout`` seconds (then
  ``RegistryWriteError``: the outcome is unknown; a later term reads whatever committed); the
  calls run on the etcd thread (``master.ha.etcd_thread``);
- ``load`` reads the whole registry with one linearizable range read after the election, so it
  sees every write any earlier leader made (those writes were fenced by older epochs);
- a registry of an older schema loads unchanged (rows without a newer field read its default;
  schema 2 has no quotas) and its meta row is rewritten with this master's schema version in
  the term's first (fenced) write, best effort, so that an older master, which would not read
  the newer rows, refuses the registry instead of misreading it (as an upgraded SQLite file);
- with a ``key`` (``--registry-key``, a secret the masters hold and etcd does not) every row
  is written with ``mac``, an HMAC-SHA256 of its etcd key and its value; ``load`` does not
  load a row whose mac is missing or wrong (logged ``registry.row.quarantined``, the row left
  in etcd for an operator to see) and refuses a registry whose meta row is not signed: access
  to etcd alone cannot forge an owner, a principal, a weight, a quota or a reservation (it can
  still delete rows, or put back a value a master once wrote under the same key);
- the registry is never silently reset: a master whose work dir marker (``cluster.id``) names a
  cluster refuses etcd holding another cluster's registry, or none at all (etcd lost its data:
  restore it, or clear the masters' work dirs to start a new cluster).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from fairshare.etcd import leader_key
from fairshare.logs import log_event
from fairshare.master_target import EtcdTarget

from master.registry.entries import (
    AGENT_STATES,
    AgentEntry,
    FrameworkEntry,
    RegistryError,
    RegistryWriteError,
    agent_spec_from_json,
    agent_spec_to_json,
    drain_from_json,
    drain_to_json,
    framework_spec_from_json,
    framework_spec_to_json,
    quota_from_json,
    quota_to_json,
    read_marker,
    reservations_from_json,
    reservations_to_json,
    write_marker,
)
from master.registry.operations import (
    Change,
    Forgotten,
    QuotaChange,
    Registry,
    ReservationChange,
    WeightChange,
)
from master.registry.sqlite_store import MARKER_FILE, SCHEMA_VERSION

__all__ = ["MAX_ROWS", "EtcdRegistry", "RegistryFenced"]

MAX_ROWS: Final = 128
MAC_FIELD: Final = "mac"
log = logging.getLogger("fairshare.master")
Blocking = Callable[[Any, float], Any]
"""``run(coroutine, timeout)``: ``EtcdThread.run``."""


class RegistryFenced(RegistryWriteError):
    """The write was refused: this master does not lead the term it wrote for."""


class EtcdRegistry(Registry):
    """The registry in etcd, as written by the leader of one term (``epoch``)."""

    def __init__(
        self,
        target: EtcdTarget,
        client: Any,
        run: Blocking,
        epoch: int,
        timeout: float,
        on_fenced: Callable[[str], None] | None = None,
        key: bytes | None = None,
    ) -> None:
        super().__init__("")
        self._mac_key = key
        self.target = target
        self.client = client  # fairshare.etcd.EtcdClient, used on the etcd thread only
        self._run = run
        self.epoch = epoch
        self.timeout = timeout
        self.on_fenced = on_fenced
        self._leader_key = leader_key(target)
        self._closed = False

    def close(self) -> None:
        """The term ended: every later write fails at once (its runtime may still try one)."""
        self._closed = True

    # -- keys -------------------------------------------------------------------------------------

    def _key(self, *parts: str) -> bytes:
        return self.target.key("registry", *parts)

    def _row(self, change: Change) -> tuple[bytes, bytes | None]:
        """The key and value (None: delete) of one change."""
        if isinstance(change, AgentEntry):
            value: dict[str, Any] = {
                "spec": json.loads(agent_spec_to_json(change.spec)),
                "registered_at": change.registered_at,
                "state": change.state,
                "active": change.active,
                "principal": change.principal,
                "changed_at": change.changed_at,
            }
            if change.drain is not None:
                value["drain"] = json.loads(drain_to_json(change.drain))
            return self._key("agents", change.agent_id), _encode(value)
        if isinstance(change, FrameworkEntry):
            value = {
                "spec": json.loads(framework_spec_to_json(change.spec)),
                "registered_at": change.registered_at,
                "removed": change.removed,
                "removed_at": change.removed_at,
            }
            return self._key("frameworks", change.spec.framework_id), _encode(value)
        if isinstance(change, Forgotten):
            return self._key(f"{change.kind}s", change.key), None
        if isinstance(change, ReservationChange):
            key = self._key("reservations", change.agent_id)
            if not change.reserved:
                return key, None
            return key, _encode(json.loads(reservations_to_json(change.reserved)))
        if isinstance(change, QuotaChange):
            key = self._key("quotas", change.role)
            if change.quota is None:
                return key, None
            return key, _encode(json.loads(quota_to_json(change.quota)))
        key = self._key("weights", change.kind, change.target)
        return key, None if change.weight is None else _encode({"weight": change.weight})

    # -- loading ----------------------------------------------------------------------------------

    def load(self, work_dir: Path) -> None:
        """Read the registry (creating it in an etcd that never had one, unless the work dir's
        marker says a cluster was kept there); ``RegistryError`` says why it cannot be used."""
        try:
            rows = self._run(self._read_all(), self.timeout * 4)
        except Exception as error:
            raise RegistryError(f"cannot read the registry from {self.target}: {error}") from None
        meta = rows.pop(self._key("meta"), None)
        if meta is not None:
            meta = self._verified(self._key("meta"), meta)
            if meta is None:
                raise RegistryError(
                    f"etcd {self.target}: the registry's meta row has no valid signature of"
                    " --registry-key: it was written without that key, or forged (start the"
                    " masters with the key the registry was written with)"
                )
        marker = work_dir / MARKER_FILE
        expected = read_marker(marker)
        if meta is None:
            if expected is not None:
                raise RegistryError(
                    f"etcd {self.target} holds no registry, but {marker} says cluster {expected}"
                    " kept its registry there: restore etcd's data, or clear the masters' work"
                    " dirs to start a new cluster (agents and frameworks register afresh)"
                )
            meta = self._create_meta()
        self.cluster_id, version = _check_meta(meta, self.target)
        if expected is not None and expected != self.cluster_id:
            raise RegistryError(
                f"etcd {self.target} holds the registry of cluster {self.cluster_id}, but"
                f" {marker} names cluster {expected}"
            )
        if expected is None:
            write_marker(marker, self.cluster_id)
        self._load_rows(rows)
        if version < SCHEMA_VERSION:
            self._upgrade_meta(meta)

    def _upgrade_meta(self, meta: bytes) -> None:
        """Rewrite an older registry's meta row with this master's schema version; best effort:
        a write that fails (fenced: ``on_fenced`` was told) leaves it to the next term."""
        raw = json.loads(meta)
        raw["schema_version"] = SCHEMA_VERSION
        with contextlib.suppress(RegistryWriteError):
            self._fenced_write([(self._key("meta"), _encode(raw))])

    async def _read_all(self) -> dict[bytes, bytes]:
        prefix = self._key("")
        found = await self.client.call(lambda etcd: etcd.get_prefix(prefix), self._per_endpoint(4))
        return {bytes(kv.key): bytes(kv.value) for kv in found.kvs}

    def _create_meta(self) -> bytes:
        meta = _encode(
            {
                "schema_version": SCHEMA_VERSION,
                "cluster_id": uuid.uuid4().hex,
                "created_at": time.time(),
            }
        )
        self._fenced_write([(self._key("meta"), meta)])
        return meta

    def _load_rows(self, rows: dict[bytes, bytes]) -> None:
        changes: list[Change] = []
        for key, signed in rows.items():
            value = self._verified(key, signed)
            if value is None:
                log_event(
                    log,
                    "registry.row.quarantined",
                    logging.WARNING,
                    key=key.decode(errors="replace"),
                    reason="no valid signature of --registry-key: not loaded",
                )
                continue
            kind, _, name = key[len(self._key("")) :].decode().partition("/")
            try:
                changes.append(_parse_row(kind, name, json.loads(value)))
            except (ValueError, KeyError, TypeError) as error:
                raise RegistryError(
                    f"etcd {self.target}: the registry row {key.decode()} is invalid: {error}"
                ) from None
        self._apply(changes)

    # -- writing ----------------------------------------------------------------------------------

    def _per_endpoint(self, times: float) -> float:
        """The time each etcd endpoint is given within ``times`` x ``timeout`` (a member that
        does not answer leaves time for the next), at least 0.5 s."""
        return max(0.5, self.timeout * times / len(self.target.endpoints))

    def _commit(self, changes: Sequence[Change]) -> None:
        if len(changes) > MAX_ROWS:
            raise RegistryWriteError(
                f"registry write of {len(changes)} rows: etcd takes at most {MAX_ROWS} per"
                " transaction; change fewer agents at once"
            )
        self._fenced_write([self._row(change) for change in changes])

    def _mac(self, key: bytes, value: bytes) -> str:
        assert self._mac_key is not None
        return hmac.new(self._mac_key, key + b"\n" + value, hashlib.sha256).hexdigest()

    def _signed(self, key: bytes, value: bytes | None) -> bytes | None:
        """``value`` with its mac (unchanged without a key, or for a delete)."""
        if value is None or self._mac_key is None:
            return value
        row = json.loads(value)
        row[MAC_FIELD] = self._mac(key, value)
        return _encode(row)

    def _verified(self, key: bytes, stored: bytes) -> bytes | None:
        """The row without its mac; None when a key is set and the mac is missing or wrong."""
        if self._mac_key is None:
            return stored
        try:
            row = json.loads(stored)
            mac = row.pop(MAC_FIELD)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        value = _encode(row)
        if not isinstance(mac, str) or not hmac.compare_digest(mac, self._mac(key, value)):
            return None
        return value

    def _fenced_write(self, rows: list[tuple[bytes, bytes | None]]) -> None:
        rows = [(key, self._signed(key, value)) for key, value in rows]
        if self._closed:
            raise RegistryWriteError(f"the registry of term {self.epoch} is closed: the term ended")
        try:
            committed = self._run(self._transaction(rows), self.timeout)
        except Exception as error:  # timeout, or no endpoint answered: the outcome is unknown
            raise RegistryWriteError(f"registry write to {self.target} failed: {error}") from None
        if not committed:
            reason = f"this master no longer leads term {self.epoch}: its registry write was fenced"
            if self.on_fenced is not None:
                self.on_fenced(reason)
            raise RegistryFenced(reason)

    async def _transaction(self, rows: list[tuple[bytes, bytes | None]]) -> bool:
        async def write(etcd: Any) -> bool:
            ops = etcd.transactions
            fence = ops.create(self._leader_key) == self.epoch
            success = [
                ops.delete(key) if value is None else ops.put(key, value) for key, value in rows
            ]
            succeeded, _ = await etcd.transaction(compare=[fence], success=success, failure=[])
            return bool(succeeded)

        result: bool = await self.client.call(write, self._per_endpoint(1))
        return result


def _encode(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True).encode()


def _parse_row(kind: str, name: str, value: dict[str, Any]) -> Change:
    if kind == "agents":
        state = str(value["state"])
        if state not in AGENT_STATES:
            raise ValueError(f"unknown agent state {state!r}")
        spec = agent_spec_from_json(json.dumps(value["spec"]))
        return AgentEntry(
            name,
            spec,
            float(value["registered_at"]),
            state,
            bool(value["active"]),
            str(value.get("principal", "")),
            float(value.get("changed_at", 0.0)),
            None if value.get("drain") is None else drain_from_json(json.dumps(value["drain"])),
        )
    if kind == "frameworks":
        framework = framework_spec_from_json(json.dumps(value["spec"]))
        if framework.framework_id != name:
            raise ValueError(f"it holds framework {framework.framework_id}")
        return FrameworkEntry(
            framework,
            float(value["registered_at"]),
            bool(value["removed"]),
            float(value.get("removed_at", 0.0)),
        )
    if kind == "weights":
        weight_kind, _, target = name.partition("/")
        if weight_kind not in ("role", "framework") or not target:
            raise ValueError(f"unknown weight {name!r}")
        return WeightChange(weight_kind, target, float(value["weight"]))
    if kind == "quotas":
        if not name:
            raise ValueError("a quota row names no role")
        return QuotaChange(name, quota_from_json(json.dumps(value)))
    if kind == "reservations":
        if not name:
            raise ValueError("a reservations row names no agent")
        return ReservationChange(name, reservations_from_json(json.dumps(value)))
    raise ValueError(f"unknown kind of row {kind!r}")


def _check_meta(meta: bytes, target: EtcdTarget) -> tuple[str, int]:
    """The registry's cluster id and schema version; ``RegistryError`` for a newer schema."""
    try:
        raw = json.loads(meta)
        version, cluster_id = int(raw["schema_version"]), str(raw["cluster_id"])
    except (ValueError, KeyError, TypeError):
        raise RegistryError(f"etcd {target}: the registry's meta row is invalid") from None
    if version > SCHEMA_VERSION:
        raise RegistryError(
            f"etcd {target}: registry schema version {version} is newer than this master's"
            f" {SCHEMA_VERSION}: run the fairshare version that wrote it"
        )
    return cluster_id, version
