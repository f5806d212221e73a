"""A Mesos framework written against pymesos 0.3.15 (PyPI) only, as a Mesos user writes one; the
integration tests of the Mesos API (``test_mesos_pymesos.py``) run it from a Python 3.10 venv
against a real fairshare master's HTTP port. It imports nothing of fairshare.

``python mesos_framework.py MASTER_HTTP SCENARIO [options]`` prints one JSON object per line
(``{"event": ..., "t": ...}``) for everything it sees and does; the test reads them. Scenarios:

- ``run``: launch ``--tasks`` command tasks (``--command``, ``{task}`` replaced by the task id;
  ``--tasks 0``: as many as offered, for ever), ``--per-offer`` at most per offer, and stop
  (tearing down) once all ended; ``--explicit-acks`` acknowledges each update itself,
  ``--ack-delay`` seconds after receiving it;
- ``decline``: decline ``--rounds`` offers with ``refuse_seconds`` ``--refuse``;
- ``suppress``: decline the first offer for an hour, SUPPRESS, wait ``--wait`` s, REVIVE, and
  stop at the next offer;
- ``reconcile``: launch one long task; once RUNNING reconcile it explicitly, then implicitly,
  then a task that does not exist; then KILL it and stop once it is KILLED;
- ``failover``: launch one long task and, once RUNNING, exit at once without a teardown;
  ``--framework-id`` subscribes again with that id, reconciles implicitly, kills what runs and
  stops;
- ``subscribe``: subscribe (``--principal``/``--secret`` for HTTP basic auth) and stop.
"""

import argparse
import json
import os
import threading
import time

from pymesos import MesosSchedulerDriver, Scheduler


def emit(event, **fields):
    # one write of the whole line: pymesos's threads log to stderr, which shares the file, and
    # print's separate write of the newline let a log line land between the two
    line = json.dumps({"event": event, "t": time.time(), **fields}) + "\n"
    os.write(1, line.encode())


def scalar(offer, name):
    return sum(
        r["scalar"]["value"]
        for r in offer.get("resources", [])
        if r["name"] == name and r["type"] == "SCALAR"
    )


def task_info(offer, task_id, command, cpus, mem):
    return {
        "task_id": {"value": task_id},
        "agent_id": offer["agent_id"],
        "name": task_id,
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": cpus}},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": mem}},
        ],
        "command": {"value": command, "shell": True},
    }


class Framework(Scheduler):
    """Reports every callback; scenarios override ``offers`` and ``update``."""

    def __init__(self, args):
        self.args = args
        self.launched = 0
        self.ended = set()
        self.lock = threading.Lock()

    def registered(self, driver, framework_id, master_info):
        emit("registered", framework_id=framework_id["value"], master=dict(master_info))

    def reregistered(self, driver, master_info):
        emit("reregistered", framework_id=driver.framework_id, master=dict(master_info))

    def disconnected(self, driver):
        emit("disconnected")

    def error(self, driver, message):
        emit("error", message=message)

    def offerRescinded(self, driver, offer_id):
        emit("rescinded", offer_id=offer_id["value"])

    def resourceOffers(self, driver, offers):
        for offer in offers:
            emit(
                "offer",
                offer_id=offer["id"]["value"],
                agent_id=offer["agent_id"]["value"],
                hostname=offer["hostname"],
                cpus=scalar(offer, "cpus"),
                mem=scalar(offer, "mem"),
                attributes=offer.get("attributes", []),
            )
        with self.lock:
            self.offers(driver, offers)

    def statusUpdate(self, driver, update):
        emit(
            "update",
            task_id=update["task_id"]["value"],
            state=update["state"],
            reason=update.get("reason", ""),
            message=update.get("message", ""),
            source=update.get("source", ""),
            uuid=update.get("uuid", ""),
            agent_id=update.get("agent_id", {}).get("value", ""),
        )
        if self.args.explicit_acks and "uuid" in update:
            threading.Timer(self.args.ack_delay, self.acknowledge, (driver, update)).start()
        with self.lock:
            self.update(driver, update)

    def acknowledge(self, driver, update):
        emit("ack", task_id=update["task_id"]["value"], uuid=update["uuid"])
        driver.acknowledgeStatusUpdate(update)

    def offers(self, driver, offers):
        for offer in offers:
            driver.declineOffer(offer["id"], {"refuse_seconds": 1})

    def update(self, driver, update):
        pass

    def launch(self, driver, offer, limit, refuse=1.0):
        """Launch up to ``limit`` tasks of the configured shape on ``offer``."""
        args = self.args
        cpus, mem, tasks = scalar(offer, "cpus"), scalar(offer, "mem"), []
        while len(tasks) < limit and cpus >= args.cpus - 1e-9 and mem >= args.mem - 1e-9:
            self.launched += 1
            task_id = f"{args.name}-{self.launched}"
            command = args.command.replace("{task}", task_id)
            tasks.append(task_info(offer, task_id, command, args.cpus, args.mem))
            cpus, mem = cpus - args.cpus, mem - args.mem
        if tasks:
            emit(
                "launch",
                offer_id=offer["id"]["value"],
                tasks=[t["task_id"]["value"] for t in tasks],
            )
            driver.launchTasks(offer["id"], tasks, {"refuse_seconds": refuse})
        else:
            driver.declineOffer(offer["id"], {"refuse_seconds": refuse})


TERMINAL = {"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
            "TASK_DROPPED", "TASK_GONE", "TASK_UNKNOWN"}  # fmt: skip


