"""The schedule SQL interface end to end through a real saturation pass: create, update,
unschedule, pause, resume, trigger, the change log, one-offs, start/end windows, jitter,
fixed rate and fixed delay, and the cronbox.schedules view. Time is driven with p_now."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from .schedhelp import aconn, changes, futures, missed, one, rows, saturate, schedule, utc  # noqa: F401

T0 = utc(2030, 1, 1, 0, 0)
MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)


async def test_schedule_creates_a_job_and_logs_who_created_it(aconn):
    job_id = await schedule(aconn, name="a", cron="*/10 * * * *", timezone="Europe/Berlin", p_now=T0)
    user = await one(aconn, "SELECT current_user")
    assert await changes(aconn, "a") == [("created", "created", user)]
    row = await one(aconn, "SELECT job_id, kind, expression, cron_normalized, timezone, status, paused "
                           "FROM cronbox.schedules WHERE name = 'a'")
    assert row == (job_id, "cron", "*/10 * * * *", "0 */10 * * * * *", "Europe/Berlin", "active", False)


async def test_same_name_updates_atomically_recomputes_pending_futures_and_keeps_history(aconn):
    job_id = await schedule(aconn, name="u", cron="*/10 * * * *", payload='{"v": 1}', p_now=T0)
    await saturate(aconn, T0, horizon=HOUR)
    assert await futures(aconn, "u") == [T0 + k * 10 * MIN for k in range(1, 7)]
    await one(aconn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", T0 + 10 * MIN)

    again = await schedule(aconn, name="u", cron="*/15 * * * *", payload='{"v": 2}', p_now=T0 + 12 * MIN)
    assert again == job_id
    assert await futures(aconn, "u") == []  # the old pending fires are gone in the same transaction
    await saturate(aconn, T0 + 12 * MIN, horizon=HOUR)
    assert await futures(aconn, "u") == [T0 + k * 15 * MIN for k in range(1, 5)]
    assert await rows(aconn, "SELECT fire_at FROM cronbox.runs WHERE job = 'u'") == [T0 + 10 * MIN]
    assert await one(aconn, "SELECT definition_version FROM cronbox.job WHERE job_id = %s", job_id) == 2
    assert [c[0] for c in await changes(aconn, "u")] == ["created", "updated"]


async def test_an_identical_schedule_call_changes_nothing(aconn):
    await schedule(aconn, name="same", every="5 minutes", p_now=T0)
    await saturate(aconn, T0, horizon=HOUR)
    before = await futures(aconn, "same")
    await schedule(aconn, name="same", every="5 minutes", p_now=T0 + MIN)
    assert await futures(aconn, "same") == before
    assert [c[0] for c in await changes(aconn, "same")] == ["created"]


async def test_unschedule_removes_job_and_futures_keeps_history_and_logs_it(aconn):
    await schedule(aconn, name="gone", cron="* * * * *", p_now=T0)
    await saturate(aconn, T0, horizon=10 * MIN)
    await one(aconn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", T0 + MIN)
    assert await one(aconn, "SELECT cronbox.unschedule_at('gone', reason => 'retired', p_now => %s)", T0 + 2 * MIN)
    assert await one(aconn, "SELECT count(*) FROM cronbox.job WHERE name = 'gone'") == 0
    assert await one(aconn, "SELECT count(*) FROM cronbox.job_future") == 0
    assert await rows(aconn, "SELECT fire_at FROM cronbox.runs WHERE job = 'gone'") == [T0 + MIN]
    assert [c[:2] for c in await changes(aconn, "gone")] == [("created", "created"), ("unscheduled", "retired")]
    assert await one(aconn, "SELECT cronbox.unschedule('gone')") is False


async def test_pause_drops_pending_fires_and_resume_skips_the_fires_inside_the_pause(aconn):
    await schedule(aconn, name="p", cron="* * * * *", p_now=T0)
    await saturate(aconn, T0, horizon=10 * MIN)
    assert len(await futures(aconn, "p")) == 10
    assert await one(aconn, "SELECT cronbox.pause_at('p', 'maintenance', p_now => %s)", T0 + 90 * timedelta(seconds=1))
    assert await futures(aconn, "p") == []
    assert await one(aconn, "SELECT status || ':' || paused_reason FROM cronbox.schedules WHERE name = 'p'") \
        == "paused:maintenance"
    assert await saturate(aconn, T0 + 5 * MIN, horizon=10 * MIN) == (0, 0, 0)  # paused: not claimed
    assert await one(aconn, "SELECT cronbox.pause('p')") is False  # already paused

    assert await one(aconn, "SELECT cronbox.resume_at('p', p_now => %s)", T0 + HOUR)
    await saturate(aconn, T0 + HOUR, horizon=3 * MIN)
    assert await futures(aconn, "p") == [T0 + HOUR + k * MIN for k in range(1, 4)]
    assert await missed(aconn, "p") == []
    assert [c[:2] for c in await changes(aconn, "p")] == [
        ("created", "created"), ("paused", "maintenance"), ("resumed", "resumed by operator")]
    assert await one(aconn, "SELECT cronbox.resume('p')") is False


async def test_pause_keeps_a_triggered_run_and_unknown_names_raise(aconn):
    await schedule(aconn, name="m", every="1 hour", p_now=T0)
    await one(aconn, "SELECT cronbox.trigger_at('m', p_now => %s)", T0)
    await one(aconn, "SELECT cronbox.pause_at('m', p_now => %s)", T0)
    # trigger() dispatched it at once; a pause does not withdraw what is due now
    assert await rows(aconn, "SELECT origin, state FROM cronbox.runs WHERE job = 'm'") == [("manual", "dispatched")]
    for fn in ("pause", "resume", "trigger"):
        with pytest.raises(psycopg.errors.NoDataFound, match="name: no schedule named 'nope'"):
            async with aconn.transaction():
                await aconn.execute(f"SELECT cronbox.{fn}('nope')")


async def test_pause_and_resume_of_a_one_off_hands_it_to_its_catchup_policy(aconn):
    await schedule(aconn, name="once", at=T0 + 5 * MIN, p_now=T0)
    await saturate(aconn, T0, horizon=10 * MIN)
    await one(aconn, "SELECT cronbox.pause_at('once', p_now => %s)", T0 + MIN)
    assert await futures(aconn, "once") == []
    await one(aconn, "SELECT cronbox.resume_at('once', p_now => %s)", T0 + HOUR)
    await saturate(aconn, T0 + HOUR)
    assert await futures(aconn, "once") == [T0 + 5 * MIN]  # catchup 'latest': it still runs


async def test_trigger_dispatches_a_manual_fire_now_with_its_own_payload(aconn):
    job_id = await schedule(aconn, name="t", cron="0 0 1 1 *", payload='{"a": 1}', overlap="allow", p_now=T0)
    await one(aconn, "SELECT cronbox.trigger_at('t', '{\"b\": 2}', p_now => %s)", T0 + MIN)
    await one(aconn, "SELECT cronbox.trigger_at('t', p_now => %s)", T0 + MIN)
    # decided in trigger's own transaction (dispatch's write): no future left for the poller
    assert await rows(aconn, "SELECT 1 FROM cronbox.job_future WHERE job_id = %s AND origin = 'manual'",
                      job_id) == []
    got = await rows(aconn, "SELECT r.fire_at, r.dispatched_at, r.payload, r.state, o.available_at "
                            "FROM cronbox.runs r JOIN cronbox.outbox o USING (run_id) "
                            "WHERE r.job_id = %s AND r.origin = 'manual' ORDER BY r.run_id", job_id)
    assert got == [(T0 + MIN, T0 + MIN, {"b": 2}, "dispatched", T0 + MIN),
                   (T0 + MIN, T0 + MIN, {"a": 1}, "dispatched", T0 + MIN)]
    assert [c[0] for c in await changes(aconn, "t")] == ["created", "triggered", "triggered"]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="payload: must be a JSON object"):
        await aconn.execute("SELECT cronbox.trigger('t', '[1]')")


async def test_at_job_fires_once_and_then_reads_finished(aconn):
    await schedule(aconn, name="at", at=T0 + 5 * MIN, p_now=T0)
    await saturate(aconn, T0, horizon=10 * MIN)
    assert await futures(aconn, "at") == [T0 + 5 * MIN]
    assert await one(aconn, "SELECT status FROM cronbox.schedules WHERE name = 'at'") == "active"
    # nothing is left to schedule, but the fire has not gone yet: not finished in the change log
    assert "finished" not in [c[0] for c in await changes(aconn, "at")]
    assert await one(aconn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", T0 + 4 * MIN) == 0
    assert "finished" not in [c[0] for c in await changes(aconn, "at")]
    # the change log says finished once the fire is dispatched, the status once the run is over
    # (docs/schedules.md, One-off)
    await one(aconn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", T0 + 5 * MIN)
    assert await rows(aconn, "SELECT action, reason, changed_at FROM cronbox.schedule_changes "
                             "WHERE job = 'at' AND action = 'finished'") == [
        ("finished", "one-off fire handled", T0 + 5 * MIN)]
    assert await one(aconn, "SELECT status FROM cronbox.schedules WHERE name = 'at'") == "active"
    run_id = await one(aconn, "SELECT run_id FROM cronbox.runs WHERE job = 'at'")
    await one(aconn, "SELECT cronbox.complete_run_at(%s, NULL, %s)", run_id, T0 + 6 * MIN)
    assert await one(aconn, "SELECT status FROM cronbox.schedules WHERE name = 'at'") == "finished"
    assert await saturate(aconn, T0 + HOUR) == (0, 0, 0)
    await one(aconn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", T0 + HOUR)
    assert [c[:2] for c in await changes(aconn, "at")].count(("finished", "one-off fire handled")) == 1


async def test_a_pending_one_off_changed_at_the_same_time_still_fires_once(aconn):
    # its fire stored, then another payload for the same time: the pending fire is recomputed
    # under the new definition, not dropped with the old one's (the job never fired)
    await schedule(aconn, name="at-edit", at=T0 + 5 * MIN, payload='{"v": 1}', p_now=T0)
    await saturate(aconn, T0, horizon=10 * MIN)
    assert await futures(aconn, "at-edit") == [T0 + 5 * MIN]
    await schedule(aconn, name="at-edit", at=T0 + 5 * MIN, payload='{"v": 2}', p_now=T0 + MIN)
    assert "finished" not in [c[0] for c in await changes(aconn, "at-edit")]
    await saturate(aconn, T0 + MIN, horizon=10 * MIN)
    assert await futures(aconn, "at-edit") == [T0 + 5 * MIN]
    await one(aconn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", T0 + 5 * MIN)
    assert await rows(aconn, "SELECT payload FROM cronbox.runs WHERE job = 'at-edit'") == [{"v": 2}]
    assert await saturate(aconn, T0 + HOUR) == (0, 0, 0)
    assert [c[:2] for c in await changes(aconn, "at-edit")].count(("finished", "one-off fire handled")) == 1


@pytest.mark.parametrize("catchup, fired, dropped", [("latest", 1, 0), ("all", 1, 0), ("skip", 0, 1)])
async def test_at_in_the_past_follows_the_catchup_policy(aconn, catchup, fired, dropped):
    await schedule(aconn, name="late", at=T0 - HOUR, catchup=catchup, p_now=T0)
    await saturate(aconn, T0)
    assert len(await futures(aconn, "late")) == fired
    assert len(await missed(aconn, "late")) == dropped
    assert await one(aconn, "SELECT finished_at IS NOT NULL FROM cronbox.job WHERE name = 'late'")


async def test_starts_at_and_ends_at_bound_the_fires_and_the_job_then_finishes(aconn):
    await schedule(aconn, name="w", cron="0 * * * *", starts_at=T0 + 150 * MIN, ends_at=T0 + 5 * HOUR, p_now=T0)
    await saturate(aconn, T0, horizon=timedelta(days=1))
    assert await futures(aconn, "w") == [T0 + 3 * HOUR, T0 + 4 * HOUR, T0 + 5 * HOUR]
    # finished once the last fire before ends_at is dispatched, not when it is materialised
    for fire in (3, 4):
        await one(aconn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", T0 + fire * HOUR)
        await one(aconn, "SELECT cronbox.complete_run(run_id) FROM cronbox.runs WHERE job = 'w' "
                         "AND state = 'dispatched'")
        assert "finished" not in [c[0] for c in await changes(aconn, "w")]
    await one(aconn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", T0 + 5 * HOUR)
    assert [c[:2] for c in await changes(aconn, "w") if c[0] == "finished"] == [("finished", "ends_at passed")]


async def test_a_one_off_whose_fire_is_dropped_is_logged_finished_by_the_poller(aconn):
    """Nothing pending: the saturation pass that drops the fire logs the finish itself."""
    await schedule(aconn, name="gone", at=T0 - HOUR, catchup="skip", p_now=T0)
    await saturate(aconn, T0)
    assert [c[:2] for c in await changes(aconn, "gone") if c[0] == "finished"] == [("finished", "one-off fire handled")]


async def test_every_fires_at_starts_at_plus_k_intervals(aconn):
    await schedule(aconn, name="rate", every="90 minutes", starts_at=T0 + HOUR, p_now=T0)
    await saturate(aconn, T0, horizon=6 * HOUR)
    assert await futures(aconn, "rate") == [T0 + HOUR + k * 90 * MIN for k in range(4)]


async def test_every_without_start_first_fires_one_interval_after_creation_on_a_whole_second(aconn):
    created = T0 + timedelta(milliseconds=700)
    await schedule(aconn, name="r", every="30 seconds", p_now=created)
    await saturate(aconn, created, horizon=2 * MIN)
    assert (await futures(aconn, "r"))[:2] == [T0 + timedelta(seconds=30), T0 + timedelta(seconds=60)]


async def test_every_day_is_24_elapsed_hours_across_dst(aconn):
    await schedule(aconn, name="d", every="1 day", starts_at=utc(2030, 3, 30, 12), timezone="Europe/Berlin",
                   p_now=utc(2030, 3, 29))
    await saturate(aconn, utc(2030, 3, 29), horizon=timedelta(days=4))
    fires = await futures(aconn, "d")
    assert [b - a for a, b in zip(fires, fires[1:])] == [timedelta(hours=24)] * (len(fires) - 1)


async def test_jitter_delays_due_at_but_keeps_the_logical_fire_time(aconn):
    job_id = await schedule(aconn, name="j", every="1 minute", starts_at=T0, jitter="30 seconds", p_now=T0)
    await saturate(aconn, T0, horizon=2 * HOUR)
    got = await rows(aconn, "SELECT fire_at, due_at FROM cronbox.job_future WHERE job_id = %s ORDER BY fire_at", job_id)
    assert [f for f, _ in got] == [T0 + k * MIN for k in range(121)]
    delays = [d - f for f, d in got]
    assert all(timedelta(0) <= d <= timedelta(seconds=30) for d in delays)
    assert len(set(delays)) > 100  # random, not a constant offset


async def test_fixed_delay_next_fire_is_one_interval_after_the_previous_run_finished(aconn):
    job_id = await schedule(aconn, name="fd", every="10 minutes", every_mode="fixed_delay", p_now=T0)
    await saturate(aconn, T0, horizon=HOUR)
    assert await futures(aconn, "fd") == [T0 + 10 * MIN]  # one fire at a time
    assert await saturate(aconn, T0 + 5 * MIN, horizon=HOUR) == (0, 0, 0)
    await one(aconn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", T0 + 10 * MIN)
    finished = T0 + 10 * MIN + timedelta(seconds=37)
    nxt = await one(aconn, "SELECT cronbox.schedule_next_fixed_delay(%s, %s)", job_id, finished)
    assert nxt == finished + 10 * MIN
    assert await one(aconn, "SELECT cronbox.schedule_next_fixed_delay(%s, %s)", job_id, finished) is None
    await saturate(aconn, finished, horizon=HOUR)
    assert await futures(aconn, "fd") == [finished + 10 * MIN]
    assert await one(aconn, "SELECT status FROM cronbox.schedules WHERE name = 'fd'") == "active"


async def test_fixed_delay_hook_is_a_noop_for_other_jobs(aconn):
    job_id = await schedule(aconn, name="c", cron="* * * * *", p_now=T0)
    assert await one(aconn, "SELECT cronbox.schedule_next_fixed_delay(%s, %s)", job_id, T0) is None
    assert await one(aconn, "SELECT cronbox.schedule_next_fixed_delay(-1, %s)", T0) is None


async def test_schedules_view_shows_expression_time_zone_status_and_next_fire(aconn):
    await schedule(aconn, name="v-cron", cron="30 2 * * *", timezone="Europe/Berlin", p_now=T0)
    await schedule(aconn, name="v-every", every="5 minutes", every_mode="fixed_delay", p_now=T0)
    await schedule(aconn, name="v-at", at=T0 + HOUR, p_now=T0)
    await schedule(aconn, name="v-after", after=["v-cron", "v-at"], p_now=T0)
    await saturate(aconn, T0, horizon=timedelta(days=2))
    got = await rows(aconn, "SELECT name, kind, expression, status, next_fire FROM cronbox.schedules "
                            "WHERE name LIKE 'v-%%' ORDER BY name")
    assert got == [
        ("v-after", "after", "after v-cron, v-at", "waiting", None),
        ("v-at", "at", "at " + await one(aconn, "SELECT %s::timestamptz::text", T0 + HOUR), "active", T0 + HOUR),
        ("v-cron", "cron", "30 2 * * *", "active", utc(2030, 1, 1, 1, 30)),
        ("v-every", "every", "every 00:05:00 after the previous run", "active", T0 + 5 * MIN),
    ]


async def test_next_fire_is_not_shown_until_the_poller_has_computed_it(aconn):
    await schedule(aconn, name="n-hourly", cron="0 * * * *", p_now=T0 + 13 * MIN)
    # schedule() knows only a lower bound (its creation time): no fire time is shown for it
    assert await one(aconn, "SELECT next_fire FROM cronbox.schedules WHERE name = 'n-hourly'") is None
    await saturate(aconn, T0 + 13 * MIN)
    assert await one(aconn, "SELECT next_fire FROM cronbox.schedules WHERE name = 'n-hourly'") == T0 + HOUR


async def test_a_job_whose_fires_cannot_be_computed_is_quarantined_with_the_reason(aconn):
    await schedule(aconn, name="broken", cron="* * * * *", p_now=T0)
    await aconn.execute("UPDATE cronbox.job SET timezone = 'Nowhere/Land' WHERE name = 'broken'")
    await saturate(aconn, T0)
    reason = await one(aconn, "SELECT paused_reason FROM cronbox.schedules WHERE name = 'broken' AND paused")
    assert reason.startswith('quarantined: cannot compute fires: CronError: cron: unknown time zone "Nowhere/Land"')
    assert (await changes(aconn, "broken"))[-1][:2] == ("quarantined", reason)
    assert await one(aconn, "SELECT status FROM cronbox.schedules WHERE name = 'broken'") == "quarantined"
    note = await one(aconn, "SELECT message FROM cronbox.outbox WHERE kind = 'notification' "
                            "AND message->>'event' = 'schedule_paused' AND message->>'job' = 'broken'")
    assert note["reason"] == reason and note["quarantined"] is True
