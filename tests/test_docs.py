"""The docs speak to a reader of the product: no tracker numbers or work-log labels anywhere
in the repository's code, SQL or docs, a README a newcomer reads in minutes, and links that
resolve."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# "issue #14", "issue 12", "(#17)", "#14/#17", "session 10": labels that mean nothing to a reader.
LABEL = re.compile(r"(?i)\bissues? #?\d+\b|\(#\d+\)|#\d+/#\d+|\b(?:of|see|in) #\d+\b|\bsessions? ?\d+\b")


def tracked(*suffixes: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:  # not a git checkout (an sdist): look at the files on disk
        return [p for p in REPO.rglob("*") if p.suffix in suffixes and ".venv" not in p.parts]
    return [REPO / f for f in out.stdout.splitlines() if Path(f).suffix in suffixes]


def test_no_tracker_numbers_or_work_log_labels():
    found = []
    for path in tracked(".py", ".sql", ".md", ".yml", ".yaml", ".toml", ".html", ".js", ".css", ".service", ""):
        if not path.is_file() or path.name == "test_docs.py":
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for m in LABEL.finditer(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {m.group(0)}")
    assert not found, "say what the change does instead:\n" + "\n".join(found[:40])


def test_readme_is_short_and_runs_the_ci_test_command():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    command = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/pytest"
    assert command in readme
    assert command in (REPO / ".ci" / "run").read_text()


def test_relative_links_in_the_docs_resolve():
    broken = []
    for path in tracked(".md"):
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (path.parent / target.split("#")[0]).exists():
                broken.append(f"{path.relative_to(REPO)}: {target}")
    assert not broken, broken
