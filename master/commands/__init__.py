"""The master package's subcommands of ``fairshare`` (other than the daemon, ``master.daemon``).

``operator`` (``agents``, ``weights``: calls to a running master's operator API), ``up`` (a
local cluster of real processes) and ``allocate`` (the offline calculator, ``calculator``, over
the very core the master runs). Each provides ``add_arguments(parser)`` and ``main(args)`` for
``fairshare.cli``'s table; nothing else imports them, and the allocation core never does.
"""
