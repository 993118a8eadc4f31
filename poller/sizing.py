"""How much the poller's loops take per transaction: passes and batches sized by the time they
hold their locks (`PassSizer`), and the flag with which dispatch tells saturation it is behind
(`Backlog`)."""

from __future__ import annotations

import dataclasses

from poller.saturate import Pass

@dataclasses.dataclass
class Backlog:
    """Set by the dispatch loop: its last batch came back full (due fires are waiting). The
    saturation loop then writes no catch-up (catchup => 'all' replaying fires from before the
    misfire grace, poller.plan): it would queue ahead of fires coming due meanwhile. Jobs it
    merely reaches late (at most their latest missed fire) are saturated all the same."""
    busy: bool = False


@dataclasses.dataclass
class PassSizer:
    """Saturation passes sized by time, not by count: a pass holds its jobs' locks from the
    claim to the commit, and on a loaded machine a thousand jobs or ten thousand fires take
    seconds to store. A pass that held them longer than `hold` makes the next ones smaller
    (in proportion, with a margin); a quick pass that took all it could lets them grow back
    (at most doubling) up to the configured size; one that found far less to do than it could
    take brings the size back to START, so a burst after a quiet spell (a thousand catch-ups created
    at once) begins with passes of a quarter of the size and grows from what they take. One
    per poller, shared by its workers. The dispatch loop sizes its batches with one too (not
    cautious: a quiet spell does not shrink them; fire bursts keep their full batches)."""
    hold: float          # seconds a pass aims to hold its jobs' locks
    batch: int           # the most jobs per pass (CRONBOX_SATURATE_BATCH)
    scale: float = 0.25  # the share of the full size (jobs, fires, catch-up fires) a pass takes
    workers: int = 1     # passes in flight at once: they share the catch-up allowance
    cautious: bool = True  # a quiet pass brings the size back to START

    MIN_SCALE = 0.001
    START = 0.25

    def jobs(self) -> int:
        return max(1, round(self.batch * self.scale))

    def late_scale(self) -> float:
        """Catch-up fires (stored already due, so queued ahead of fires coming due) per pass:
        the workers share one pass's allowance, so the queue ahead of another job's due fire
        grows no faster with more of them."""
        return self.scale / self.workers

    def observe(self, p: Pass, asked: int) -> None:
        self.adjust(p.seconds, p.claimed, asked, p.cut)

    def adjust(self, seconds: float, took: int, asked: int, cut: bool = False) -> None:
        """A transaction that took `took` of the `asked` size held its locks `seconds`."""
        if not took or seconds <= 0:
            return
        ratio = self.hold / seconds
        if ratio < 1:
            self.scale = max(self.MIN_SCALE, self.scale * ratio * 0.8)
        elif cut or took >= asked:  # it took all it could: there was more to take
            self.scale = min(1.0, self.scale * min(2.0, ratio))
        elif self.cautious and took < asked * self.START:  # far less to do than it could take (not a worker that
            # found the rest of another's batch): the next burst starts from a cautious size
            self.scale = min(self.scale, self.START)
