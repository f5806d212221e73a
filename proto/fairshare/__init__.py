"""fairshare wire API namespace: the versioned gRPC/protobuf packages (fairshare.v1)."""
