"""The web console: server-rendered pages and actions over cronbox's public SQL functions.

Imports only the shared package `cronbox`, never `poller` or `relay`."""