class Run(Framework):
    def offers(self, driver, offers):
        args = self.args
        for offer in offers:
            left = (
                args.per_offer
                if args.tasks == 0
                else min(args.per_offer, args.tasks - self.launched)
            )
            self.launch(driver, offer, left, refuse=args.refuse)

    def update(self, driver, update):
        if update["state"] in TERMINAL:
            self.ended.add(update["task_id"]["value"])
        if self.args.tasks and len(self.ended) >= self.args.tasks:
            emit("done")
            threading.Timer(self.args.ack_delay + 0.5, driver.stop).start()


class Decline(Framework):
    seen = 0

    def offers(self, driver, offers):
        for offer in offers:
            self.seen += 1
            emit("decline", offer_id=offer["id"]["value"], refuse=self.args.refuse)
            driver.declineOffer(offer["id"], {"refuse_seconds": self.args.refuse})
        if self.seen >= self.args.rounds:
            emit("done")
            driver.stop()


class Suppress(Framework):
    phase = "first"

    def offers(self, driver, offers):
        for offer in offers:
            driver.declineOffer(offer["id"], {"refuse_seconds": 3600})
        if self.phase == "first":
            self.phase = "suppressed"
            driver.suppressOffers()
            emit("suppressed")
            threading.Timer(self.args.wait, self.revive, (driver,)).start()
        elif self.phase == "revived":
            emit("done")
            driver.stop()

    def revive(self, driver):
        with self.lock:
            self.phase = "revived"
            emit("reviving")
            driver.reviveOffers()


class Reconcile(Framework):
    step = 0
    task = ""

    def offers(self, driver, offers):
        for offer in offers:
            self.launch(driver, offer, 1 if not self.launched else 0, refuse=3600)

    def update(self, driver, update):
        task_id, state = update["task_id"]["value"], update["state"]
        reason = update.get("reason", "")
        if self.step == 0 and state == "TASK_RUNNING":
            self.step, self.task = 1, task_id
            emit("reconcile", kind="explicit", tasks=[task_id])
            driver.reconcileTasks([{"task_id": {"value": task_id}}])
        elif self.step == 1 and reason == "REASON_RECONCILIATION":
            self.step = 2
            emit("reconcile", kind="implicit", tasks=[])
            driver.reconcileTasks([])
        elif self.step == 2 and reason == "REASON_RECONCILIATION":
            self.step = 3
            emit("reconcile", kind="unknown", tasks=["ghost"])
            driver.reconcileTasks([{"task_id": {"value": "ghost"}}])
        elif self.step == 3 and task_id == "ghost":
            self.step = 4
            emit("kill", task_id=self.task)
            driver.killTask({"value": self.task})
        elif self.step == 4 and state in TERMINAL:
            emit("done")
            driver.stop()


class Failover(Framework):
    def offers(self, driver, offers):
        for offer in offers:
            wanted = 1 if not self.args.framework_id and not self.launched else 0
            self.launch(driver, offer, wanted, refuse=3600)

    def reregistered(self, driver, master_info):
        super().reregistered(driver, master_info)
        emit("reconcile", kind="implicit", tasks=[])
        driver.reconcileTasks([])

    def update(self, driver, update):
        task_id, state = update["task_id"]["value"], update["state"]
        if not self.args.framework_id and state == "TASK_RUNNING":
            emit("crash", framework_id=driver.framework_id, task_id=task_id)
            os._exit(3)  # no teardown: the master keeps the framework for its failover timeout
        if self.args.framework_id and state == "TASK_RUNNING":
            emit("kill", task_id=task_id)
            driver.killTask({"value": task_id})
        elif self.args.framework_id and state in TERMINAL:
            emit("done")
            driver.stop()


class Subscribe(Framework):
    def registered(self, driver, framework_id, master_info):
        super().registered(driver, framework_id, master_info)
        emit("done")
        threading.Thread(target=driver.stop).start()


SCENARIOS = {"run": Run, "decline": Decline, "suppress": Suppress, "reconcile": Reconcile,
             "failover": Failover, "subscribe": Subscribe}  # fmt: skip


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("master")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--name", default="pymesos")
    parser.add_argument("--role", default="")
    parser.add_argument("--tasks", type=int, default=1)
    parser.add_argument("--per-offer", type=int, default=1000)
    parser.add_argument("--cpus", type=float, default=0.1)
    parser.add_argument("--mem", type=float, default=32)
    parser.add_argument("--command", default="echo hello from {task}")
    parser.add_argument("--refuse", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wait", type=float, default=2.0)
    parser.add_argument("--explicit-acks", action="store_true")
    parser.add_argument("--ack-delay", type=float, default=0.0)
    parser.add_argument("--failover-timeout", type=float, default=100.0)
    parser.add_argument("--framework-id", default="")
    parser.add_argument("--principal")
    parser.add_argument("--secret")
    args = parser.parse_args()
    framework = {"user": "", "name": args.name, "failover_timeout": args.failover_timeout}
    if args.role:
        framework["role"] = args.role
    if args.framework_id:
        framework["id"] = {"value": args.framework_id}
    if args.principal:
        framework["principal"] = args.principal
    driver = MesosSchedulerDriver(
        SCENARIOS[args.scenario](args),
        framework,
        args.master,
        implicit_acknowledgements=not args.explicit_acks,
        principal=args.principal,
        secret=args.secret,
    )
    emit("start", scenario=args.scenario, framework_id=args.framework_id)
    driver.run()
    emit("exit")


if __name__ == "__main__":
    main()
