"""Packaging and layering: the wheel carries the SQL, compose matches the CLI, and the
process packages never import each other (the shared package imports neither)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cronbox.cli import COMMANDS

REPO = Path(__file__).resolve().parent.parent


def _imports(package: str) -> set[str]:
    found: set[str] = set()
    for path in (REPO / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package, forbidden", [
    ("poller", {"relay", "web"}), ("relay", {"poller", "web"}), ("web", {"poller", "relay"}),
    ("cronbox", {"poller", "relay", "web"})])
def test_layers_do_not_import_across(package, forbidden):
    assert not _imports(package) & forbidden


def test_compose_commands_exist_in_the_cli():
    compose = (REPO / "docker-compose.yml").read_text()
    used = set(re.findall(r'command: \["([a-z-]+)"', compose))
    assert used and used <= set(COMMANDS), used - set(COMMANDS)


def test_deploy_files_run_commands_that_exist_in_the_cli():
    deploy = REPO / "deploy"
    systemd = "\n".join(p.read_text() for p in (deploy / "systemd").glob("*.service"))
    k8s = "\n".join(p.read_text() for p in (deploy / "kubernetes").glob("*.yaml"))
    used = set(re.findall(r"ExecStart=\S+/cronbox (\S+)", systemd)) - {"%i"}
    used |= set(re.findall(r'args: \["([a-z-]+)"', k8s))
    assert {"migrate", "poller", "relay"} <= used, used
    assert used <= set(COMMANDS), used - set(COMMANDS)
    # the template's instances are commands too
    assert "ExecStart=/opt/cronbox/venv/bin/cronbox %i" in systemd


def test_the_wheel_ships_the_sql(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("cronbox-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for sql in (REPO / "sql").rglob("*.sql"):
        assert f"cronbox/sql/{sql.relative_to(REPO / 'sql')}" in names
    assert {"poller/main.py", "relay/main.py", "cronbox/cli.py", "web/main.py"} <= names
    # the console's templates and static assets ship in the package (nothing from a CDN)
    for asset in (REPO / "web").rglob("*"):
        if asset.suffix in (".html", ".css", ".js"):
            assert f"web/{asset.relative_to(REPO / 'web')}" in names


def test_help_lists_every_command_on_one_line_each():
    out = subprocess.run([sys.executable, "-m", "cronbox", "--help"], capture_output=True, text=True,
                         timeout=60, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    for name, help_text in COMMANDS.items():
        (line,) = [ln for ln in lines if ln.split()[:1] == [name]]
        assert line.rstrip().endswith(help_text) and len(line) <= 80, line


def test_the_image_copies_every_package_the_wheel_ships():
    dockerfile = (REPO / "Dockerfile").read_text()
    packages = re.search(r'packages = \[([^\]]*)\]', (REPO / "pyproject.toml").read_text()).group(1)
    for pkg in re.findall(r'"([a-z_]+)"', packages):
        assert f"COPY {pkg} ./{pkg}" in dockerfile, pkg


def test_the_demo_worker_uses_only_the_public_worker_kit():
    """It is the example users copy: no cronbox internals, only cronbox.worker."""
    tree = ast.parse((Path(__file__).resolve().parent.parent / "cronbox" / "demo_worker.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in imported if m and m.startswith("cronbox")} == {"cronbox.worker"}
