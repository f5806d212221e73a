"""The fairshare master: allocation core, durable registry, gRPC services and simulator."""
