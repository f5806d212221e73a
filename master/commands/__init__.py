"""The master package's subcommands of ``fairshare`` (other than the daemon, ``master.daemon``).

``operator`` (``agents``, ``weights``: calls to a running master's operator API) and ``up`` (a
local cluster of real processes); ``allocate`` and ``simulate`` are offline analysis's
(``analysis``). Each provides ``add_arguments(parser)`` and ``main(args)`` for
``fairshare.cli``'s table; nothing else imports them, and the allocation core never does.
``up``'s parts: ``local_cluster`` (the child processes it starts, restarts and stops) and
``local_etcd`` (the etcd member of HA masters).
"""
