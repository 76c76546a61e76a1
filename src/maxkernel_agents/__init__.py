"""The shared sub-agents: planner, implementer and debugger, independent of the backend.

Registered through the ``maxkernel`` entry point ``agents`` like any plugin, with
``trylast=True`` so that a third-party implementation of a role runs first.
"""
