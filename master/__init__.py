"""The fairshare master: allocation core, durable registry, gRPC services and web API (offline
analysis over the same core stands beside it, in ``analysis``)."""
