from pathlib import Path

import pytest

from maxkernel_core.config import load_settings
from maxkernel_core.errors import ConfigError

from ..helpers import run_cli


def test_defaults_without_any_file(tmp_path):
    resolved = load_settings(tmp_path, env={})
    assert resolved.file is None
    assert resolved.settings.run.provider == "synthesizer"
    assert all(source == "default" for _, _, source in resolved.items())


def test_precedence_file_then_env_then_flags(tmp_path):
    (tmp_path / "maxkernel.toml").write_text(
        '[run]\nprovider = "litellm"\nmodel = "m-file"\nseed = 7\n[tasks]\npaths = ["my_tasks"]\n'
        "[strategy.graph]\nbeam_width = 5\n"
    )
    resolved = load_settings(
        tmp_path,
        env={"MAXKERNEL_RUN_MODEL": "m-env", "MAXKERNEL_RUN_SEED": "8", "UNRELATED": "x"},
        overrides={"run.seed": (9, "--seed"), "run.strategy": (None, "--strategy")},
    )
    s, src = resolved.settings, resolved.sources
    assert (s.run.provider, src["run.provider"]) == ("litellm", str(tmp_path / "maxkernel.toml"))
    assert (s.run.model, src["run.model"]) == ("m-env", "env MAXKERNEL_RUN_MODEL")
    assert (s.run.seed, src["run.seed"]) == (9, "--seed")
    assert s.run.strategy == "auto"  # a flag left unset does not override
    assert s.tasks.paths == [str((tmp_path / "my_tasks").resolve())]  # relative to the file
    assert s.strategy == {"graph": {"beam_width": 5}}


def test_pyproject_tool_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\n[tool.maxkernel.run]\ntarget = "v6e"\n')
    resolved = load_settings(tmp_path, env={})
    assert resolved.settings.run.target == "v6e"
    assert resolved.file == tmp_path / "pyproject.toml"


def test_env_aliases_and_lists(tmp_path):
    s = load_settings(tmp_path, env={"MAXKERNEL_HOME": "/h", "MAXKERNEL_DISABLE_PLUGINS": "a, b",
                                     "MAXKERNEL_TRACE_PLUGINS": "1"}).settings
    assert (s.store.home, s.plugins.disable, s.plugins.trace) == ("/h", ["a", "b"], True)


@pytest.mark.parametrize("text, message", [
    ('[run]\nprovder = "x"\n', "unknown config key 'run.provder' in {file}"),
    ('[run]\nseed = "seven"\n', "config key 'run.seed' in {file} must be an integer, got 'seven'"),
    ('[tasks]\npaths = "one"\n', "config key 'tasks.paths' in {file} must be a list of strings"),
    ("[run\n", "{file} is not valid TOML"),
])
def test_bad_file_names_key_and_file(tmp_path, text, message):
    path = tmp_path / "maxkernel.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.format(file=path)):
        load_settings(tmp_path, env={})


def test_bad_env_value_names_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="'run.budget' in env MAXKERNEL_RUN_BUDGET must be an integer"):
        load_settings(tmp_path, env={"MAXKERNEL_RUN_BUDGET": "lots"})
    with pytest.raises(ConfigError, match="unknown config key 'run.provder' in env MAXKERNEL_RUN_PROVDER"):
        load_settings(tmp_path, env={"MAXKERNEL_RUN_PROVDER": "x"})


