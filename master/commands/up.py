"""``fairshare up``: a master and N agents as local processes (and, with ``--demo``, a workload).

With ``--masters N`` above 1 it also starts one local etcd member (``master.commands.local_etcd``,
Debian's ``etcd-server``; TLS with client certificates of the local CA of ``--tls``, or of one
made for etcd alone, and etcd users: docs/security.md) and N HA masters on it
(``--registry etcd://...`` with their ``--etcd-*`` flags and ``--registry-key``; master i on ports
``--port + i`` and ``--metrics-port + i``); agents and frameworks get the list of the masters
and find the leader themselves (docs/architecture.md §5). etcd is stopped last.

Each daemon is the real ``fairshare master`` / ``fairshare agent`` command, started as a child
process with its own work directory under ``--work-dir`` and a port picked by the OS (the master's
port is ``--port``, default 5050): ``master.commands.local_cluster`` starts, restarts and stops
them. ``--demo`` adds two built-in frameworks (``fairshare run``) with the task shapes of the DRF
paper's example and prints the cluster status while they run.

Its settings (``UP_SETTINGS``: flags, ``FAIRSHARE_UP_<SETTING>``, the ``[up]`` TOML table) are
passed to the children as flags, ``--log-level`` and ``--log-format`` too, so they win over
anything the children would read from the environment or a settings file; each child's stderr
goes to a log file under the base directory.

A daemon that dies while the cluster runs (``kill -9`` of the leader, to watch a failover) is
started again in its slot, on the same work dir and ports, and ``up`` says so on its output
(``master 1 exited with code -9; restarting it on HOST:PORT``): the other HA masters elect a
leader meanwhile, the agents keep their tasks and find the new leader, the restarted master
joins as a follower. The HA masters' election lease is ``ELECTION_TTL`` (3 s), so a new leader
is there within seconds.

Invariants: every child is started in this process's session and stopped on exit, whatever the
reason (Ctrl-C, SIGTERM, ``--for`` elapsed, a daemon that cannot be restarted): frameworks
first, then agents, then the master (``LocalCluster.stop``); the exit code is 0 for a clean
stop and 1 when a daemon failed to start, or died ``MAX_RESTARTS`` times within
``RESTART_WINDOW`` (it is not restarted in a loop), or did not serve again. A daemon that fails
is named with the last lines of its log, and the logs are kept (a temporary base directory is
removed only after a clean stop). A default port that is taken (5050, or 9100: node_exporter's
too) is replaced by a free one, with a note; a port given explicitly that is taken is an error
naming its flag.

``--tls`` makes the secure path the easy one: a throwaway CA (``fairshare.local_ca``) under
``<base>/tls`` issues a daemon's certificate (server and client authentication, naming this
machine) to the master and to each agent (``agent-N``) and a client's (client authentication
only: it cannot pose as a daemon) to ``operator``, used by the demo frameworks and the status
lines; every daemon then serves mutual TLS (client certificates required: their common names
are the principals; the agents' ports by ``--tls-client-ca``) and the command to reach the
cluster is printed with its ``--tls-*`` flags.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, Final

from fairshare.cli import command_settings
from fairshare.local_ca import LocalCa, LocalCaError
from fairshare.settings import (
    SHARED_SETTINGS,
    Setting,
    add_setting_flags,
    boolean,
    non_empty_text,
    optional_positive_duration,
    positive_int,
    resource_vector,
)

from master.commands.local_cluster import (
    ClusterError,
    LocalCluster,
    fairshare_command,
    free_port_or_any,
)
from master.commands.local_etcd import LocalEtcdError
from master.config import MASTER_SETTINGS, check_hierarchy, check_rebalance

__all__ = ["DEMO_FRAMEWORKS", "UP_SETTINGS", "add_arguments", "main"]

DEMO_AGENT = "cpus:9;mem:18432"
# DRF paper §4.1: A <1 CPU, 4 GB>, B <3 CPUs, 1 GB>; on one 9 CPU / 18 GB agent DRF runs 3 and 2.
DEMO_FRAMEWORKS = (("A", "cpus:1;mem:4096"), ("B", "cpus:3;mem:1024"))


_MASTER_SETTINGS: Final = {setting.name: setting for setting in MASTER_SETTINGS}


def _master_setting(name: str, help_text: str) -> Setting:
    """The master's own setting ``name`` (parser, default, choices, metavar declared once in
    ``master.settings``), with the help ``fairshare up`` shows for it."""
    return dataclasses.replace(_MASTER_SETTINGS[name], help=help_text)


def _resources(raw: Any) -> str:
    """An agent's ``--resources`` text, checked as the agent will check it."""
    resource_vector(raw)
    return str(raw).strip()


