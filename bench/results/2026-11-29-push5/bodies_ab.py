"""relay/message.py's bodies() (a claim's message texts from the claim's parts): a base commit's
module against this tree's, 1,000-row claims as the relay's claim returns them, alternated in
one process, process CPU µs per row (median of 60 claims). Two shapes: every row sharing its
deadline (rows claimed at or after their due time: now + timeout), and a deadline per row (rows
claimed ahead of distinct due times: due time + timeout). Fire times shared in both.

    python bench/results/2026-11-29-push5/bodies_ab.py [BASE]   (default e1ecae5)
"""
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
from relay import message as new  # noqa: E402
from relay.store import _PARTS  # noqa: E402

base = sys.argv[1] if len(sys.argv) > 1 else "e1ecae5"
text = subprocess.run(["git", "show", f"{base}:relay/message.py"], cwd=REPO, capture_output=True, text=True,
                      check=True).stdout
with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    f.write(text)
spec = importlib.util.spec_from_file_location("message_base", f.name)
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)
N = 1000


def rows(distinct_deadline: bool, deadline: float) -> list[tuple]:
    return [(10**15 + i, "default", f"{10**15 + i}:1", None, 0.25, -0.5, 0.001, 1764400000.123, 1, 0,
             f"tp-{i}", "{}", 1, 1764400000.5, deadline + (i * 1.7e-5 if distinct_deadline else 0.0))
            for i in range(N)]


for label, distinct in (("shared deadline", False), ("a deadline per row", True)):
    res: dict[str, list[float]] = {"base": [], "new": []}
    for rep in range(60):
        raw = rows(distinct, 1764400300.5 + rep * 0.37)  # new times at each claim
        order = (("base", old), ("new", new)) if rep % 2 else (("new", new), ("base", old))
        for name, mod in order:
            t = time.process_time()
            mod.bodies(raw, _PARTS)
            res[name].append((time.process_time() - t) / N * 1e6)
        assert old.bodies(raw, _PARTS) == new.bodies(raw, _PARTS)
    print(f"{label:20s} base {statistics.median(res['base']):.2f}  new {statistics.median(res['new']):.2f} µs/row")
