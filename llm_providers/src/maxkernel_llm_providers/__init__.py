"""maxkernel's LLM providers: ``gemini`` (google-genai) and ``litellm`` (every other vendor, local servers).

Each provider is its own entry-point module in the ``maxkernel`` group, so one
can be disabled without the other. Importing this package is cheap: the vendor
SDKs are imported only when a provider first needs them (litellm alone costs
seconds), which keeps ``maxkernel --help`` and ``maxkernel plugins`` fast.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["env_flag", "llm_setting"]


def llm_setting(settings: Any, name: str, default: Any = None) -> Any:
    """``settings.llm.<name>``, or ``default`` when settings, the section or the value is missing.

    Read defensively because providers are also built with ``settings=None``
    (tests, ``maxkernel plugins``) and by cores older than the ``llm`` section.
    """
    value = getattr(getattr(settings, "llm", None), name, None)
    return default if value is None else value


def env_flag(name: str) -> bool:
    """True for the usual spellings of yes in an environment variable."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