def test_cli_bad_config_key_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "maxkernel.toml").write_text('[run]\nstrateggy = "graph"\n')
    result = run_cli("config", "show", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [f"Error: unknown config key 'run.strateggy' in {tmp_path / 'maxkernel.toml'} "
                     "(keys of [run]: strategy, provider, model, backend, target, budget, seed, tuned, time_limit_s, out, ui)"]
    assert "Traceback" not in result.stderr


def test_cli_config_show_reports_sources(tmp_path):
    (tmp_path / "maxkernel.toml").write_text('[run]\ntarget = "v6e"\n')
    result = run_cli("config", "show", "--json", cwd=tmp_path, env={"MAXKERNEL_RUN_SEED": "3"})
    assert result.returncode == 0, result.stderr
    import json

    data = json.loads(result.stdout)
    assert data["run.target"] == {"value": "v6e", "source": str(tmp_path / "maxkernel.toml")}
    assert data["run.seed"] == {"value": 3, "source": "env MAXKERNEL_RUN_SEED"}
    assert data["run.provider"]["source"] == "default"


def test_explicit_config_flag(tmp_path):
    other = tmp_path / "elsewhere.toml"
    other.write_text('[run]\nprovider = "gemini"\n')
    result = run_cli("--config", str(other), "config", "show", "--json", cwd=tmp_path)
    assert '"gemini"' in result.stdout, result.stderr


def test_an_unknown_section_is_an_error_once_the_plugins_sections_are_known(tmp_path):
    from maxkernel_core.config import bind_sections

    path = tmp_path / "maxkernel.toml"
    path.write_text('[runs]\nprovider = "x"\n')
    resolved = load_settings(tmp_path, env={"MAXKERNEL_HITL_ANSWERS": "a.txt"})  # env: not config unless declared
    with pytest.raises(ConfigError, match=rf"unknown config section \[runs\] in {path} \(known: .*eval"):
        bind_sections(resolved, {"eval": _eval_section()})


def _eval_section():
    from maxkernel_pallas_judge.settings import EvalSettings

    return EvalSettings


def test_a_plugins_section_is_checked_and_shown_like_the_cores(tmp_path):
    from maxkernel_core.config import bind_sections

    (tmp_path / "maxkernel.toml").write_text("[eval]\ntimeout_s = 90\n")
    resolved = load_settings(tmp_path, env={"MAXKERNEL_EVAL_FRESH_INPUTS": "5"})
    settings = bind_sections(resolved, {"eval": _eval_section()})
    section = settings.section("eval")
    assert (section.timeout_s, section.fresh_inputs, section.memory_mb) == (90.0, 5, 8192)
    rows = {key: source for key, _, source in resolved.items()}
    assert rows["eval.timeout_s"] == str(tmp_path / "maxkernel.toml") and rows["eval.fresh_inputs"].startswith("env")
    (tmp_path / "maxkernel.toml").write_text("[eval]\ntimeout = 90\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'eval.timeout' in .* \(keys of \[eval\]: timeout_s"):
        bind_sections(load_settings(tmp_path, env={}), {"eval": _eval_section()})
    with pytest.raises(ConfigError, match="'eval.spares' in env MAXKERNEL_EVAL_SPARES must be an integer"):
        bind_sections(load_settings(tmp_path / "none", env={"MAXKERNEL_EVAL_SPARES": "two"}),
                      {"eval": _eval_section()})


def test_cli_config_show_lists_the_backends_section(tmp_path):
    (tmp_path / "maxkernel.toml").write_text("[eval]\nspares = 0\n")
    result = run_cli("config", "show", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    shown = __import__("json").loads(result.stdout)
    assert shown["eval.spares"] == {"value": 0, "source": str(tmp_path / "maxkernel.toml")}
    (tmp_path / "maxkernel.toml").write_text("[evaluation]\nspares = 0\n")
    bad = run_cli("config", "show", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith(
        "Error: unknown config section [evaluation] in")


def test_a_third_party_declares_its_section_through_register_settings(mk_pm, tmp_path):
    from attrs import define

    from maxkernel_core import SettingsSection, hookimpl
    from maxkernel_core.config import bind_sections

    @define
    class TunerSettings(SettingsSection):
        name = "tuner"
        trials: int = 4

    class Plugin:
        @hookimpl
        def register_settings(self, register):
            register(TunerSettings)

    mk_pm.register(Plugin(), name="tuner-plugin")
    declared = mk_pm.registries.settings_sections()
    assert declared["tuner"] is TunerSettings and "eval" in declared  # the TPU backend's, declared the same way
    (tmp_path / "maxkernel.toml").write_text("[tuner]\ntrials = 9\n")
    settings = bind_sections(load_settings(tmp_path, env={}), declared)
    assert settings.section("tuner").trials == 9 and settings.section("eval").timeout_s == 300.0
