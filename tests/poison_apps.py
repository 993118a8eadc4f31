"""Worker apps for the poison corpus (tests/test_poison_corpus.py), run as real processes:
`push` (`cronbox worker tests.poison_apps:push --http PORT`) serves the queues `pushq` and
`canary`, `pull` (`cronbox worker tests.poison_apps:pull`) claims `pullq`. A run's payload
says what its handler does: `{"mode": "echo" | "raise_nul" | "result_nul" | "huge_result"}`;
anything else (a list, a number) is echoed back."""

from __future__ import annotations

from cronbox.worker import Worker

push = Worker()
pull = Worker()


def act(run):
    mode = run.payload.get("mode") if isinstance(run.payload, dict) else "echo"
    if mode == "raise_nul":
        raise RuntimeError("an exception whose text holds a NUL: a\x00b " + "x" * 10_000)
    if mode == "result_nul":
        return {"text": "a\x00b"}
    if mode == "huge_result":
        return "x" * 3_000_000
    return {"echo": run.payload}


@push.handler("pushq")
async def pushed(run):
    return act(run)


@push.handler("canary")
async def canary(run):
    return {"ok": True}


@pull.handler("pullq")
async def pulled(run):
    return act(run)
