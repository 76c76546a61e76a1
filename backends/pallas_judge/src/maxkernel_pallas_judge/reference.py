"""A task's reference as the judge reads it, for code in the orchestrator that analyses it (the offline
synthesizer): its module, the entry the judge calls, its text, its abstract inputs, the small size the judge
derives. Chip-neutral: every Pallas backend's tasks are read this way.

Only trusted task code belongs here (a task is the user's own file, never a candidate).
"""

from __future__ import annotations

from typing import Any

from maxkernel_core import Task


def load_reference(task: Task):
    """The task's reference module, imported in this process as the judge's worker imports it (a
    KernelBench-style module with the judge's entry added: ``task.metadata["entry"]``)."""
    from maxkernel_pallas_judge.judge.task_module import load_task_module

    module_path = task.metadata["module"]
    return load_task_module(task.metadata, f"maxkernel_reference_{abs(hash(module_path))}")


def reference_entry(task: Task) -> str:
    """The name of the reference module's function the judge calls (``computation``, or a KernelBench
    module's added entry)."""
    return task.metadata["entry"]


def reference_source(task: Task) -> str:
    """The reference module's text as the judge runs it (with the entry a KernelBench-style module gets)."""
    from maxkernel_pallas_judge.judge.task_module import module_source

    return module_source(task.metadata)


def reference_inputs(task: Task, module, size: str = "full") -> tuple[list[Any], tuple]:
    """(abstract dynamic inputs as ``jax.ShapeDtypeStruct``, static arguments) at ``size``; nothing is allocated."""
    from maxkernel_pallas_judge.judge.inputs import abstract_full

    return abstract_full(module, task.metadata, size=size)


def derived_small(task: Task, module) -> tuple[Any, list[Any], tuple] | None:
    """(entry, abstract inputs, static arguments) at the small size the judge derives for a task without one
    (judge/small_size.py), or None when none can be derived."""
    from maxkernel_pallas_judge.judge.inputs import abstract_full
    from maxkernel_pallas_judge.judge.small_size import derive, set_bytes

    shapes, _ = abstract_full(module, task.metadata)
    small, _how = derive(task.metadata, set_bytes(shapes))
    if small is None:
        return None
    return (getattr(small, reference_entry(task)), *abstract_full(small, task.metadata))
