"""Discrete-event simulator over ``master.core`` (no network). Built with the simulator issue."""
