"""The offline provider's plugin: a provider entry plus the three roles, answered when it is selected."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from maxkernel_core import Candidate, LLMProvider, Plan, Provenance, Readiness, hookimpl
from maxkernel_core.errors import MaxKernelError, PluginError
from maxkernel_core.llm import LLMError

# The orchestrator only traces references here; never let it claim a TPU the workers need.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

NAME = "offline"
_lock = threading.Lock()


class OfflineDeclined(MaxKernelError):
    """The synthesizer has no template for this computation; the message says why."""

    exit_code = 1


class OfflineProvider(LLMProvider):
    name = NAME
    takes_prompts = False  # its own role hooks answer; the prompt-based agents step aside

    def readiness(self) -> Readiness:
        try:
            import maxkernel_tpu_pallas  # noqa: F401
        except ImportError:
            return Readiness(False, "the offline synthesizer writes TPU Pallas kernels: install maxkernel-tpu-pallas")
        return Readiness(True)

    def complete(self, request):
        raise LLMError("the offline provider answers the plan, implement and debug roles itself and takes no "
                       "prompts: use it with the built-in roles, or choose a model provider for this role")


@hookimpl
def register_llm_providers(register):
    register(OfflineProvider)


def _selected(ctx, role: str) -> bool:
    try:
        return ctx.llm_for(role).provider.name == NAME
    except PluginError:
        return False


def synthesis(task, ctx) -> dict[str, Any]:
    """Analysis, dtype and ranked parameter points for the task, computed once per run."""
    with _lock:
        if "offline" in ctx.extras:
            return ctx.extras["offline"]
        from maxkernel_tpu_pallas.judge import inputs as task_inputs
        from maxkernel_tpu_pallas.profiling.costmodel import generation_constants
        from maxkernel_tpu_pallas.targets import tpu_info

        from .analysis import Declined, analyse, analyse_staged_program, bind_size_literals, trace_reference
        from .space import rank

        meta = task.metadata
        module = task_inputs.load_module(meta["module"], f"maxkernel_offline_ref_{abs(hash(meta['module']))}")
        shapes, static = task_inputs.abstract_full(module, meta)
        fn = getattr(module, meta["entry"])
        try:
            analysis = analyse(trace_reference(fn, shapes, static))
            numbers = None
            if analysis.template == "attention":
                from .attention import bind_sizes, literal_texts

                numbers = literal_texts(analysis.attention)
                if "small" in task.sizes:  # the score pipeline's constants, as expressions of the sizes
                    small = analyse(trace_reference(fn, *task_inputs.abstract_full(module, meta, size="small")))
                    if small.template != "attention":
                        raise Declined(f"at the small size the reference is not attention-shaped ({small.why})")
                    numbers = bind_sizes(analysis.attention, small.attention)
            elif "small" in task.sizes and analysis.template not in ("batch", "staged"):  # constants that depend on the size (1/D)
                small = analyse(trace_reference(fn, *task_inputs.abstract_full(module, meta, size="small")))
                bind_size_literals(analysis.program, small.program, dims(analysis), dims(small))
        except Declined as exc:
            raise OfflineDeclined(f"the offline synthesizer has no template for task {task.id}: {exc}") from exc
        lead = analysis.dot.inputs[0] if analysis.dot else analysis.program.inputs[0]
        if analysis.template == "batch":
            lead = analysis.output
        if analysis.template == "attention":
            lead = analysis.program.inputs[analysis.attention.operand("q").input]
        dtype = analysis.staged.dtype if analysis.template == "staged" else analysis.program.dtypes[lead]
        info = tpu_info(ctx.config.target)
        chip = {k: getattr(info, k) for k in ("mem_bw_bytes_per_second", "bf16_ops_per_second", "int8_ops_per_second",
                                              "fp8_ops_per_second", "mxu_column_size", "num_mxus")}
        chip["cores_per_device"] = 1  # conservative: the orchestrator never opens a TPU topology
        limit = min(int(info.vmem_capacity_bytes * 3 // 4),
                    max(generation_constants(ctx.config.target)["vmem"]["default_scoped_limit_bytes"], 64 << 20))
        ranked = rank(analysis, dtype, chip, ctx.config.target, limit)
        # Points over VMEM stay in the ranking (the estimate is conservative and the debugger
        # shrinks blocks after a real overflow), unless even the smallest is far over: no repair
        # can fit the template then, and compiling it only wastes evaluations.
        smallest = min((max(k.vmem_bytes for k in est.kernels) for _, est in ranked), default=None)
        if (smallest is None or smallest > 2 * limit) and analysis.template == "batch":
            # The whole computation per batch block does not fit: put only its matmuls on kernels.
            try:
                analysis = analyse_staged_program(analysis.program, f"the batch template needs "
                                                  f"{(smallest or 0) / 2**20:,.0f} MiB of VMEM ({analysis.why})")
            except Declined:
                pass
            else:
                dtype = analysis.staged.dtype
                ranked = rank(analysis, dtype, chip, ctx.config.target, limit)
                smallest = min((max(k.vmem_bytes for k in est.kernels) for _, est in ranked), default=None)
        if smallest is None or smallest > 2 * limit:
            need = f"even its smallest blocks need {smallest / 2**20:,.0f} MiB" if smallest else "it has no block choice"
            raise OfflineDeclined(f"the offline synthesizer has no template for task {task.id}: the {analysis.template} "
                                  f"template does not fit: {need} of VMEM, the limit on {ctx.config.target} is "
                                  f"{limit >> 20} MiB ({analysis.why})")
        ctx.extras["offline"] = {"analysis": analysis, "dtype": dtype, "ranked": ranked, "n_dynamic": len(shapes),
                                 "source": Path(meta["module"]).read_text(), "entry": meta["entry"],
                                 "numbers": numbers}
        return ctx.extras["offline"]


def dims(analysis) -> dict[str, int]:
    """The sizes a generated kernel knows by name: rows and d, or m, n and k."""
    if analysis.template == "rowwise":
        return {"d": analysis.d, "rows": analysis.rows}
    m, k = analysis.program.shapes[analysis.dot.inputs[0]]
    return {"m": m, "n": analysis.d, "k": k}


def write_module(s: dict[str, Any], task_id: str, params: dict[str, Any]) -> str:
    from .templates import batch_module, matmul_module, rowwise_module

    a = s["analysis"]
    params = complete(s, params)
    if a.template == "batch":
        return batch_module(a, task_id, params, s["source"], s["entry"], s["n_dynamic"])
    if a.template == "staged":
        from .staged import module_source
        from .templates import HEADER

        return module_source(a.staged, task_id, params, s["source"], s["entry"], s["n_dynamic"], HEADER)
    if a.template == "attention":
        from .flash import module_source

        return module_source(a.attention, task_id, params, a.why, s["n_dynamic"], s["numbers"])
    write = rowwise_module if a.template == "rowwise" else matmul_module
    return write(a, task_id, params, s["dtype"], s["n_dynamic"])


def complete(s: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A point edited by hand (human-in-the-loop) may name only the blocks it changes: the rest of the
    template's constants come from the cost model's default point."""
    return {**s["ranked"][0][0], **params} if s.get("ranked") else dict(params)


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


