"""What runs on a cluster host: an actor holding that host's own backend, judging candidates sent as JSON.

The actor process is a Ray worker; candidate code never runs in it. It calls
the backend's ``evaluate`` exactly as ``maxkernel run`` does on one machine, so
the candidate runs in a fresh sandboxed worker process of the backend's pool,
with the same limits (``[eval]`` settings travel from the orchestrator). The
backend stays alive between calls: its pre-warmed workers and the task
references it has computed are reused by the next candidate sent here.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from maxkernel_core import Candidate, Task, from_json
from maxkernel_core.serialize import dumps

from . import taskfiles


def host_settings(settings) -> dict[str, Any]:
    """The parts of the orchestrator's settings a host needs: the plugins' sections (how to judge), which
    plugins to load."""
    import attrs

    return {"sections": {name: attrs.asdict(section) for name, section in settings.sections.items()},
            "plugins": attrs.asdict(settings.plugins)}


class EvalHost:
    """One evaluation slot on a host (Ray places it by the resources it asks for)."""

    def __init__(self, backend_name: str, settings: dict[str, Any]) -> None:
        from maxkernel_core.config import PluginSettings, Settings
        from maxkernel_core.plugins import get_plugin_manager

        self.settings = Settings(plugins=PluginSettings(**settings["plugins"]))
        plugins = self.settings.plugins
        pm = get_plugin_manager(only=plugins.load, disable=plugins.disable)
        declared = pm.registries.settings_sections()
        self.settings.sections.update({name: declared[name](**values) for name, values in settings["sections"].items()
                                       if name in declared})
        self.backend = pm.registries.get("backend", backend_name).cls(self.settings)

    def where(self) -> dict[str, Any]:
        """Which host and process this is, for the Evaluation's record of where it was judged."""
        import ray

        return {"node": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
                "hostname": socket.gethostname(), "pid": os.getpid()}

    def evaluate(self, task_json: str, bundle: dict[str, Any], candidate_json: str, target: str) -> str:
        """Task and Candidate JSON (plus the task's files) in, Evaluation JSON out."""
        task = taskfiles.unpack(from_json(task_json, Task), bundle)
        candidate = from_json(candidate_json, Candidate)
        return dumps(self.backend.evaluate(task, candidate, target=target))

    def close(self) -> None:
        """Stop the backend's worker processes before the actor goes."""
        self.backend.close()
