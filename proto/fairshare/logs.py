"""One log line per event on stderr, as ``text`` or ``json``, for every daemon and command
(docs/architecture.md §7).

Call ``log_event(logger, "offer.sent", framework_id=..., offers=3)``; events are dotted names,
``subject.what_happened`` (``agent.registered``, ``task.launched``). The formatter prints

- text: ``2024-05-01T12:00:00.123Z INFO offer.sent framework_id=fw-1 offers=3``
- json: ``{"ts": "2024-05-01T12:00:00.123Z", "level": "INFO", "event": "offer.sent", ...}``

Invariants: every record is exactly one line (newlines in values are escaped); timestamps are
UTC with milliseconds and a ``Z``, in both formats; field values are rendered with ``str``
(text; quoted when they hold spaces, quotes or ``=``) or as JSON scalars; JSON lines always have
the keys ``ts``, ``level``, ``event`` and ``logger``, then the fields; records logged without
``log_event`` (libraries) come out in the same shape with their message as event.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TextIO

__all__ = ["EventFormatter", "LogLimiter", "configure_logging", "log_event"]

_FIELDS = "fairshare_fields"


def log_event(
    logger: logging.Logger,
    event: str,
    level: int = logging.INFO,
    *,
    exc_info: BaseException | None = None,
    **fields: Any,
) -> None:
    """Log ``event`` with ``fields`` as one line (``exc_info``: its traceback as field
    ``error``, escaped onto the same line)."""
    if logger.isEnabledFor(level):
        logger.log(level, event, exc_info=exc_info, extra={_FIELDS: fields})


def _timestamp(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created * 1000) % 1000:03d}Z"


def _text_value(value: Any) -> str:
    text = str(value).replace("\n", "\\n")
    if not text or any(ch in text for ch in ' "='):
        return json.dumps(text)
    return text


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


class EventFormatter(logging.Formatter):
    """Formats records as one text or JSON line."""

    def __init__(self, fmt: str = "text") -> None:
        super().__init__()
        if fmt not in ("text", "json"):
            raise ValueError(f"log format must be text or json, got {fmt!r}")
        self.fmt = fmt

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = dict(getattr(record, _FIELDS, {}))
        event = record.getMessage()
        if record.exc_info:
            fields["error"] = self.formatException(record.exc_info)
        ts = _timestamp(record.created)
        if self.fmt == "json":
            line = {"ts": ts, "level": record.levelname, "event": event, "logger": record.name}
            line.update({key: _json_value(value) for key, value in fields.items()})
            return json.dumps(line, separators=(",", ":"))
        parts = [ts, record.levelname, event.replace("\n", "\\n")]
        parts.extend(f"{key}={_text_value(value)}" for key, value in fields.items())
        return " ".join(parts)


def configure_logging(fmt: str = "text", level: str = "INFO", stream: TextIO | None = None) -> None:
    """Send every log record of the process to ``stream`` (stderr) in ``fmt``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(EventFormatter(fmt))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


class LogLimiter:
    """A token bucket per key: ``allow(key)`` is the number of lines of ``key`` held back since
    the last one that got through (0 for none), or None when this one must be held back too.

    At most ``rate`` lines per second per key after a burst of ``burst``; at most ``keys``
    keys are tracked (the least recently used is forgotten), so memory stays bounded."""

    def __init__(
        self,
        rate: float = 1.0,
        burst: float = 5.0,
        keys: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate, self.burst, self.keys, self._clock = rate, burst, keys, clock
        self._buckets: OrderedDict[Hashable, list[float]] = OrderedDict()  # tokens, at, held

    def allow(self, key: Hashable) -> int | None:
        """Let one line of ``key`` through? (see the class docstring)"""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = [self.burst, now, 0.0]
            while len(self._buckets) > self.keys:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
        tokens = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        if tokens < 1.0:
            bucket[0] = tokens
            bucket[2] += 1
            return None
        bucket[0] = tokens - 1.0
        held, bucket[2] = int(bucket[2]), 0.0
        return held
