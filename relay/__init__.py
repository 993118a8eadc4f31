"""The relay process: outbox -> sinks, at least once."""
