"""The deployment files, read as the tools read them: docker-compose.yml and the Kubernetes
manifests run one image, each process under its own least-privilege role (migrations as the
schema's owner, nothing as a superuser), with /healthz checks, the console and a worker included."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import yaml

REPO = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
ROLES = (REPO / "deploy" / "compose" / "roles.sql").read_text()
K8S = [doc for p in sorted((REPO / "deploy" / "kubernetes").glob("*.yaml"))
       for doc in yaml.safe_load_all(p.read_text()) if doc]

# process -> (login role, the cronbox role it is granted)
EXPECTED = {"migrate": ("cronbox_migrator", None), "poller": ("cronbox_poller", "cronbox_process"),
            "relay": ("cronbox_relay", "cronbox_process"), "worker": ("cronbox_demo_worker", "cronbox_worker"),
            "web": ("cronbox_console", "cronbox_admin")}


def _granted(role: str) -> set[str]:
    return {g for line in re.findall(r"(?m)^GRANT (.+) TO (.+);$", ROLES)
            for g in (x.strip() for x in line[0].split(",")) if role in (y.strip() for y in line[1].split(","))}


def test_compose_runs_every_process_from_one_image_under_its_own_role():
    services = COMPOSE["services"]
    cronbox = {k: v for k, v in services.items() if k != "postgres"}
    assert set(cronbox) == set(EXPECTED)
    assert {s["image"] for s in cronbox.values()} == {"cronbox:latest"}
    assert (REPO / "docker-compose.yml").read_text().count("build:") == 1, "build once, in the shared anchor"
    for name, (role, granted) in EXPECTED.items():
        url = urlsplit(cronbox[name]["environment"]["DATABASE_URL"])
        assert url.username == role, name
        assert re.search(rf"(?m)^CREATE ROLE {role} LOGIN PASSWORD '{re.escape(url.password)}'", ROLES), name
        if granted:
            assert granted in _granted(role), f"{role} is not granted {granted}"
    assert not re.search(r"(?im)^(CREATE|ALTER) ROLE .*\b(SUPERUSER|BYPASSRLS)\b", ROLES)
    assert re.search(r"(?m)^CREATE ROLE cronbox_migrator LOGIN .*CREATEROLE;$", ROLES)
    assert "GRANT CREATE ON DATABASE cronbox TO cronbox_migrator;" in ROLES
    assert services["postgres"]["environment"]["POSTGRES_USER"] == "postgres"  # only the init uses it
    assert any("roles.sql:/docker-entrypoint-initdb.d/" in v for v in services["postgres"]["volumes"])


def test_compose_checks_each_long_running_process_on_healthz():
    services = COMPOSE["services"]
    for name in ("poller", "relay", "worker", "web"):
        check = " ".join(services[name]["healthcheck"]["test"])
        assert "/healthz" in check, name
        port = re.search(r"127\.0\.0\.1:(\d+)/healthz", check).group(1)
        command = services[name]["command"]
        assert port == (command[command.index("--port") + 1] if "--port" in command
                        else services[name]["environment"]["CRONBOX_METRICS_PORT"]), name
    assert "http://worker:8080/run" in services["relay"]["environment"]["CRONBOX_SINKS"]


def _workloads() -> dict[str, dict]:
    out = {}
    for doc in K8S:
        if doc["kind"] in ("Deployment", "Job"):
            name = doc["metadata"]["name"].removeprefix("cronbox-")
            out[name] = doc["spec"]["template"]["spec"]
    return out


def test_kubernetes_runs_the_same_processes_from_one_image_under_their_roles():
    workloads = _workloads()
    assert set(workloads) == {"migrate", "poller", "relay", "web", "worker"}
    secrets = {d["metadata"]["name"]: d["stringData"] for d in K8S if d["kind"] == "Secret"}
    images = set()
    for name, spec in workloads.items():
        (container,) = spec["containers"]
        images.add(container["image"])
        assert spec["securityContext"]["runAsNonRoot"] is True
        dsns = [secrets[s["secretRef"]["name"]]["DATABASE_URL"] for s in container["envFrom"]
                if "secretRef" in s and "DATABASE_URL" in secrets[s["secretRef"]["name"]]]
        assert len(dsns) == 1, name
        assert urlsplit(dsns[0].split(",")[0] + "/").username == EXPECTED[name][0], name
        if name != "migrate":
            for probe in ("readinessProbe", "livenessProbe"):
                assert container[probe]["httpGet"]["path"] == "/healthz", (name, probe)
    assert images == {"cronbox:latest"}
    services = {d["metadata"]["name"] for d in K8S if d["kind"] == "Service"}
    assert {"cronbox-web", "cronbox-worker"} <= services
    config = next(d for d in K8S if d["kind"] == "ConfigMap")["data"]
    assert "http://cronbox-worker:8080/run" in config["CRONBOX_SINKS"]


def test_the_compose_roles_migrate_and_run_without_a_superuser(tmp_path):
    """On a new cluster: roles.sql as the image's init would run it, `cronbox migrate` as
    cronbox_migrator, then each role does its part and nothing more."""
    import os
    import subprocess
    import sys

    import psycopg

    from cronbox.pgcluster import Cluster

    os.chmod(tmp_path, 0o755)
    cluster = Cluster(tmp_path / "pg")
    dsn = cluster.start()
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE cronbox")
        host = dsn.split("@")[1].split("/")[0]
        with psycopg.connect(f"postgresql://postgres@{host}/cronbox", autocommit=True) as conn:
            conn.execute(ROLES)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "CRONBOX_", "DATABASE_URL"))}
        out = subprocess.run([sys.executable, "-m", "cronbox", "migrate"], capture_output=True, text=True,
                             env={**env, "DATABASE_URL": f"postgresql://cronbox_migrator@{host}/cronbox"}, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]

        def as_role(role: str) -> psycopg.Connection:
            return psycopg.connect(f"postgresql://{role}@{host}/cronbox", autocommit=True)

        with as_role("cronbox_console") as conn:
            conn.execute("SET ROLE cronbox_admin")
            conn.execute("SELECT cronbox.schedule('hello', every => '1 hour', queue => 'q')")
            conn.execute("SELECT cronbox.trigger('hello')")  # decided (dispatched) in the same call
            conn.execute("RESET ROLE")
            conn.execute("SET ROLE cronbox_web")  # how `cronbox web` registers itself
            me = conn.execute("SELECT cronbox.register_console('console:h:1', 'h', 1, 'v')").fetchone()[0]
            assert conn.execute("SELECT cronbox.deregister_console(%s)", (me,)).fetchone()[0]
        with as_role("cronbox_poller") as conn:
            conn.execute("SELECT * FROM cronbox.dispatch(10)")
            assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE job = 'hello'").fetchone()[0] == 1
        with as_role("cronbox_demo_worker") as conn:
            (claimed,) = conn.execute("SELECT count(*) FROM cronbox.claim_runs('q', 'w', 10)").fetchone()
            assert claimed == 1
            try:
                conn.execute("SELECT cronbox.schedule('nope', every => '1 hour')")
                raise AssertionError("a worker role scheduled a job")
            except psycopg.errors.InsufficientPrivilege:
                pass
        with psycopg.connect(f"postgresql://postgres@{host}/cronbox") as conn:
            owner = conn.execute("SELECT nspowner::regrole::text FROM pg_catalog.pg_namespace "
                                 "WHERE nspname = 'cronbox'").fetchone()[0]
            super_logins = conn.execute("SELECT array_agg(rolname) FROM pg_catalog.pg_roles "
                                        "WHERE rolname LIKE 'cronbox%%' AND (rolsuper OR rolbypassrls)").fetchone()[0]
        assert owner == "cronbox_owner" and super_logins is None
    finally:
        cluster.stop()
