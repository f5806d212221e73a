"""grpc.aio servicers: thin adapters between ``fairshare.v1`` and ``master.core``."""
