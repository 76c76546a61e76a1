"""``--executor ray``: each evaluation on an actor of a Ray cluster; a host lost mid-evaluation is retried elsewhere.

Settings (``[executor]``): ``address`` (``auto``, ``ray://HOST:10001``, ``HOST:6379``;
unset: ``RAY_ADDRESS``, else a cluster started on this machine, else a new
local one), ``resources`` per evaluation (default ``{TPU = 1}`` when the
cluster has TPUs, else ``{CPU = 1}``), ``concurrency`` (actors; default: as
many as the cluster's resources hold) and ``max_retries``.

Each attempt is recorded in the Evaluation's details, under ``executor``: the host
that gave the verdict, and every host lost on the way with the error Ray
reported. A verdict is never made up for a lost evaluation: past
``max_retries`` the run stops with an error, and ``--resume`` continues it.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
from typing import Any

import attrs
from maxkernel_core import Backend, Candidate, Evaluation, Executor, ExecutorError, MaxKernelError, Task, from_json
from maxkernel_core.errors import ExecutorUnreachable
from maxkernel_core.serialize import dumps

from . import taskfiles
from .hosts import HostPool, one_line

INSTALL_HINT = "pip install 'maxkernel[ray]' (in a checkout: make install-test)"


def import_ray():
    try:
        import ray
    except ImportError:
        raise ExecutorError(f"the ray executor needs Ray, which is not installed here: {INSTALL_HINT}") from None
    return ray


def probe(address: str | None, timeout_s: float = 10.0) -> None:
    """Fail in seconds on a HOST:PORT nobody answers at: ``ray.init`` would retry it for many minutes."""
    if not address or address == "auto" or address.startswith("local"):
        return
    hostport = address.removeprefix("ray://").rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise ExecutorError(f"executor.address {address!r} is not auto, ray://HOST:PORT or HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ExecutorUnreachable(f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); "
                            "check --ray-address and that the head node is up (`ray status` on it)") from None


def lost_host_errors(ray) -> tuple[type[BaseException], ...]:
    """What Ray raises when the process or node running an evaluation is gone (or no longer answers)."""
    ex = ray.exceptions
    names = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError", "NodeDiedError",
             "ObjectLostError", "OwnerDiedError", "GetTimeoutError")
    return tuple(getattr(ex, n) for n in names if hasattr(ex, n))


#: The limit assumed for one evaluation when the backend states none.
DEFAULT_EVALUATION_S = 300.0


class RayExecutor(Executor):
    name = "ray"
    description = "the hosts of a Ray cluster (TPU VMs, KubeRay): an actor per evaluation slot, sandboxed inside"

    def __init__(self, settings=None) -> None:
        from maxkernel_core.config import Settings

        super().__init__(settings)
        self.settings = settings or Settings()
        config = self.settings.executor
        self.ray = ray = import_ray()
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            probe(config.address)
            try:
                # Actor logs stay on the hosts (Ray's log files): the run's own display owns this terminal.
                ray.init(address=config.address, log_to_driver=False, logging_level=logging.WARNING)
            except Exception as exc:  # ConnectionError, a bad address, a version mismatch with the cluster
                raise ExecutorUnreachable(f"cannot connect to the Ray cluster at {config.address or 'RAY_ADDRESS or this machine'}"
                                    f" ({one_line(exc)}); check --ray-address and `ray status`") from None
        try:
            self.resources = dict(config.resources) or self._default_resources()
            self.slots = config.concurrency or self._slots_from_cluster()
        except ExecutorError:
            self.close_connection()
            raise
        self.max_retries = max(config.max_retries, 0)
        self._pools: dict[str, HostPool] = {}
        self._bundles: dict[str, Any] = {}
        self._lock = threading.Lock()

    # --- sizing --------------------------------------------------------------------

    def _default_resources(self) -> dict[str, float]:
        return {"TPU": 1.0} if self.ray.cluster_resources().get("TPU", 0) > 0 else {"CPU": 1.0}

    def _slots_from_cluster(self) -> int:
        total = self.ray.cluster_resources()
        fits = []
        for name, amount in self.resources.items():
            if amount <= 0:
                continue
            if total.get(name, 0) <= 0:
                have = ", ".join(sorted(k for k in total if not k.startswith("node:"))) or "nothing"
                raise ExecutorError(f"the Ray cluster has no {name!r} resource (it has: {have}); set "
                                    "executor.resources to what a host offers, or executor.concurrency when an "
                                    "autoscaler will add such hosts")
            fits.append(math.floor(total[name] / amount + 1e-9))
        slots = min(fits) if fits else 1
        if slots < 1:
            raise ExecutorError(f"one evaluation asks for {self.resources}, more than the Ray cluster has ({total})")
        return slots

    @property
    def max_concurrency(self) -> int:
        return self.slots

    def _actor_options(self) -> dict[str, Any]:
        custom = dict(self.resources)
        options: dict[str, Any] = {"num_cpus": custom.pop("CPU", 0.0), "max_restarts": 0, "max_task_retries": 0,
                                   "scheduling_strategy": "SPREAD"}  # spread over hosts: one lost host costs least
        if "GPU" in custom:
            options["num_gpus"] = custom.pop("GPU")
        if "memory" in custom:
            options["memory"] = custom.pop("memory")
        if custom:
            options["resources"] = custom
        return options

    @staticmethod
    def call_timeout_s(backend: Backend) -> float:
        """How long one call may stay silent before its host counts as lost: the backend's own limit, plus the
        first call's reference job (a trusted job with a longer limit) and the workers' start-up."""
        limit = backend.evaluation_timeout_s() or DEFAULT_EVALUATION_S
        return limit + max(limit, 600.0) + 300.0

    def _pool(self, backend: Backend) -> HostPool:
        with self._lock:
            pool = self._pools.get(backend.name)
            if pool is None:
                from .host import EvalHost, host_settings

                actor_cls = self.ray.remote(EvalHost)
                limit = backend.evaluation_timeout_s() or DEFAULT_EVALUATION_S
                pool = HostPool(self.ray, actor_cls, self._actor_options(), (backend.name, host_settings(self.settings)),
                                self.slots, start_timeout_s=max(limit, 600.0))
                self._pools[backend.name] = pool
            return pool

    def _bundle(self, task: Task):
        """The task's files, put in the object store once per content and shared by every call."""
        bundle = taskfiles.pack(task)
        with self._lock:
            ref = self._bundles.get(bundle["digest"])
            if ref is None:
                ref = self._bundles[bundle["digest"]] = self.ray.put(bundle)
            return ref

    # --- one evaluation ------------------------------------------------------------

    def evaluate(self, backend: Backend, task: Task, candidate: Candidate, *, target: str) -> Evaluation:
        ray = self.ray
        lost_errors = lost_host_errors(ray)
        pool = self._pool(backend)
        call_timeout_s = self.call_timeout_s(backend)
        bundle, task_json, candidate_json = self._bundle(task), dumps(task), dumps(candidate)
        lost: list[dict[str, Any]] = []
        while True:
            host = pool.take()
            try:
                text = ray.get(host.handle.evaluate.remote(task_json, bundle, candidate_json, target),
                               timeout=call_timeout_s)
            except lost_errors as exc:
                pool.lose(host)
                lost.append({**host.where, "error": one_line(exc)})
                if len(lost) > self.max_retries:
                    raise ExecutorUnreachable(
                        f"the evaluation of candidate {candidate.id} was lost with its Ray host {len(lost)} times "
                        f"(last: {lost[-1]['error']}); nothing was recorded for it: fix the cluster, then continue "
                        "with --resume") from None
                continue
            except ray.exceptions.RayTaskError as exc:
                pool.give_back(host)
                cause = getattr(exc, "cause", None)
                if isinstance(cause, MaxKernelError):  # the backend's own one-line error (a task it cannot load)
                    raise cause from None
                raise ExecutorError(f"the {backend.name} backend failed on host {host.where.get('ip')} "
                                    f"({one_line(exc)})") from None
            pool.give_back(host)
            break
        evaluation = from_json(text, Evaluation)
        # Where it was judged, and every host lost before: a retried evaluation is never a silent one.
        record = {"name": self.name, "host": host.where, "attempts": len(lost) + 1, "lost": lost}
        return attrs.evolve(evaluation, details={**evaluation.details, "executor": record})

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
            self._bundles.clear()
        for pool in pools:
            pool.close()
        self.close_connection()

    def close_connection(self) -> None:
        """Disconnect from the cluster, unless an embedding application connected before us."""
        if self._owns_ray and self.ray.is_initialized():
            self.ray.shutdown()
