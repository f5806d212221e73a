"""One log line per event on stderr, as text (``event key=value ...``) or JSON objects.

Invariants: an event is a short name plus flat key/value fields (``log_event(logger, "registered",
agent_id=...)``); the text form is ``TIME LEVEL LOGGER event key=value ...`` with values quoted
only when they contain spaces or quotes; the JSON form is one object per line with ``time``,
``level``, ``logger``, ``event`` and the fields. Nothing else is ever written to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Final

__all__ = ["LOG_FORMATS", "configure_logging", "log_event"]

LOG_FORMATS: Final = ("text", "json")
_FIELDS: Final = "fairshare_fields"


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log one event with its fields."""
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={_FIELDS: fields})


def _value_text(value: Any) -> str:
    text = str(value)
    if not text or any(ch in text for ch in ' "=\n'):
        return json.dumps(text)
    return text


def _time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class TextFormatter(logging.Formatter):
    """``2025-01-01T00:00:00.000+00:00 INFO fairshare.agent registered agent_id=ag-1``."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, _FIELDS, {})
        parts = [_time(record), record.levelname, record.name, record.getMessage()]
        parts.extend(f"{key}={_value_text(value)}" for key, value in fields.items())
        line = " ".join(parts)
        if record.exc_info:
            line += " error=" + json.dumps(self.formatException(record.exc_info))
        return line


class JsonFormatter(logging.Formatter):
    """``{"time": ..., "level": "INFO", "logger": ..., "event": "registered", ...fields}``."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, _FIELDS, {})
        obj: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname,
            "logger": record.name,
            "event": record.getMessage(),
        }
        obj.update({key: value for key, value in fields.items() if key not in obj})
        if record.exc_info:
            obj["error"] = self.formatException(record.exc_info)
        return json.dumps(obj, default=str)


def configure_logging(log_format: str, level: int = logging.INFO) -> None:
    """Send every log record to stderr in ``log_format`` (``text`` or ``json``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
