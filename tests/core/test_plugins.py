import json
import sys

import pytest

from maxkernel_core import Strategy, hookimpl
from maxkernel_core.errors import PluginError, UnknownPluginError
from maxkernel_core.plugins import get_plugin_manager
from maxkernel_core.testing import FakeBackend, registered_plugin

from ..helpers import make_distribution, run_cli

STRATEGY_MODULE = '''
from maxkernel_core import Strategy, hookimpl

class S(Strategy):
    name = "{name}"
    def run(self, session):
        return session.finish()

@hookimpl
def register_strategies(register):
    register(S)
'''


def test_importing_the_core_loads_no_plugin():
    code = ("import sys, maxkernel_core; "
            "print(any(m.startswith(('maxkernel_best_of_n', 'maxkernel_tpu_pallas')) for m in sys.modules))")
    result = run_cli.__globals__["subprocess"].run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False"


def test_in_process_registration_and_lookup():
    pm = get_plugin_manager(load_entrypoints=False)

    class Mine(Strategy):
        name = "mine"

        def run(self, session):
            raise NotImplementedError

    class Plugin:
        @hookimpl
        def register_strategies(self, register):
            register(Mine)

        @hookimpl
        def register_backends(self, register):
            register(FakeBackend)

    with registered_plugin(pm, Plugin(), name="mine-plugin"):
        assert pm.registries.get("strategy", "mine").cls is Mine
        assert pm.registries.get("strategy", "mine").plugin == "mine-plugin"
        assert list(pm.registries.backends) == ["fake"]
    assert "mine" not in pm.registries.strategies  # unregistering drops what it registered
    with pytest.raises(UnknownPluginError, match=r"unknown strategy 'mine' \(installed: none\)"):
        pm.registries.get("strategy", "mine")


def test_registering_a_non_strategy_names_the_plugin():
    pm = get_plugin_manager(load_entrypoints=False)

    class Bad:
        @hookimpl
        def register_strategies(self, register):
            register(object)

    pm.register(Bad(), name="bad-plugin")
    with pytest.raises(PluginError, match="plugin 'bad-plugin' registered .* not a Strategy subclass"):
        pm.registries


def test_duplicate_strategy_name_names_both_plugins(tmp_path):
    root = make_distribution(tmp_path / "a", "dist-a", {"plug_a": "plug_a"}, {"plug_a": STRATEGY_MODULE.format(name="dup")})
    make_distribution(root, "dist-b", {"plug_b": "plug_b"}, {"plug_b": STRATEGY_MODULE.format(name="dup")})
    result = run_cli("plugins", pythonpath=[root])
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "Error: strategy name 'dup' is registered by both plugin 'plug_a' and plugin 'plug_b': "
        "uninstall or --disable-plugin one of them"
    )
    # and disabling one of them resolves it
    ok = run_cli("--disable-plugin", "plug_b", "plugins", "--json", pythonpath=[root])
    assert ok.returncode == 0, ok.stderr
    names = [p["name"] for p in json.loads(ok.stdout)]
    assert "plug_a" in names and "plug_b" not in names


def test_duplicate_entry_point_name_names_both_distributions(tmp_path):
    root = make_distribution(tmp_path / "a", "dist-one", {"same": "mod_one"}, {"mod_one": ""})
    make_distribution(root, "dist-two", {"same": "mod_two"}, {"mod_two": ""})
    result = run_cli("plugins", pythonpath=[root])
    assert result.returncode == 2
    assert "plugin name 'same' is claimed by both" in result.stderr
    assert "dist-one 1.0" in result.stderr and "dist-two 1.0" in result.stderr


def test_plugin_import_error_names_plugin_and_distribution(tmp_path):
    root = make_distribution(tmp_path / "a", "broken-dist", {"broken": "broken_mod"},
                             {"broken_mod": "import not_a_module_anywhere\n"}, version="2.3")
    result = run_cli("plugins", pythonpath=[root])
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "Error: plugin 'broken' from distribution 'broken-dist 2.3' failed to import "
        "(ModuleNotFoundError: No module named 'not_a_module_anywhere'); "
        "reinstall it or skip it with --disable-plugin broken"
    )
    assert run_cli("--disable-plugin", "broken", "plugins", pythonpath=[root]).returncode == 0


def test_misspelled_hook_fails_loudly(tmp_path):
    source = "from maxkernel_core import hookimpl\n@hookimpl\ndef register_strategy(register):\n    pass\n"
    root = make_distribution(tmp_path / "a", "typo-dist", {"typo": "typo_mod"}, {"typo_mod": source})
    result = run_cli("plugins", pythonpath=[root])
    assert result.returncode == 2
    assert "plugin 'typo' implements an unknown hook" in result.stderr
    assert "register_strategy" in result.stderr


