"""``fairshare run`` never waits silently (issue 24, item 3), with a real master and agent:

- a resource name no agent advertises (``cpu:1``, a typo of ``cpus``) is refused at once, exit
  2, with the known names, custom ones an agent advertises included (and those are accepted);
- a task larger than every agent is reported within seconds, Nomad-style (``no agent has
  mem:99999999; the largest has mem:1024``), and Ctrl-C then exits 130 and tears it down;
- ``--detach`` with nothing running returns after its 30 s, exit 1, saying why;
- the run logs nothing on stderr unless asked (WARNING by default).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable

from daemons import ROOT, Daemon, daemon_env, fairshare_status, wait_for

AGENT = "cpus:2;mem:1024;fpgas:2"


def run(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", "run", *args],
        cwd=ROOT, env=daemon_env(), capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def names(master: Daemon) -> set[str]:
    return {f["name"] for f in fairshare_status(master.address)["frameworks"]}


def test_an_unknown_resource_name_is_refused_with_the_known_ones(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    agent_factory(master, 1, AGENT)
    started = time.monotonic()
    typo = run("--master", master.address, "--name", "typo", "--task", "cpu:1")
    assert typo.returncode == 2, typo.stderr
    assert time.monotonic() - started < 15
    assert "unknown resource name 'cpu' (did you mean cpus?)" in typo.stderr
    assert "cpus, disk, fpgas, gpus, mem" in typo.stderr  # fpgas: the agent's own
    assert "Traceback" not in typo.stderr and typo.stdout == ""
    assert "typo" not in names(master)  # nothing was registered
    custom = run("--master", master.address, "--name", "fpga", "--task", "cpus:0.5;fpgas:1",
                 "--command", "true")  # fmt: skip
    assert custom.returncode == 0, custom.stderr
    assert custom.stdout.startswith("fpga-1 FINISHED"), custom.stdout
    assert custom.stderr == ""  # no INFO lines unless asked


def test_a_task_larger_than_every_agent_is_said_at_once_and_ctrl_c_exits_130(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    agent_factory(master, 1, AGENT)
    waiting = subprocess.Popen(
        [sys.executable, "-m", "fairshare.cli", "run", "--master", master.address,
         "--name", "huge", "--task", "cpus:1;mem:99999999"],
        cwd=ROOT, env=daemon_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert waiting.stderr is not None
        started = time.monotonic()
        line = waiting.stderr.readline()
        assert time.monotonic() - started < 10
        assert "no agent has mem:99999999; the largest has mem:1024" in line, line
        assert "waiting for one to register (Ctrl-C to stop)" in line
        wait_for(lambda: "huge" in names(master), 30, "the framework subscribed")
        waiting.send_signal(signal.SIGINT)
        assert waiting.wait(30) == 130
    finally:
        if waiting.poll() is None:
            waiting.kill()
        waiting.communicate()
    wait_for(lambda: "huge" not in names(master), 30, "the framework torn down")


def test_detach_with_nothing_running_returns_in_time_saying_why(
    master: Daemon, agent_factory: Callable[..., list[Daemon]]
) -> None:
    agent_factory(master, 1, AGENT)
    started = time.monotonic()
    done = run("--master", master.address, "--name", "never", "--task", "cpus:1;mem:99999999",
               "--detach", "--detach-wait", "4s")  # fmt: skip
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert 4 <= took < 34, took  # its 4 s wait, then why and the teardown
    assert "none of the 1 task(s) of cpus:1;mem:99999999 runs after 4s" in done.stderr
    assert "no agent has mem:99999999; the largest has mem:1024" in done.stderr
    wait_for(lambda: "never" not in names(master), 30, "the framework torn down")
