"""Test helpers for maxkernel and its plugins (also a pytest plugin: see ``pytest_plugin``)."""

from .fakes import FakeBackend, FakeLLMProvider, FakeTester, HookCall, HookRecorder, ScriptedAgents, registered_plugin

__all__ = ["FakeBackend", "FakeLLMProvider", "FakeTester", "HookCall", "HookRecorder", "ScriptedAgents", "registered_plugin"]
