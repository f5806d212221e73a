"""A headless Chromium driven over the DevTools protocol, for the dashboard tests.

Debian's ``chromium`` (``.ci/run`` installs it when missing) is started with the flags this
machine needs (no sandbox as root, no GPU, no background networking) and a fresh profile under
the test's tmp dir, in its own process group so that teardown kills it with every child. The
protocol is spoken over a WebSocket with aiohttp's client (already a dependency of the daemons),
so no driver or browser download is needed.

``Browser.page()`` opens a tab and returns a ``Page``: ``navigate``, ``evaluate`` (a JavaScript
expression's JSON value), ``screenshot`` (PNG bytes of the whole page) and ``errors`` (console
errors, uncaught exceptions and failed loads the page reported).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
)
START_TIMEOUT = 30.0


def chromium_path() -> str | None:
    """The Chromium executable, if installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Page:
    """One tab, spoken to over its DevTools WebSocket."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self._socket = socket
        self._next_id = 0
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.errors: list[str] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self._socket:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            if "id" in data and data["id"] in self._answers:
                self._answers.pop(data["id"]).set_result(data)
            else:
                self._event(data.get("method", ""), data.get("params", {}))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            texts = [str(a.get("value", a.get("description", ""))) for a in params["args"]]
            self.errors.append("console: " + " ".join(texts))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(f"exception: {details.get('exception', {}).get('description')}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}")

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One protocol command; its result (raises on a protocol error)."""
        self._next_id += 1
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[self._next_id] = answer
        await self._socket.send_str(
            json.dumps({"id": self._next_id, "method": method, "params": params})
        )
        data = await asyncio.wait_for(answer, 30)
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        result: dict[str, Any] = data.get("result", {})
        return result

    async def open(self, url: str, width: int = 1400, height: int = 1000) -> None:
        """Enable the event domains, size the window and load ``url``."""
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            await self.call(domain)
        await self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width, height=height, deviceScaleFactor=1, mobile=False,
        )  # fmt: skip
        await self.call("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression (awaited if it is a promise)."""
        result = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float, what: str) -> Any:
        """Poll ``expression`` until it is truthy; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
            await asyncio.sleep(0.1)

    async def screenshot(self) -> bytes:
        """A PNG of the whole page."""
        height = int(await self.evaluate("document.documentElement.scrollHeight"))
        result = await self.call(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": 1400, "height": height, "scale": 1},
        )
        return base64.b64decode(result["data"])

    async def close(self) -> None:
        self._reader.cancel()
        await self._socket.close()


class Browser:
    """A headless Chromium process (kill it with ``kill()``, which tests' teardown calls)."""

    def __init__(self, executable: str, profile: Path, home: Path | None = None) -> None:
        """``home``: the HOME it runs with (its NSS certificate store is ``home/.pki/nssdb``)."""
        profile.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ) if home is None else {**os.environ, "HOME": str(home)}
        self.log_path = profile.parent / "chromium.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: kill() ends every child it started
            env=env,
        )
        self.port_file = profile / "DevToolsActivePort"
        self.session: aiohttp.ClientSession | None = None

    def devtools_port(self) -> int:
        """The DevTools port Chromium picked (waits for it, bounded)."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"chromium exited: {self.log_path.read_text()}")
            if self.port_file.exists():
                lines = self.port_file.read_text().split()
                if lines:
                    return int(lines[0])
            time.sleep(0.05)
        raise AssertionError("chromium did not open its DevTools port")

    async def page(self) -> Page:
        """A new tab."""
        port = self.devtools_port()
        self.session = self.session or aiohttp.ClientSession()
        async with self.session.put(f"http://127.0.0.1:{port}/json/new?about:blank") as answer:
            target = await answer.json()
        socket = await self.session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        return Page(socket)

    async def close_session(self) -> None:
        if self.session is not None:
            await self.session.close()

    def kill(self) -> None:
        """Kill Chromium and every process it started."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        if not self._log.closed:
            self._log.close()