UP_SETTINGS: Final = (
    Setting("agents", positive_int, 2, "how many agents", metavar="N"),
    Setting(
        "masters",
        positive_int,
        1,
        "how many masters; above 1 they are HA masters electing a leader in a local etcd"
        " (Debian's etcd-server)",
        metavar="N",
    ),
    Setting(
        "resources",
        _resources,
        None,
        "each agent's resources, e.g. 'cpus:8;mem:16384' (default: this host's; with --demo"
        f" {DEMO_AGENT})",
    ),
    _master_setting("port", "the master's gRPC port, 0 picks a free one"),
    _master_setting(
        "metrics_port",
        "the master's metrics port; agent i gets the next ones (deploy/prometheus's targets);"
        " 0 picks free ports",
    ),
    Setting(
        "work_dir",
        non_empty_text,
        None,
        "base directory of the daemons' work dirs and logs (default: a temporary directory)",
        metavar="DIR",
    ),
    _master_setting("policy", "the master's fairness policy"),
    _master_setting("placement", "the master's placement policy"),
    _master_setting(
        "hierarchy",
        "how the master shares the pool between roles: hdrf (default under --policy drf),"
        " naive or flat (fairshare master --hierarchy)",
    ),
    Setting(
        "for",
        optional_positive_duration,
        None,
        "stop everything after this long (default: until Ctrl-C or SIGTERM)",
        metavar="DURATION",
    ),
    _master_setting(
        "rebalance",
        "the master preempts preemptible tasks toward DRFH's allocation (fairshare master"
        " --rebalance with its default settings; needs --policy drf)",
    ),
    Setting(
        "tls",
        boolean,
        False,
        "mutual TLS everywhere with a throwaway CA under the base directory (certificates for"
        " the master, each agent and an 'operator' client)",
        switch=True,
    ),
    *(setting for setting in SHARED_SETTINGS if setting.name != "master"),
)
"""The settings of ``fairshare up``, in the order ``--help`` shows them."""


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so both end the cluster the same way."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _show_status(cluster: LocalCluster) -> None:
    flags = cluster.tls_flags("operator")
    subprocess.run(fairshare_command("status", "--master", cluster.address, *flags), check=False)


