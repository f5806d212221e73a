"""The framework lifecycle a newcomer meets (issue 16 items 3 and 4), with real processes.

- ``fairshare run --detach`` returns once its tasks run, leaving a follower subscribed as the
  framework (it acknowledges the tasks' updates); without it the master keeps them (a week's
  failover timeout) until ``fairshare stop NAME``;
- a plain SDK framework has Mesos's failover timeout 0: when its process dies, its framework
  and tasks go at once;
- Ctrl-C on a script blocked in ``SchedulerDriver.run()`` exits cleanly (no traceback) and
  tears the framework down;
- an SDK framework pointed at a master that is down says so (a WARNING even without logging
  configured) and gets its ``error`` callback after ``registration_timeout``; ``fairshare run``
  names the master and the error once.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemons import ROOT, STARTED, Client, Daemon, daemon_env, fairshare_status, wait_for
from test_live_cluster import SETTLE, run_framework

from framework_sdk import FrameworkInfo

DRIVER_SCRIPT = """
import sys
from fairshare.resources import ResourceVector
from framework_sdk import FrameworkInfo, Scheduler, SchedulerDriver, TaskSpec
from framework_sdk.options import ClientOptions

class Keep(Scheduler):
    launched = 0
    def registered(self, driver, framework_id, master):
        print("registered", framework_id, flush=True)
    def resource_offers(self, driver, offers):
        for offer in offers:
            if self.launched < 2:
                self.launched += 1
                driver.launch_tasks(offer, [TaskSpec(f"t{{self.launched}}",
                                                     ResourceVector.parse("cpus:1;mem:128"))])
            else:
                driver.decline_offer(offer)
    def error(self, driver, message):
        print("error callback:", message, flush=True)

driver = SchedulerDriver(Keep(), FrameworkInfo(name="{name}"), sys.argv[1],
                         options=ClientOptions(registration_timeout={timeout}))
print("run returned", driver.run().name, flush=True)
"""


def fairshare(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *argv],
        cwd=ROOT,
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def frameworks(master: Daemon) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in fairshare_status(master.address)["frameworks"]}


def driver_script(tmp_path: Path, name: str, timeout: float = 60.0) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(DRIVER_SCRIPT.format(name=name, timeout=timeout)))
    return path


def test_sdk_frameworks_fail_over_in_zero_seconds_by_default() -> None:
    assert FrameworkInfo(name="x").failover_timeout == 0.0


class _Killable:
    """A process the test did not start itself (a detached run's follower)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)


def test_detached_run_returns_and_stop_ends_it(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    agent_factory(master, 1)
    started = time.monotonic()
    done = fairshare(
        "run", "--master", master.address, "--name", "nightly", "--task", "cpus:1;mem:256",
        "--count", "2", "--detach",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < SETTLE
    assert "detached" in done.stdout and "fairshare stop nightly" in done.stdout
    found = re.search(r"process (\d+) follows them", done.stdout)
    assert found, done.stdout  # the follower acknowledges the tasks' updates (issue 24)
    follower = int(found.group(1))
    STARTED.append(_Killable(follower))
    framework = wait_for(
        lambda: (f := frameworks(master).get("nightly")) and f["tasks"] == {"RUNNING": 2} and f,
        SETTLE,
        "the detached framework kept, its follower subscribed",
    )
    assert framework["state"] != "DISCONNECTED"  # the follower is its scheduler now
    os.kill(follower, signal.SIGTERM)  # the follower gone: the master keeps the framework
    framework = wait_for(
        lambda: (f := frameworks(master).get("nightly")) and f["state"] == "DISCONNECTED" and f,
        SETTLE,
        "the detached framework kept while disconnected",
    )
    assert framework["tasks"] == {"RUNNING": 2}
    status = fairshare("frameworks", "--master", master.address)
    (row,) = [line for line in status.stdout.splitlines() if " nightly " in line]
    left = float(row.split()[-1].removeprefix("in").removesuffix("s"))
    assert 604_800 - SETTLE < left <= 604_800  # the failover deadline is a week away
    stopped = fairshare("stop", "--master", master.address, "nightly")
    assert stopped.returncode == 0, stopped.stderr
    wait_for(lambda: not fairshare_status(master.address)["tasks"], SETTLE, "its tasks killed")
    assert frameworks(master) == {}


def test_a_killed_attached_run_leaves_nothing_behind(
    master: Daemon, agent_factory: Callable[..., list[Daemon]], clients: Callable[..., Client]
) -> None:
    agent_factory(master, 1)
    run = run_framework(clients, master, "brief", "cpus:1;mem:256", 2)
    wait_for(
        lambda: frameworks(master).get("brief", {}).get("tasks") == {"RUNNING": 2},
        SETTLE,
        "brief running 2",
    )
    run.kill()  # kill -9: no teardown; failover timeout 0 removes it at once
    wait_for(lambda: frameworks(master) == {}, SETTLE, "the framework removed")
    wait_for(lambda: not fairshare_status(master.address)["tasks"], SETTLE, "its tasks killed")


def test_ctrl_c_on_driver_run_exits_cleanly_and_tears_down(
    master: Daemon, agent_factory: Callable[..., list[Daemon]], clients: Callable[..., Client],
    tmp_path: Path,
) -> None:  # fmt: skip
    agent_factory(master, 1)
    script = clients(str(driver_script(tmp_path, "ctrlc")), master.address)
    wait_for(
        lambda: frameworks(master).get("ctrlc", {}).get("tasks") == {"RUNNING": 2},
        SETTLE,
        "the script's 2 tasks running",
    )
    script.proc.send_signal(signal.SIGINT)
    assert script.proc.wait(SETTLE) == 0, script.log()
    output = script.log()
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert "run returned STOPPED" in output
    wait_for(lambda: frameworks(master) == {}, SETTLE, "the framework torn down")
    assert not fairshare_status(master.address)["tasks"]


def test_a_master_that_is_down_is_reported(clients: Callable[..., Client], tmp_path: Path) -> None:
    nowhere = "127.0.0.1:1"  # nothing listens on port 1
    script = clients(str(driver_script(tmp_path, "lonely", timeout=3.0)), nowhere)
    assert script.proc.wait(SETTLE) == 0, script.log()
    output = script.log()
    assert output.index("master.unreachable") < output.index("error callback:")
    assert f"no master answered at {nowhere} within 3s" in output
    assert "run returned ABORTED" in output and "Traceback" not in output

    done = fairshare(
        "run", "--master", nowhere, "--name", "x", "--task", "cpus:1", "--connect-timeout", "3s",
        timeout=90,
    )  # fmt: skip
    assert done.returncode == 1
    (last,) = [line for line in done.stderr.splitlines() if line.startswith("fairshare run:")]
    assert last.count("master at") == 1 and last.count("within") == 1, last  # said once
