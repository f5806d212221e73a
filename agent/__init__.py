"""The fairshare agent daemon: pure ``AgentState``, task executors and the runtime."""
