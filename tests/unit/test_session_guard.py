"""The session guard of ``tests/conftest.py`` finds a process the tests started and left running
(issue 16, item 5: masters and ``fault_framework.py`` were still listening after pytest ended)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from session_guard import SESSION_MARK, marked_processes


def test_a_left_running_child_is_found_by_its_mark() -> None:
    mark = os.environ[SESSION_MARK]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 10
        while child.pid not in marked_processes(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.pid in marked_processes(mark)
    finally:
        child.kill()
        child.wait(10)
    assert child.pid not in marked_processes(mark)  # an exited child is not a leak
