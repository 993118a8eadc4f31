"""cronbox: a job scheduler that lives inside PostgreSQL.

This is the small shared package: configuration, the connection pool, the migrator, the
private PostgreSQL helper, logging and the CLI. The two processes live in the top-level
packages `poller` and `relay`; neither imports the other, and this package imports neither
(the CLI loads them by name as the composition root).
"""

__version__ = "0.1.0"
