"""Durable master state (agents admitted, frameworks, weights) in SQLite. Built with the daemons."""