@hookimpl
def agent_plan(task, history, ctx):
    if not _selected(ctx, "plan"):
        return None
    from .space import fits, neighbours

    s = synthesis(task, ctx)
    analysis, ranked = s["analysis"], s["ranked"]
    estimates = {_key(p): est for p, est in ranked}
    tried = {_key(complete(s, a.candidate.parameters)) for a in history}
    ok = [a for a in history if a.evaluation.ok]
    move, point = "the cost model's best point", None
    if ok:  # local search around the best verified kernel, best estimate first
        best = min(ok, key=lambda a: estimates.get(_key(complete(s, a.candidate.parameters)), ranked[-1][1]).seconds)
        around = complete(s, best.candidate.parameters)
        options = [(m, p) for m, p in neighbours(analysis, around, s["dtype"]) if _key(p) not in tried]

        def order(option):  # neighbours that fit VMEM first (a blind "double" compiles only to overflow), then fastest
            est = estimates.get(_key(option[1]))
            return (True, float("inf")) if est is None else (not fits(est), est.seconds)

        options.sort(key=order)
        if options:
            move, point = options[0]
    if point is None:
        untried = [p for p, _ in ranked if _key(p) not in tried]
        if not untried:
            return None  # the whole space has been tried
        point = untried[0]
        move = move if not history else "the next point of the cost model's ranking"
    est = estimates.get(_key(point))
    figures = ("not in the cost model's ranking (a hand-edited point)" if est is None else
               f"estimated {est.seconds * 1e6:,.1f} us, {est.bound}-bound, VMEM "
               f"{max(k.vmem_bytes for k in est.kernels) / 2**20:.1f} MiB (cost-model estimate)")
    summary = f"Template {analysis.template}: {analysis.why}. Parameters {point} ({move}); {figures}."
    return Plan(task.id, summary, {"template": analysis.template, "why": analysis.why, "move": move},
                dict(point), author=NAME)


@hookimpl
def agent_implement(task, plan, ctx):
    if not _selected(ctx, "implement"):
        return None
    s = synthesis(task, ctx)
    analysis = s["analysis"]
    params = complete(s, plan.parameters)
    code = write_module(s, task.id, params)
    return Candidate(task.id, code, params, provenance=Provenance(
        role="implement", provider=NAME, model=analysis.template, strategy=ctx.config.strategy,
        transformation=plan.decisions.get("move", ""), plan_id=plan.id))


@hookimpl
def agent_debug(task, candidate, evaluation, attempts, ctx):
    if not _selected(ctx, "debug"):
        return None
    from .space import shrink_largest

    s = synthesis(task, ctx)
    error = (evaluation.details.get("compile") or {}).get("error") or {}
    over_vmem = error.get("kind") == "vmem_overflow" or not (evaluation.details.get("cost_model") or {}).get("fits_vmem", True)
    if evaluation.status.value != "compile_error" or not over_vmem:
        return None  # the templates are exact by construction: nothing else is a parameter problem
    point = shrink_largest(s["analysis"], complete(s, candidate.parameters), s["dtype"])
    if point is None:
        return None
    code = write_module(s, task.id, point)
    return Candidate(task.id, code, point, parent_id=candidate.id, provenance=Provenance(
        role="debug", provider=NAME, model=s["analysis"].template, strategy=ctx.config.strategy,
        transformation="VMEM overflow: halve the largest block"))
