"""The ``fairshare`` command line's client commands: the one home of what an operator or a user
runs against a cluster (``status``, ``run``, ``logs``, ``agents``, ``frameworks``, ``tasks``,
``stop``, ``weights``, ``quota``, ``reserve``, ``unreserve``, ``roles``).

Each module is an entry of the kernel's command table (``fairshare.cli.COMMANDS``) and speaks
to the master over the wire API only: the operator commands with ``OperatorService`` calls
(``master_calls``: how a command finds the leader, calls it and says why it could not), ``run``
and ``logs`` through the SDK (``framework_sdk``: the built-in framework is a framework like any
other). The status document (``status_document``) is built from ``GetState`` once, for every
command that shows the cluster.

Invariants (import contracts in CI): this package stands on the kernel and the SDK, never on
``master`` or ``agent``; nothing but the kernel's command table names it (as strings).
"""
