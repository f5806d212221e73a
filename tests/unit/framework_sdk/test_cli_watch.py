"""``fairshare status --watch`` against a canned OperatorService: frames, bars, Ctrl-C, errors."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from fairshare import cli
from sdk_helpers import run_async
from test_cli_status import drf_table1_state, operator_server

from client_commands import status as sdk_cli
from client_commands.status_document import render_share_bars, share_bar, state_to_dict

T = TypeVar("T")


class Screen(io.StringIO):
    """A text stream that says whether it is a terminal, with a chosen encoding."""

    def __init__(self, terminal: bool, encoding: str = "utf-8") -> None:
        super().__init__()
        self._terminal = terminal
        self._encoding = encoding

    def isatty(self) -> bool:
        return self._terminal

    @property
    def encoding(self) -> str:  # type: ignore[override]  # StringIO's is read-only as well
        return self._encoding


def with_master(action: Callable[[str], T]) -> T:
    """Run ``action(address)`` in a thread while a canned OperatorService serves."""

    async def scenario() -> T:
        servers = operator_server()
        address = await servers.__anext__()
        try:
            return await asyncio.to_thread(action, address)
        finally:
            await servers.aclose()

    return run_async(scenario())


def test_share_bar_has_the_width_and_the_proportion() -> None:
    assert share_bar(0.0, 10) == "░" * 10
    assert share_bar(1.0, 10) == "█" * 10
    assert share_bar(0.5, 10) == "█" * 5 + "░" * 5
    assert share_bar(0.0625, 10) == "▋" + "░" * 9  # 5 eighths of one cell
    assert share_bar(2 / 3, 12, ascii_only=True) == "#" * 8 + "." * 4
    for share in (-1.0, 0.01, 0.333, 0.999, 1.5, float("nan")):
        assert len(share_bar(share, 17)) == 17 == len(share_bar(share, 17, ascii_only=True))
    assert share_bar(1.5, 4) == "████" and share_bar(-1.0, 4) == "░░░░"


def test_share_bars_list_every_framework() -> None:
    document = state_to_dict(drf_table1_state())
    lines = render_share_bars(document, width=12, ascii_only=True).splitlines()
    assert lines[0] == "DOMINANT SHARE"
    assert lines[1] == "A  ########....  0.667 mem  running 3"
    assert lines[2] == "B  ########....  0.667 cpus  running 2"
    document["frameworks"] = []
    assert render_share_bars(document).splitlines()[1] == "(no frameworks)"


def test_watch_on_a_terminal_clears_the_screen_before_every_frame() -> None:
    screen = Screen(terminal=True)
    naps: list[float] = []
    code = with_master(lambda address: sdk_cli.watch(address, 0.5, screen, 3, naps.append))
    assert code == 0
    assert naps == [0.5, 0.5]  # between frames only
    frames = screen.getvalue().split(sdk_cli.CLEAR_SCREEN)
    assert frames[0] == "" and len(frames) == 4
    for frame in frames[1:]:
        lines = frame.splitlines()
        assert lines[0].startswith("fairshare status --watch  127.0.0.1:")
        assert "every 0.5s" in lines[0]
        assert "DOMINANT SHARE" in lines
        assert any(line.startswith("A  ") and "█" in line and "0.667 mem" in line for line in lines)
        assert any(line.startswith("fw-a") for line in lines)  # the status table follows


def test_watch_into_a_pipe_prints_plain_frames_in_ascii() -> None:
    pipe = Screen(terminal=False, encoding="ascii")
    code = with_master(lambda address: sdk_cli.watch(address, 2.0, pipe, 2, lambda _: None))
    assert code == 0
    text = pipe.getvalue()
    assert "\x1b" not in text
    assert text.count("fairshare status --watch") == 2
    assert text.encode("ascii")  # no block characters for an ASCII stream
    assert "0.667 cpus" in text


def test_ctrl_c_ends_the_watch_with_exit_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    naps: list[float] = []

    def interrupted_sleep(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(sdk_cli, "watch", _with_sleep(sdk_cli.watch, interrupted_sleep))
    code = with_master(
        lambda address: cli.main(["status", "--master", address, "--watch", "--interval", "250ms"])
    )
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert naps == [0.25, 0.25]
    assert out.count("DOMINANT SHARE") == 2  # two frames, then Ctrl-C during the second nap


def _with_sleep(watch: Callable[..., int], sleep: Callable[[float], None]) -> Callable[..., int]:
    def patched(*args: Any, **kwargs: Any) -> int:
        return watch(*args, sleep=sleep, **kwargs)

    return patched


def test_watch_shows_an_unreachable_master_and_goes_on() -> None:
    async def closed_port() -> str:
        servers = operator_server()
        address = await servers.__anext__()
        await servers.aclose()
        return address

    address = run_async(closed_port())
    pipe = Screen(terminal=False)
    assert sdk_cli.watch(address, 0.1, pipe, 2, lambda _: None) == 0
    text = pipe.getvalue()
    assert text.count(f"no master answers at {address}") == 2
    assert "UNAVAILABLE" in text and "Traceback" not in text


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--json"], "--watch: draws a table; it cannot be combined with --json"),
        (["--interval", "0"], "--interval '0': '0' must be more than zero"),
    ],
)
def test_bad_watch_flags_exit_2(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    code = cli.main(["status", "--master", "127.0.0.1:1", "--watch", *flags])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == f"fairshare status: {message}\n"
