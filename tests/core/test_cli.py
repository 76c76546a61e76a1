import json

from ..helpers import run_cli


def test_help_lists_core_commands():
    result = run_cli("--help")
    assert result.returncode == 0
    for cmd in ("plugins", "config", "runs", "tasks"):
        assert cmd in result.stdout


def test_unknown_command_is_a_usage_error():
    result = run_cli("frobnicate")
    assert result.returncode == 2 and "No such command 'frobnicate'" in result.stderr


def test_errors_are_one_line_unless_debug(tmp_path):
    (tmp_path / "maxkernel.toml").write_text("[run]\nseed = 1.5\n")
    plain = run_cli("config", "show", cwd=tmp_path)
    assert plain.returncode == 2 and len(plain.stderr.strip().splitlines()) == 1
    debug = run_cli("--debug", "config", "show", cwd=tmp_path)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "ConfigError" in debug.stderr


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0 and "maxkernel, version" in result.stdout


def test_tasks_with_no_backend_says_why(tmp_path):
    result = run_cli("tasks", str(tmp_path), env={"MAXKERNEL_LOAD_PLUGINS": ""})
    assert result.returncode == 2
    assert "no backend plugin is loaded" in result.stderr


def test_plugin_commands_come_through_the_hook(tmp_path):
    from ..helpers import make_distribution

    source = (
        "import click\nfrom maxkernel_core import hookimpl\n"
        "@hookimpl\ndef register_commands(cli):\n"
        "    @cli.command()\n    def hello():\n        'Say hello.'\n        click.echo('hello from a plugin')\n"
    )
    root = make_distribution(tmp_path / "a", "cmd-dist", {"cmdplug": "cmdplug"}, {"cmdplug": source})
    assert run_cli("hello", pythonpath=[root]).stdout.strip() == "hello from a plugin"
    assert "hello" in run_cli("--help", pythonpath=[root]).stdout
    gone = run_cli("--disable-plugin", "cmdplug", "hello", pythonpath=[root])
    assert gone.returncode == 2 and "No such command 'hello'" in gone.stderr
    listed = json.loads(run_cli("plugins", "--json", pythonpath=[root]).stdout)
    assert any(p["name"] == "cmdplug" and p["hooks"] == ["register_commands"] for p in listed)


#: ``maxkernel ARGS`` where an object, as a native library's would, crashes the process when the interpreter's
#: teardown destroys it (Ray's driver did so after a finished ``bench --executor ray``: exit -11).
CRASHES_IN_TEARDOWN = """
import os, signal, sys
class Native:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGSEGV)
library_object = Native()
from maxkernel_core.cli.main import main
main()
"""


def test_the_command_ends_with_its_own_status_and_output_before_any_teardown(tmp_path):
    import os
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", CRASHES_IN_TEARDOWN, *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120, env={**os.environ, "MAXKERNEL_HOME": str(tmp_path / "h")})

    helped = run("--help")
    assert helped.returncode == 0 and helped.stdout == run_cli("--help").stdout  # all of it, flushed
    (tmp_path / "maxkernel.toml").write_text("[run]\nseed = 1.5\n")
    failed = run("config", "show")
    assert failed.returncode == 2 and failed.stderr.startswith("Error: ") and "seed" in failed.stderr
