"""``fairshare status``: the cluster state as a table, one JSON object, or a live view.

``status_command`` is its entry in ``fairshare.cli``'s table (``STATUS_SETTINGS``, resolved by
``fairshare.settings``).

Invariants:
- ``status --json`` prints exactly one JSON object (``client_commands.status_document``).
- ``status --watch`` redraws the table with a bar per framework's dominant share every
  ``--interval`` until Ctrl-C, which exits 0: on a terminal it clears the screen before each
  frame, otherwise it prints the frames one after another. An unreachable master is shown in
  the frame (the watch goes on and shows the cluster again once the master answers).
- A master that does not answer as one exits 1 with one line saying why
  (``client_commands.master_calls.master_failure``); bad input exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Final, TextIO

import grpc
from fairshare.cli import Command, command_settings
from fairshare.settings import (
    CLIENT_SETTINGS,
    Setting,
    SettingsError,
    add_setting_flags,
    client_security,
    positive_duration,
)
from fairshare.transport import INSECURE, ClientSecurity

from client_commands.master_calls import MasterAddress, fetch_state, master_failure
from client_commands.status_document import render_share_bars, render_table, state_to_dict

__all__ = ["STATUS_SETTINGS", "status", "status_command", "watch", "watch_frame"]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
STATUS_TIMEOUT: Final = 5.0
CLEAR_SCREEN: Final = "\x1b[H\x1b[2J"  # cursor home, erase the screen

STATUS_SETTINGS: Final = (
    *CLIENT_SETTINGS,
    Setting(
        "interval", positive_duration, "2s", "--watch: time between frames", metavar="DURATION"
    ),
)
"""The settings of ``fairshare status``."""


def watch_frame(
    master: str, interval: float, ascii_only: bool = False, security: ClientSecurity = INSECURE
) -> str:
    """One frame of ``status --watch``: a header, the share bars and the status table."""
    header = f"fairshare status --watch  {master}  every {interval:g}s  {time.strftime('%X')}"
    address = MasterAddress(master, security)
    try:
        document = state_to_dict(fetch_state(address, on_election=None, timeout=STATUS_TIMEOUT))
    except grpc.RpcError as error:
        return f"{header}\n\n{master_failure(address, error)}\n"
    bars = render_share_bars(document, ascii_only=ascii_only)
    return f"{header}\n\n{bars}\n\n{render_table(document)}\n"


def watch(
    master: str,
    interval: float,
    out: TextIO | None = None,
    frames: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    security: ClientSecurity = INSECURE,
) -> int:
    """Redraw ``watch_frame`` every ``interval`` seconds (``frames`` times, or until Ctrl-C)."""
    out = out or sys.stdout
    terminal = out.isatty()
    ascii_only = not (out.encoding or "").lower().replace("-", "").startswith("utf8")
    shown = 0
    try:
        while frames is None or shown < frames:
            if shown:
                sleep(interval)
            frame = watch_frame(master, interval, ascii_only, security)
            out.write(CLEAR_SCREEN + frame if terminal else ("\n" if shown else "") + frame)
            out.flush()
            shown += 1
    except KeyboardInterrupt:
        if terminal:
            out.write("\n")
    return EXIT_OK


def status(args: argparse.Namespace) -> int:
    """``fairshare status``: the state as a table, one JSON object with --json, or --watch."""
    values = command_settings("status", STATUS_SETTINGS, args)
    master: str = values["master"]
    security = client_security(values)
    if args.watch and args.json:
        raise SettingsError("--watch: draws a table; it cannot be combined with --json")
    if args.watch:
        return watch(master, values["interval"], security=security)
    address = MasterAddress(master, security)
    try:
        state = fetch_state(address, timeout=STATUS_TIMEOUT)
    except grpc.RpcError as error:
        print(f"fairshare status: {master_failure(address, error)}", file=sys.stderr)
        return EXIT_FAILURE
    document = state_to_dict(state)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(render_table(document))
    return EXIT_OK


def add_status_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare status``."""
    parser.description = (
        "Show the cluster state: agents, frameworks with their dominant shares, tasks, offers."
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (machine-readable)"
    )
    parser.add_argument("--watch", action="store_true", help="redraw every --interval until Ctrl-C")
    add_setting_flags(parser, STATUS_SETTINGS)


status_command: Final = Command(add_status_arguments, status)
