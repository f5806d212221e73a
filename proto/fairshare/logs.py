"""One log line per event on stderr, as ``text`` or ``json``, for every daemon and command
(DESIGN.md §8).

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
from typing import Any, TextIO

__all__ = ["EventFormatter", "configure_logging", "log_event"]

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
