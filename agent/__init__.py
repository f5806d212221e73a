"""The fairshare agent daemon: pure ``AgentState``, placeholder-task executor and runtime."""
