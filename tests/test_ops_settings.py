"""Settings are declared once (cronbox.config.setting): each command's --help lists the
variables it reads with their defaults, generated from those declarations, and the
configuration table of docs/configuration.md names the same variables."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cronbox.cli import COMMANDS, _settings_class
from cronbox.config import COMMON_FOR, Config, ConfigError, declared
from poller.settings import PollerSettings
from relay.settings import RelaySettings

from .conftest import cronbox_cmd

README = Path(__file__).resolve().parent.parent / "README.md"
CONFIGURATION = README.parent / "docs" / "configuration.md"


def help_of(command: str) -> str:
    out = subprocess.run(cronbox_cmd(command, "--help"), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def variables(command: str) -> list[tuple[str, str]]:
    """(variable, default as shown) of everything the command reads."""
    fields = [f for f in declared(Config) if f.name in COMMON_FOR[command]]
    own = _settings_class(command)
    fields += declared(own) if own else []
    return [(f.metadata["env"][0], f.metadata["default"]) for f in fields]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_help_lists_its_variables_with_their_defaults(command):
    text = re.sub(r"\s+", " ", help_of(command))
    assert "environment (default in brackets):" in text
    text = text[text.index("environment (default in brackets):"):]
    for name, default in variables(command):
        assert name in text, (command, name)
        after = text[text.index(name):]
        shown = f"[{default}]" if default != "" else "[unset]"
        assert shown in after[:400], (command, name, shown)


def test_poller_and_relay_help_list_their_own_variables_not_each_others():
    poller, relay = help_of("poller"), help_of("relay")
    assert "CRONBOX_HORIZON" in poller and "CRONBOX_HORIZON" not in relay
    assert "CRONBOX_RELAY_LEASE" in relay and "CRONBOX_RELAY_LEASE" not in poller
    assert "--host" in help_of("demo-worker") and "--hash-password" in help_of("web")


def test_the_configuration_table_names_exactly_the_declared_variables():
    table = {m for line in CONFIGURATION.read_text().splitlines() if line.startswith("| `")
             for m in re.findall(r"`((?:CRONBOX_|DATABASE_URL)[A-Z_]*)\*?`", line.split("|")[1])}
    names = set()
    for command in COMMANDS:
        for name, _ in variables(command):
            names.add(name)
    worker = {n for n in names if n.startswith("CRONBOX_WORKER_")}
    assert "CRONBOX_WORKER_" in table  # the worker's own table is in docs/worker.md
    worker_doc = (README.parent / "docs" / "worker.md").read_text()
    assert {n for n in worker if n not in worker_doc} == set()
    assert names - worker - table == set(), "declared but not in docs/configuration.md"
    assert table - names - {"CRONBOX_WORKER_", "DATABASE_URL"} == set(), "in docs/configuration.md but not declared"


def test_a_bad_value_is_one_line_naming_the_variable_before_anything_starts(tmp_path):
    out = subprocess.run(cronbox_cmd("poller"), capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "DATABASE_URL": "postgresql://127.0.0.1:1/x",
                              "CRONBOX_HORIZON": "soon"})
    assert out.returncode == 1 and out.stderr.strip().count("\n") == 0, out.stderr
    assert out.stderr.startswith("cronbox: CRONBOX_HORIZON: expected a duration")
    with pytest.raises(ConfigError, match="CRONBOX_RELAY_BACKOFF_MAX"):
        RelaySettings.from_env({"CRONBOX_RELAY_BACKOFF": "1m", "CRONBOX_RELAY_BACKOFF_MAX": "1s"})
    assert PollerSettings.from_env({"CRONBOX_DISPATCH_BATCH": ""}).dispatch_batch == 1000  # empty: default


def test_the_configuration_table_states_the_declared_defaults():
    """The configuration table is prose around the declarations: its defaults must be theirs."""
    fields = {}
    for command in COMMANDS:
        own = _settings_class(command)
        for f in declared(Config) + (declared(own) if own else []):
            fields.setdefault(f.metadata["env"][0], f)
    checked = 0
    for line in CONFIGURATION.read_text().splitlines():
        if not line.startswith("| `CRONBOX_"):
            continue
        cells = line.split("|")
        names = re.findall(r"`(CRONBOX_[A-Z_]+)`", cells[1])
        defaults = re.findall(r"`([^`]*)`", cells[2])
        if not defaults or len(defaults) != len(names):
            continue
        for name, text in zip(names, defaults):
            f = fields[name]
            parse = f.metadata["parse"]
            assert parse(name, text) == parse(name, f.metadata["default"]), (name, text, f.metadata["default"])
            checked += 1
    assert checked >= 20
