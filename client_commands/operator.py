"""Operator commands: ``fairshare weights`` (operator weights of roles and frameworks, Mesos's
/weights) and ``fairshare quota`` (quotas of roles, Mesos's /quota); ``fairshare agents`` is in
``client_commands.agents``.

``fairshare weights`` (or ``fairshare weights list``) lists the operator's weights, or says that
none is set; with ``--role R`` (a role path, ``eng`` or ``eng/dev``: ``fairshare.roles``) or
``--framework ID`` and ``--set W`` or ``--clear`` it sets or removes one (durably).

``fairshare quota`` lists every role's quota: its guarantee, its limit, what its subtree
consumes (offered plus used, and its reservations' idle parts) and what is reserved for it
(roles with a reservation and no quota are listed too), then says ``overcommitted`` when the
top-level guarantees add up to more than the pool; with ``--role R`` and ``--guarantee RES``
and/or ``--limit RES`` (Mesos syntax, ``cpus:16;mem:65536``) it sets the role's quota
(durably; both are replaced: a flag left out is no guarantee, or no limit), with
``--force`` even when the new limit is below what the role holds (its offers are rescinded,
no task is killed); ``--clear`` removes it.

All talk to ``--master`` (default from ``FAIRSHARE_MASTER``, the TOML file, then
127.0.0.1:5050; ``OPERATOR_SETTINGS``). ``weights_command`` and ``quota_command`` are their
entries in ``fairshare.cli``'s table.

Invariants (the ``fairshare`` CLI contract): bad input exits 2 with ``fairshare weights: --flag:
<why>`` on stderr and sends nothing; a refusing or unreachable master exits 1 with the master's
reason (2 if the master says the input is invalid); success prints what was done and exits 0.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Final

import grpc
from fairshare.cli import Command, command_settings
from fairshare.resources import ResourceError, ResourceVector
from fairshare.roles import RoleError, check_role
from fairshare.settings import CLIENT_SETTINGS, add_setting_flags
from fairshare.v1 import common_pb2, operator_pb2, operator_pb2_grpc
from fairshare.wire import (
    resources_from_pb,
    resources_to_pb,
)

from client_commands.master_calls import (
    MasterAddress,
    on_leader,
    render_rows,
    report_refusal,
)

__all__ = ["OPERATOR_SETTINGS", "quota_command", "weights_command"]

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_BAD_INPUT: Final = 2
CALL_TIMEOUT: Final = 10.0
OPERATOR_SETTINGS: Final = CLIENT_SETTINGS
"""``--master``, the log flags and the client's TLS and identity: all the settings of ``agents``,
``weights`` and ``quota``."""


def _text(resources: common_pb2.Resources) -> str:
    vector = resources_from_pb(resources)
    return str(vector) if vector else "-"


def _bad_weights(args: argparse.Namespace) -> str | None:
    """Why ``fairshare weights`` flags cannot be used (naming the flag), or None."""
    changing = args.set is not None or args.clear
    if changing and args.role is None and args.framework is None:
        return "--set/--clear: name the target with --role or --framework"
    if not changing and (args.role is not None or args.framework is not None):
        return "--role/--framework: say --set W or --clear"
    if args.role is not None and not args.role.strip():
        return "--role: the role is empty"
    if args.role is not None:
        try:
            check_role(args.role.strip())
        except RoleError as error:
            return f"--role: {error}"
    if args.framework is not None and not args.framework.strip():
        return "--framework: the framework id is empty"
    if args.set is not None and not (math.isfinite(args.set) and 0 < args.set <= 1e6):
        return f"--set: {args.set!r} is not a weight in (0, 1e6]"
    return None


def _weight_text(weight: operator_pb2.Weight) -> str:
    target = weight.WhichOneof("target")
    name = weight.role if target == "role" else weight.framework_id
    return f"{'role' if target == 'role' else 'framework'} {name}  {weight.weight:g}"


def add_weights_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare weights``."""
    parser.add_argument(
        "action",
        nargs="?",
        choices=["list"],
        help="list (the default without --set or --clear): the weights the operator set",
    )
    parser.description = (
        "Without --set or --clear: list the weights the operator set. A framework's weight"
        " overrides its role's, which overrides the weight the framework subscribed with;"
        " weights are durable (kept in the master's registry)."
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--role", help="the role whose weight to set or clear: a path such as eng or eng/dev"
    )
    target.add_argument("--framework", metavar="FRAMEWORK_ID", help="one framework's weight")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--set", type=float, metavar="W", help="the weight, in (0, 1e6]")
    action.add_argument("--clear", action="store_true", help="remove the stored weight")
    add_setting_flags(parser, OPERATOR_SETTINGS)


