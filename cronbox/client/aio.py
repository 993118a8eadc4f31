"""The async twins of cronbox.client's calls: the same arguments after a psycopg
AsyncConnection (`await client.aio.schedule(aconn, "report", every=timedelta(seconds=30))`)."""

from __future__ import annotations

from cronbox.client import calls, reads

schedule = calls.schedule.aio
unschedule = calls.unschedule.aio
pause = calls.pause.aio
resume = calls.resume.aio
trigger = calls.trigger.aio
backfill = calls.backfill.aio
preview = calls.preview.aio
next_fires = calls.next_fires.aio
add_dependency = calls.add_dependency.aio
remove_dependency = calls.remove_dependency.aio
create_calendar = calls.create_calendar.aio
drop_calendar = calls.drop_calendar.aio
cancel = calls.cancel.aio
set_queue_limit = calls.set_queue_limit.aio
set_pool = calls.set_pool.aio
redrive = calls.redrive.aio
rerun = calls.rerun.aio
delete_dead_letter = calls.delete_dead_letter.aio
pause_schedules = calls.pause_schedules.aio
resume_schedules = calls.resume_schedules.aio
grant_queue = calls.grant_queue.aio
revoke_queue = calls.revoke_queue.aio
set_quota = calls.set_quota.aio
get_schedule = reads.get_schedule.aio
get_run = reads.get_run.aio
