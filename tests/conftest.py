"""Session-wide guard: no process the tests started may outlive the test run (issue 16, item 5).

At the start of the session every process the tests start inherits ``PYTEST_FAIRSHARE_SESSION``
in its environment (set here in the pytest process; ``daemons.daemon_env`` keeps it); at the
end, any live process whose environment carries this session's mark (daemons, frameworks,
``fairshare up`` and whatever they started) fails the run: it is named, then killed. A process
gets ``LEAK_GRACE`` seconds to finish exiting first.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from etcd_server import EtcdMember, SecuredEtcd, start_cluster
from session_guard import SESSION_MARK, marked_processes

LEAK_GRACE = 5.0


@pytest.fixture(scope="session")
def etcd_member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdMember]:
    """One etcd member on loopback for the whole session (tests keep apart by key prefix:
    ``etcd_url``); killed at the end of the session."""
    members = start_cluster(tmp_path_factory.mktemp("etcd"), ["127.0.0.1"])
    try:
        yield members[0]
    finally:
        members[0].kill()


@pytest.fixture
def etcd_url(etcd_member: EtcdMember) -> str:
    """``etcd://127.0.0.1:PORT/test-<random>``: the session's etcd, a prefix of the test's own."""
    return f"etcd://{etcd_member.endpoint}/test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def secured_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredEtcd]:
    """One etcd member serving TLS only, with client certificates and authentication on
    (``etcd_server.SecuredEtcd``), for the whole session (tests keep apart by key prefix:
    ``secured.url()``); killed at the end of the session."""
    etcd = SecuredEtcd(tmp_path_factory.mktemp("etcd-secured"))
    try:
        yield etcd
    finally:
        etcd.kill()


def pytest_sessionstart(session: pytest.Session) -> None:
    os.environ[SESSION_MARK] = uuid.uuid4().hex


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    mark = os.environ.get(SESSION_MARK)
    if not mark or not Path("/proc/self/environ").exists():
        return
    deadline = time.monotonic() + LEAK_GRACE
    leaked = marked_processes(mark)
    while leaked and time.monotonic() < deadline:
        time.sleep(0.1)
        leaked = marked_processes(mark)
    if not leaked:
        return
    for pid in leaked:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    lines = "\n".join(f"  pid {pid}: {command}" for pid, command in sorted(leaked.items()))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"processes started by the tests were still running (now killed):\n{lines}"
    if reporter is not None:
        reporter.write("\n")
        reporter.write_line(f"LEAKED PROCESSES (the run fails): {message}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
