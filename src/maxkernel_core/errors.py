"""Errors a user can act on.

Every error raised for bad input (config, task, plugin, key, reply) is a
``MaxKernelError``: its message is one line that says what is wrong and how to
fix it, and ``exit_code`` is what the CLI exits with. The CLI prints the message
alone; ``--debug`` adds the traceback.
"""

from __future__ import annotations


class MaxKernelError(Exception):
    """Base class: a problem the user can fix. ``str(err)`` is the one-line message."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # One line, always: a multi-line message would break the "one clear line" contract.
        super().__init__(" ".join(message.split("\n")).strip())


class ConfigError(MaxKernelError):
    """A config file, environment variable or flag has an unknown key or a bad value."""


class PluginError(MaxKernelError):
    """A plugin failed to load, implements a hook that does not exist, or clashes by name."""


class UnknownPluginError(PluginError):
    """A backend, strategy or provider was asked for by a name nobody registered."""


class BudgetSpent(MaxKernelError):
    """A strategy asked for an evaluation past the run's budget; the run ends with what it has."""


class TaskError(MaxKernelError):
    """A task is missing or malformed."""


class StoreError(MaxKernelError):
    """The run store cannot be opened or a record is not in it."""


class ProviderError(MaxKernelError):
    """An LLM provider is not ready (missing key) or failed beyond its retries."""


class ExecutorError(MaxKernelError):
    """An evaluation executor cannot start (missing package, bad address) or kept losing an evaluation."""


class ServiceFailure(MaxKernelError):
    """A service the run depends on (a model, a cluster) failed beyond its retries: exit 3, not a usage error."""

    exit_code = 3


class UnusableReplies(ServiceFailure):
    """A role's model kept answering without usable code, past ``llm.reply_retries``."""


class ExecutorUnreachable(ExecutorError, ServiceFailure):
    """The executor's cluster cannot be reached or kept losing evaluations."""

    exit_code = 3


class CandidateFailed(MaxKernelError):
    """A candidate kernel did not pass evaluation (the CLI exits 1, not 2)."""

    exit_code = 1
