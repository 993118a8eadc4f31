"""Saturation passes are sized by time, not by count (poller.sizing.PassSizer): a pass that held
its jobs' locks longer than CRONBOX_SATURATE_HOLD makes the next ones smaller, quick full
passes grow them back to CRONBOX_SATURATE_BATCH, and the size reaches the pass's caps on fires
(poller.plan.plan_jobs). The real poller under load: tests/test_poller_isolation.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from poller.sizing import PassSizer
from poller.plan import FIRES_PER_PASS, plan_jobs
from poller.saturate import Pass
from poller.store import Job

NOW = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)


def took(seconds: float, claimed: int, planned: int | None = None) -> Pass:
    return Pass(claimed=claimed, planned=claimed if planned is None else planned, seconds=seconds)


def test_a_pass_that_held_its_locks_too_long_makes_the_next_ones_smaller_until_they_fit():
    sizer = PassSizer(hold=0.5, batch=1000, scale=1.0)
    sizer.observe(took(2.0, 1000), 1000)  # four times too long
    assert sizer.jobs() <= 250 * 0.8 + 1
    asked = sizer.jobs()
    sizer.observe(took(0.45, asked), asked)  # fits: stays about there (grows at most by the room left)
    assert asked <= sizer.jobs() <= asked * 0.5 / 0.45 + 1


def test_quick_full_passes_grow_back_to_the_configured_batch_and_no_further():
    sizer = PassSizer(hold=0.5, batch=1000, scale=0.01)
    sizes = []
    for _ in range(12):
        asked = sizer.jobs()
        sizer.observe(took(0.05, asked), asked)  # took all it asked for, in a tenth of the time
        sizes.append(sizer.jobs())
    assert all(b <= 2 * a for a, b in zip(sizes, sizes[1:])), sizes  # at most doubling
    assert sizes[-1] == 1000


def test_a_quick_pass_that_found_less_to_do_says_nothing_about_a_bigger_one():
    sizer = PassSizer(hold=0.5, batch=1000, scale=0.1)
    sizer.observe(took(0.01, 30), 100)
    assert sizer.jobs() == 100
    sizer.observe(took(0.0, 0), 100)  # nothing claimed
    assert sizer.jobs() == 100


def test_after_a_quiet_spell_a_burst_starts_with_small_passes():
    sizer = PassSizer(hold=0.5, batch=1000)
    assert sizer.jobs() == 250  # a poller starts cautiously
    for _ in range(3):
        sizer.observe(took(0.05, sizer.jobs()), sizer.jobs())
    assert sizer.jobs() == 1000
    sizer.observe(took(0.01, 3), 1000)  # a refill of three jobs: quiet
    assert sizer.jobs() == 250  # the next burst (a thousand catch-ups) starts from a quarter


def every_second(job_id: int) -> Job:
    return Job(job_id=job_id, kind="every", every_mode="fixed_rate", every=timedelta(seconds=1), anchor=NOW,
               frontier=NOW, starts_at=None, ends_at=None, catchup="latest", catchup_window=None,
               catchup_from=None, at=None, cron_normalized=None, timezone="UTC", now=NOW, bucket=0)


def test_a_pass_sized_down_takes_fewer_fires():
    jobs = [every_second(k) for k in range(1, 201)]  # 120 fires each in a 2-minute horizon
    full = plan_jobs(jobs, NOW, timedelta(minutes=2), timedelta(seconds=30), None)
    tenth = plan_jobs(jobs, NOW, timedelta(minutes=2), timedelta(seconds=30), None, scale=0.1)
    assert len(full.plan.fire_at) >= FIRES_PER_PASS
    assert FIRES_PER_PASS // 10 <= len(tenth.plan.fire_at) < FIRES_PER_PASS // 10 + 120
    assert tenth.handled == len(tenth.plan.job) < full.handled


def test_dispatch_batches_shrink_when_slow_and_keep_their_size_through_quiet_ticks():
    sizer = PassSizer(hold=0.3, batch=1000, scale=1.0, cautious=False)
    sizer.adjust(1.5, 1000, 1000)  # a batch of catch-up runs took 1.5 s
    assert sizer.jobs() <= 1000 * 0.2 * 0.8 + 1
    small = sizer.jobs()
    for _ in range(5):
        sizer.adjust(0.005, 1, small)  # quiet ticks: one fire each
    assert sizer.jobs() == small  # neither shrunk nor grown by them
    for _ in range(4):
        sizer.adjust(0.05, sizer.jobs(), sizer.jobs())  # quick full batches
    assert sizer.jobs() == 1000


def test_while_dispatch_is_behind_a_job_reached_late_is_saturated_and_a_long_catch_up_waits():
    """A new schedule the poller reaches minutes after its creation (a million saturating from
    empty) replays at most its latest missed fire: it is planned, not deferred behind dispatch's
    backlog (deferring it only turned its fires into missed ones). A catchup => 'all' job with
    minutes of fires to replay waits for the backlog to clear."""
    created = NOW - timedelta(minutes=5)
    late = every_second(1)._replace(anchor=created, frontier=created)
    replay = every_second(2)._replace(anchor=created, frontier=created, catchup="all",
                                      catchup_from=NOW - timedelta(days=1))
    on_time = every_second(3)
    args = (NOW, timedelta(minutes=2), timedelta(seconds=30), 1.0)
    behind = plan_jobs([late, replay, on_time], *args, catch_up=False)
    assert behind.plan.job == [1, 3] and behind.deferred == 1
    # job 1: its gap row, the latest fire before the grace, the 30 inside it, now and the
    # 120 of the horizon
    assert behind.plan.entries[0] == 1 + 1 + 30 + 1 + 120
    # dispatch keeping up: the catch-up is written too (its late fires counted against the pass)
    free = plan_jobs([late, replay, on_time], *args, catch_up=True)
    assert free.plan.job == [1, 2, 3] and free.deferred == 0


def test_a_pass_plans_its_jobs_in_id_order_whatever_order_they_were_claimed_in():
    """cronbox.store_fires takes the pass's jobs in ascending id order (it finds each job's values
    by binary search, without sorting them again): the plan lists them so, each job's fires with it."""
    claimed = [every_second(k) for k in (3, 1, 2)]  # the claim's order: most urgent first
    planned = plan_jobs(claimed, NOW, timedelta(seconds=5), timedelta(seconds=30), None)
    assert planned.plan.job == [1, 2, 3]
    assert planned.plan.fire_job == sorted(planned.plan.fire_job) and set(planned.plan.fire_job) == {1, 2, 3}
