"""The poller process: schedules -> job_future (saturation) -> run + outbox (dispatch)."""
