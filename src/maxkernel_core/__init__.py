"""maxkernel_core: the small core every maxkernel plugin builds on.

It defines the plugin contract (:mod:`~maxkernel_core.hookspecs`), the records
that flow through it (:mod:`~maxkernel_core.records`), the plugin manager,
settings, the SQLite run store and the ``maxkernel`` command. It knows no
plugin by name: the TPU backend, the LLM providers and the strategies are all
found through the ``maxkernel`` entry-point group.
"""

from .errors import (
    CandidateFailed,
    ConfigError,
    ExecutorError,
    MaxKernelError,
    PluginError,
    ProviderError,
    StoreError,
    TaskError,
    UnknownPluginError,
)
from .hookspecs import hookimpl
from .interfaces import (
    Backend,
    Executor,
    HostCheck,
    LLMMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    Readiness,
    SettingsSection,
    TaskRef,
    TaskSuite,
)
from .model_records import KernelTime, ModelBreakdown, OperandTraffic, OpTime
from .plugins import get_plugin_manager
from .records import (
    Achieved,
    Attempt,
    Candidate,
    CheckResult,
    CompileError,
    Decline,
    EvalStatus,
    Evaluation,
    Fit,
    Move,
    Parameter,
    ParameterSpace,
    Plan,
    Profile,
    Provenance,
    RunConfig,
    SearchEdge,
    SearchNode,
    Speed,
    Task,
    TestReport,
)
from .run import optimize
from .strategy import Strategy
from .serialize import from_json, to_json

__version__ = "0.1.0"

__all__ = [
    "Achieved", "Attempt", "Backend", "Candidate", "CandidateFailed", "CheckResult", "CompileError", "ConfigError", "Decline",
    "EvalStatus", "Evaluation", "HostCheck", "Fit", "KernelTime", "ModelBreakdown", "OperandTraffic", "OpTime", "Move", "Parameter", "ParameterSpace", "Executor", "ExecutorError", "LLMMessage", "LLMProvider", "LLMRequest", "LLMResponse", "MaxKernelError", "Plan",
    "PluginError", "Profile", "Provenance", "ProviderError", "Readiness", "RunConfig", "SearchEdge", "Speed",
    "SearchNode", "SettingsSection", "StoreError", "Strategy", "Task", "TaskError", "TaskRef", "TaskSuite", "TestReport",
    "UnknownPluginError", "from_json", "get_plugin_manager", "hookimpl", "optimize", "to_json",
]
