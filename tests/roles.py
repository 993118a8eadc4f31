"""Login roles for tests that connect as each cronbox role.

Roles are cluster-wide, so each pytest run creates its own, named after its pid, once per
session, and drops them at the end. Import the `logins` fixture into a test module to use it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from cronbox import db

PASSWORD = "t0p-s3cret-login"
# login suffix -> the cronbox roles it is granted
GRANTS = {
    "admin": ["cronbox_admin"],
    "alice": ["cronbox_user"],
    "bob": ["cronbox_user"],
    "worker": ["cronbox_worker"],
    "reader": ["cronbox_reader"],
    "process": ["cronbox_process"],
    "nobody": [],
}


class Logins:
    def __init__(self, prefix: str):
        self.prefix = prefix

    def name(self, who: str) -> str:
        return f"{self.prefix}_{who}"

    def dsn(self, dsn: str, who: str) -> str:
        """`dsn` (any database) reconnected as the login role `who`."""
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        info.update(user=self.name(who), password=PASSWORD)
        return psycopg.conninfo.make_conninfo(**info)

    def connect(self, dsn: str, who: str) -> psycopg.Connection:
        return db.connect(self.dsn(dsn, who))


@pytest.fixture(scope="session")
def logins(pg, template_dsn) -> Iterator[Logins]:
    """One login role per cronbox role (created after the template migrated the roles)."""
    found = Logins(f"t{os.getpid()}")
    with db.connect(pg.admin_dsn) as conn:
        for who, roles in GRANTS.items():
            name = sql.Identifier(found.name(who))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(name))
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(name, sql.Literal(PASSWORD)))
            for role in roles:
                conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), name))
    try:
        yield found
    finally:
        with db.connect(pg.admin_dsn) as conn:
            for who in GRANTS:
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(found.name(who))))