def test_allowlist_and_disable_from_env(tmp_path):
    root = make_distribution(tmp_path / "a", "dist-a", {"plug_a": "plug_a"}, {"plug_a": STRATEGY_MODULE.format(name="sa")})
    make_distribution(root, "dist-b", {"plug_b": "plug_b"}, {"plug_b": STRATEGY_MODULE.format(name="sb")})

    def names(**env):
        result = run_cli("plugins", "--json", pythonpath=[root], env=env)
        assert result.returncode == 0, result.stderr
        return {p["name"] for p in json.loads(result.stdout)}

    assert {"plug_a", "plug_b"} <= names()
    assert names(MAXKERNEL_LOAD_PLUGINS="plug_b") == {"plug_b"}
    assert names(MAXKERNEL_LOAD_PLUGINS="") == set()
    assert "plug_a" not in names(MAXKERNEL_DISABLE_PLUGINS="plug_a")
    bad = run_cli("--disable-plugin", "nope", "plugins", pythonpath=[root])
    assert bad.returncode == 2 and "no installed plugin is named nope" in bad.stderr


def test_trace_prints_hook_calls(tmp_path):
    root = make_distribution(tmp_path / "a", "dist-a", {"plug_a": "plug_a"}, {"plug_a": STRATEGY_MODULE.format(name="sa")})
    result = run_cli("plugins", pythonpath=[root], env={"MAXKERNEL_TRACE_PLUGINS": "1"})
    assert result.returncode == 0
    assert "register_strategies" in result.stderr


def test_plugins_json_shows_distribution_hooks_and_registrations(tmp_path):
    root = make_distribution(tmp_path / "a", "dist-a", {"plug_a": "plug_a"},
                             {"plug_a": STRATEGY_MODULE.format(name="sa")}, version="4.5")
    result = run_cli("plugins", "--json", pythonpath=[root], env={"MAXKERNEL_LOAD_PLUGINS": "plug_a"})
    assert json.loads(result.stdout) == [{
        "name": "plug_a", "distribution": "dist-a", "version": "4.5", "module": "plug_a",
        "hooks": ["register_strategies"], "registers": ["strategy:sa"],
    }]
    table = run_cli("plugins", pythonpath=[root], env={"MAXKERNEL_LOAD_PLUGINS": "plug_a"})
    assert "dist-a 4.5" in table.stdout and "strategy:sa" in table.stdout


def test_llm_provider_registration_and_readiness(monkeypatch):
    from maxkernel_core import LLMProvider

    class Keyed(LLMProvider):
        name = "keyed"
        key_env_vars = ("KEYED_API_KEY", "KEYED_TOKEN")

        def complete(self, request):
            raise NotImplementedError

    class Plugin:
        @hookimpl
        def register_llm_providers(self, register):
            register(Keyed)

    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(Plugin(), name="keyed-plugin")
    provider = pm.registries.get("llm_provider", "keyed").cls()
    monkeypatch.delenv("KEYED_API_KEY", raising=False)
    monkeypatch.delenv("KEYED_TOKEN", raising=False)
    assert provider.readiness().message == "set KEYED_API_KEY or KEYED_TOKEN to use provider 'keyed'"
    monkeypatch.setenv("KEYED_TOKEN", "t")
    assert provider.readiness().ready
    with pytest.raises(UnknownPluginError, match=r"unknown llm provider 'gpt' \(installed: keyed\)"):
        pm.registries.get("llm_provider", "gpt")


def _provider(name: str, aliases: tuple[str, ...] = ()):
    from maxkernel_core import LLMProvider

    class Named(LLMProvider):
        def complete(self, request):
            raise NotImplementedError

    Named.name, Named.aliases = name, aliases
    return Named


def test_a_provider_is_found_by_its_alias_and_listed_by_its_name():
    renamed = _provider("synth", aliases=("old",))

    class Plugin:
        @hookimpl
        def register_llm_providers(self, register):
            register(renamed)

    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(Plugin(), name="renamed-plugin")
    assert pm.registries.get("llm_provider", "old").cls is renamed
    assert pm.registries.get("llm_provider", "synth").name == "synth"
    assert list(pm.registries.all("llm_provider")) == ["synth"]


@pytest.mark.parametrize("other", [("old", ()), ("other", ("old",))])
def test_an_alias_claimed_twice_names_both(other):
    first, second = _provider("synth", aliases=("old",)), _provider(*other)

    class Plugin:
        @hookimpl
        def register_llm_providers(self, register):
            register(first)
            register(second)

    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(Plugin(), name="clash")
    with pytest.raises(PluginError, match=r"'old' is (claimed by both 'synth' and 'other'|both registered and "
                                          r"another's alias \(of 'synth'\))"):
        pm.registries.get("llm_provider", "synth")


def test_builtin_backend_can_be_disabled_or_left_out():
    listed = json.loads(run_cli("plugins", "--json").stdout)
    builtin = {row["name"]: row for row in listed}["tpu_pallas"]
    assert builtin["distribution"] == "maxkernel-tpu-pallas" and "backend:tpu_pallas" in builtin["registers"]
    assert "eval" in run_cli("--help").stdout
    for args, env in ((["--disable-plugin", "tpu_pallas"], {}), ([], {"MAXKERNEL_LOAD_PLUGINS": ""}),
                      ([], {"MAXKERNEL_DISABLE_PLUGINS": "tpu_pallas"})):
        names = [row["name"] for row in json.loads(run_cli(*args, "plugins", "--json", env=env).stdout)]
        assert "tpu_pallas" not in names
        gone = run_cli(*args, "eval", "--task", "x", "--kernel", "y", env=env)
        assert gone.returncode == 2 and "No such command 'eval'" in gone.stderr