def _watch(cluster: LocalCluster, demo: bool, seconds: float | None) -> int:
    deadline = None if seconds is None else time.monotonic() + seconds
    next_status = time.monotonic() + 2.0
    while deadline is None or time.monotonic() < deadline:
        if cluster.dead():
            try:
                cluster.restart_dead(lambda line: print(f"fairshare up: {line}", flush=True))
            except ClusterError as error:
                print(f"fairshare up: {error}", file=sys.stderr)
                return 1
        if demo and time.monotonic() >= next_status:
            _show_status(cluster)
            next_status = time.monotonic() + 5.0
        time.sleep(0.2)
    if demo:
        _show_status(cluster)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare up``."""
    parser.description = (
        "Run a master and N agents as local processes (the real daemons, each with its own work"
        " dir and log file) until Ctrl-C, SIGTERM or --for elapses; a daemon that dies is"
        " restarted in its slot (kill -9 the leader of --masters 3 to watch a failover)."
    )
    add_setting_flags(parser, UP_SETTINGS)
    parser.add_argument(
        "--demo",
        action="store_true",
        help="also run the DRF paper's two frameworks and print the status as they run",
    )


def main(args: argparse.Namespace) -> int:
    """``fairshare up``: run the cluster until Ctrl-C, SIGTERM or ``--for`` elapses."""
    values = command_settings("up", UP_SETTINGS, args)
    check_rebalance(values["rebalance"], values["policy"])
    check_hierarchy(values["policy"], values["hierarchy"], frozenset())
    log_flags = ("--log-level", values["log_level"], "--log-format", values["log_format"])
    temporary = not values["work_dir"]
    base = Path(values["work_dir"] or tempfile.mkdtemp(prefix="fairshare-up-"))
    if temporary:
        base.chmod(0o711)  # command tasks run as the agents' --task-user: let it reach its sandbox
    code = _run_cluster(args, values, base, log_flags)
    if code == 0 and temporary:
        shutil.rmtree(base, ignore_errors=True)
    elif code != 0:
        print(f"fairshare up: the daemons' logs are kept in {base}", file=sys.stderr)
    return code


def _run_cluster(
    args: argparse.Namespace, values: dict[str, Any], base: Path, log_flags: tuple[str, ...]
) -> int:
    with contextlib.ExitStack() as stack:
        try:
            port, note = free_port_or_any("--port", values["port"], 5050)
            metrics_port, metrics_note = free_port_or_any(
                "--metrics-port", values["metrics_port"], 9100
            )
        except ClusterError as error:
            print(f"fairshare up: {error}", file=sys.stderr)
            return 1
        for line in (note, metrics_note):
            if line:
                print(f"fairshare up: {line}")
        cluster = LocalCluster(
            base,
            port,
            metrics_port,
            values["policy"],
            values["placement"],
            log_flags,
            ("--rebalance",) * values["rebalance"]
            + (("--hierarchy", values["hierarchy"]) if values["hierarchy"] else ()),
        )
        stack.enter_context(_stop_on_signals())
        stack.callback(cluster.stop)
        resources = values["resources"] or (DEMO_AGENT if args.demo else None)
        try:
            if values["tls"]:
                cluster.ca = LocalCa.create(base / "tls")
            address = cluster.start_masters(values["masters"])
            if args.demo:  # frameworks first: offers are not preempted, so arrival order matters
                for name, task in DEMO_FRAMEWORKS:
                    cluster.start_framework(name, task, 20)
            cluster.start_agents(values["agents"], resources)
            masters = "master" if values["masters"] == 1 else f"{values['masters']} HA masters"
            scheme = "https" if cluster.ca is not None else "http"
            dashboards = " ".join(f"{scheme}://{d}/" for d in cluster.dashboards)
            print(
                f"fairshare up: {masters} at {address}, {values['agents']} agent(s), logs in"
                f" {base}; dashboard {dashboards} ; Ctrl-C stops everything"
            )
            if cluster.ca is not None:
                flags = " ".join(cluster.tls_flags("operator"))
                print(f"fairshare up: mutual TLS; try: fairshare status --master {address} {flags}")
                bundle = cluster.ca.browser_bundle(cluster.ca.certificate("operator"))
                print(
                    f"fairshare up: the dashboard asks for a client certificate: import {bundle}"
                    f" (no password) into your browser and trust {cluster.ca.cert}, then choose"
                    " the certificate 'operator' when asked (docs/security.md: the dashboard of a"
                    " mutual-TLS master)"
                )
            return _watch(cluster, args.demo, values["for"])
        except (
            ClusterError,
            LocalCaError,
            LocalEtcdError,
            OSError,
        ) as error:  # OSError: a work dir that cannot be made
            print(f"fairshare up: {error}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 0
    return 0
