"""What ``--master`` says (docs/architecture.md §7):
one ``HOST:PORT``, a list ``a:5050,b:5050,c:5050``,
or ``etcd://h1:2379,h2:2379[/prefix]``; parsed here without any I/O (``fairshare.settings``
checks every command's ``--master`` with it; ``fairshare.masters`` finds the leader).

Invariants: ``MasterTarget.parse`` and ``EtcdTarget.parse`` accept exactly the documented
syntax and raise ``ValueError`` naming the part that is wrong; ``str()`` of a parsed target
parses back to an equal one; a list keeps its order without duplicates; an etcd endpoint
without a port is on 2379, a target without a prefix uses ``/fairshare``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_ETCD_PORT",
    "DEFAULT_PREFIX",
    "EtcdTarget",
    "MasterTarget",
    "parse_address",
]

SCHEME: Final = "etcd://"
DEFAULT_ETCD_PORT: Final = 2379
DEFAULT_PREFIX: Final = "/fairshare"


def parse_address(text: str) -> str:
    """One ``HOST:PORT`` (an IPv6 host in brackets); ``ValueError`` otherwise."""
    address = text.strip()
    host, sep, number = address.rpartition(":")
    if not sep or not host or not number.isdigit() or not 0 < int(number) < 65536:
        raise ValueError(f"{address!r} is not HOST:PORT")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise ValueError(f"{address!r}: write an IPv6 host in brackets, [::1]:5050")
    return address


@dataclass(frozen=True, slots=True)
class EtcdTarget:
    """Where an etcd cluster is, and the key prefix fairshare uses in it."""

    endpoints: tuple[tuple[str, int], ...]
    prefix: str = DEFAULT_PREFIX

    @staticmethod
    def is_url(text: str) -> bool:
        """True if ``text`` is an ``etcd://`` address."""
        return text.strip().lower().startswith(SCHEME)

    @classmethod
    def parse(cls, text: str) -> EtcdTarget:
        """``etcd://h1:2379,h2:2379[/prefix]``; ``ValueError`` saying what is wrong."""
        raw = text.strip()
        if not cls.is_url(raw):
            raise ValueError(f"{text!r} is not an etcd:// address")
        hosts, slash, path = raw[len(SCHEME) :].partition("/")
        prefix = "/" + path.strip("/") if slash and path.strip("/") else DEFAULT_PREFIX
        endpoints = tuple(_endpoint(part, text) for part in hosts.split(",") if part.strip())
        if not endpoints:
            raise ValueError(f"{text!r} names no etcd endpoint (etcd://HOST[:PORT],...[/prefix])")
        if any(c.isspace() for c in prefix):
            raise ValueError(f"{text!r}: the key prefix {prefix!r} has whitespace")
        return cls(endpoints, prefix)

    def key(self, *parts: str) -> bytes:
        """The key ``<prefix>/<parts...>``."""
        return "/".join((self.prefix, *parts)).encode()

    def __str__(self) -> str:
        hosts = ",".join(f"{_host(host)}:{port}" for host, port in self.endpoints)
        return f"{SCHEME}{hosts}{self.prefix}"


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _endpoint(part: str, text: str) -> tuple[str, int]:
    raw = part.strip()
    host, sep, number = raw.rpartition(":")
    if not sep or host.endswith(":") or (raw.startswith("[") and not host.endswith("]")):
        host, number = raw, str(DEFAULT_ETCD_PORT)  # no port (an IPv6 host is in brackets)
    host = host.strip("[]")
    if not host or not number.isdigit() or not 0 < int(number) < 65536:
        raise ValueError(f"{text!r}: {raw!r} is not HOST[:PORT]")
    return host, int(number)


@dataclass(frozen=True, slots=True)
class MasterTarget:
    """What ``--master`` says: a list of addresses, or an etcd cluster naming the leader."""

    text: str
    addresses: tuple[str, ...] = ()
    etcd: EtcdTarget | None = None

    @classmethod
    def parse(cls, text: str) -> MasterTarget:
        """``HOST:PORT``, ``a:5050,b:5050`` or ``etcd://...``; ``ValueError`` saying why not."""
        raw = text.strip()
        if EtcdTarget.is_url(raw):
            etcd = EtcdTarget.parse(raw)
            return cls(str(etcd), etcd=etcd)
        parts = [part for part in raw.split(",") if part.strip()]
        if not parts:
            raise ValueError(
                f"{text!r} names no master (HOST:PORT, a list a:5050,b:5050, or etcd://...)"
            )
        addresses = tuple(dict.fromkeys(parse_address(part) for part in parts))
        return cls(",".join(addresses), addresses)

    def __str__(self) -> str:
        return self.text