def run_weights(args: argparse.Namespace) -> int:
    """``fairshare weights``: list, set or clear operator weights; returns the exit code."""
    master = MasterAddress.of(command_settings("weights", OPERATOR_SETTINGS, args))
    problem = _bad_weights(args)
    if problem is None and args.action == "list" and (args.set is not None or args.clear):
        problem = "list: lists only; drop --set/--clear (or drop list)"
    if problem is not None:
        print(f"fairshare weights: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        if args.set is None and not args.clear:
            listed = on_leader(
                master,
                lambda channel: operator_pb2_grpc.OperatorServiceStub(channel).GetWeights(
                    operator_pb2.GetWeightsRequest(), timeout=CALL_TIMEOUT
                ),
            )
            for weight in listed.weights:
                print(_weight_text(weight))
            if not listed.weights:
                print(
                    "(no weights set: every framework has the weight it subscribed with,"
                    " 1 by default)"
                )
            return EXIT_OK
        request = operator_pb2.SetWeightRequest(clear=args.clear, weight=args.set or 0.0)
        if args.role is not None:
            request.role = args.role.strip()
        else:
            request.framework_id = args.framework.strip()
        answer = on_leader(
            master,
            lambda channel: operator_pb2_grpc.OperatorServiceStub(channel).SetWeight(
                request, timeout=CALL_TIMEOUT
            ),
        )
    except grpc.RpcError as error:
        return report_refusal("weights", master, error)
    what = args.role if args.role is not None else args.framework
    print(f"set {_weight_text(answer.weight)}" if answer.HasField("weight") else f"cleared {what}")
    return EXIT_OK


def _quota_flag(text: str | None, flag: str) -> str | None:
    """Why a ``--guarantee``/``--limit`` value cannot be used (naming the flag), or None."""
    if text is None:
        return None
    try:
        vector = ResourceVector.parse(text)
    except ResourceError as error:
        return f"{flag}: {error}"
    named = [part.split(":")[0].strip() for part in text.split(";") if part.strip()]
    zero = [name for name in named if name not in vector.names()]
    if zero:
        return f"{flag}: {zero[0]} is 0 (leave a resource out to not guarantee or limit it)"
    return None if vector else f"{flag}: names no resource (like 'cpus:16;mem:65536')"


def _bad_quota(args: argparse.Namespace) -> str | None:
    """Why ``fairshare quota`` flags cannot be used (naming the flag), or None."""
    setting = args.guarantee is not None or args.limit is not None
    if (setting or args.clear or args.force) and args.role is None:
        return "--guarantee/--limit/--force/--clear: name the role with --role"
    if args.role is not None and not args.role.strip():
        return "--role: the role is empty (the default role is '*')"
    if args.role is not None:
        try:
            check_role(args.role.strip())
        except RoleError as error:
            return f"--role: {error}"
        if not setting and not args.clear:
            return "--role: say --guarantee and/or --limit, or --clear"
    if args.clear and (setting or args.force):
        return "--clear: removes the quota; drop --guarantee, --limit and --force"
    if args.force and args.limit is None:
        return "--force: only with --limit (a limit below what the role holds)"
    return _quota_flag(args.guarantee, "--guarantee") or _quota_flag(args.limit, "--limit")


def _quota_row(quota: operator_pb2.Quota) -> list[str]:
    return [
        quota.role,
        _text(quota.guarantee),
        _text(quota.limit) if quota.HasField("limit") else "-",
        _text(quota.consumed),
        _text(quota.reserved),
    ]


def add_quota_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``fairshare quota``."""
    parser.description = (
        "Without --role: list every role's quota (guarantee, limit, and what its subtree"
        " consumes: offered plus used), and say 'overcommitted' when the top-level guarantees"
        " exceed the pool. With --role: set its guarantee and/or limit (both replaced: one left"
        " out is none), or --clear it. Quotas cover the role and every role below it and are"
        " durable (kept in the master's registry)."
    )
    parser.add_argument(
        "--role", help="the role whose quota to set or clear: a path such as eng or eng/dev"
    )
    parser.add_argument(
        "--guarantee",
        metavar="RESOURCES",
        help="what the role is guaranteed, e.g. 'cpus:16;mem:65536' (each above 0)",
    )
    parser.add_argument(
        "--limit",
        metavar="RESOURCES",
        help="the most its subtree may hold, e.g. 'cpus:32' (resources left out are not limited)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="set a limit below what the role holds: its offers are rescinded, no task is killed",
    )
    parser.add_argument("--clear", action="store_true", help="remove the role's quota")
    add_setting_flags(parser, OPERATOR_SETTINGS)


def _list_quotas(master: MasterAddress) -> None:
    listed = on_leader(
        master,
        lambda channel: operator_pb2_grpc.OperatorServiceStub(channel).GetQuotas(
            operator_pb2.GetQuotasRequest(), timeout=CALL_TIMEOUT
        ),
    )
    header = ["ROLE", "GUARANTEE", "LIMIT", "CONSUMED", "RESERVED"]
    rows = [_quota_row(quota) for quota in listed.quotas]
    print(render_rows(header, rows, "(no quotas or reservations set)"))
    if listed.overcommitted:
        print(
            f"overcommitted: the top-level guarantees ({_text(listed.guaranteed)}) exceed the"
            f" pool ({_text(listed.total)}); not every guarantee can be met until agents join"
        )


def _set_quota(master: MasterAddress, args: argparse.Namespace) -> None:
    role = args.role.strip()
    request = operator_pb2.SetQuotaRequest(role=role, clear=args.clear, force=args.force)
    if args.guarantee is not None:
        request.guarantee.CopyFrom(resources_to_pb(ResourceVector.parse(args.guarantee)))
    if args.limit is not None:
        request.limit.CopyFrom(resources_to_pb(ResourceVector.parse(args.limit)))
    answer = on_leader(
        master,
        lambda channel: operator_pb2_grpc.OperatorServiceStub(channel).SetQuota(
            request, timeout=CALL_TIMEOUT
        ),
    )
    if not answer.HasField("quota"):
        print(f"cleared the quota of {role}")
        return
    _, guarantee, limit, consumed, _ = _quota_row(answer.quota)
    print(f"set the quota of {role}: guarantee {guarantee}, limit {limit} (consumed {consumed})")
    if answer.rescinded_offers:
        print(f"rescinded {answer.rescinded_offers} offer(s) of its subtree; no task was killed")


def run_quota(args: argparse.Namespace) -> int:
    """``fairshare quota``: list, set or clear the quotas of roles; returns the exit code."""
    master = MasterAddress.of(command_settings("quota", OPERATOR_SETTINGS, args))
    problem = _bad_quota(args)
    if problem is not None:
        print(f"fairshare quota: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        if args.role is None:
            _list_quotas(master)
        else:
            _set_quota(master, args)
    except grpc.RpcError as error:
        return report_refusal("quota", master, error)
    return EXIT_OK


weights_command: Final = Command(add_weights_arguments, run_weights)
quota_command: Final = Command(add_quota_arguments, run_quota)
