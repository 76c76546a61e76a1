"""The offline synthesizer's provider: what ``--provider synthesizer`` (alias ``offline``) selects.

It is selected like a provider (``--provider synthesizer``, or ``llm.roles.<role>.provider``
per role) and registers one so that the choice is validated and reported like any
other; its ``complete`` is never reached, because when selected the templates of the
run's chip answer its roles themselves (``roles.py``): a plan, a candidate, or a
:class:`~maxkernel_core.Decline`.
"""

from __future__ import annotations

from maxkernel_core import LLMProvider, Readiness, hookimpl
from maxkernel_core.llm import LLMError

from .names import ALIASES, NAME


class OfflineProvider(LLMProvider):
    """The handle that selects the synthesizer for a role; it takes no prompts."""

    name = NAME
    aliases = ALIASES

    def readiness(self) -> Readiness:
        """Ready: it needs no key and no network. Its kernels come from the templates of the run's chip
        (maxkernel-tpu-offline, maxkernel-gpu-offline); a backend whose chip has none is told so at its roles."""
        return Readiness(True)

    def complete(self, request):
        raise LLMError("the offline synthesizer answers the plan, implement and debug roles itself and takes no "
                       "prompts: choose a model provider for the roles that need one")


@hookimpl
def register_llm_providers(register):
    register(OfflineProvider)
