"""The no-op pull-mode worker written with the kit, for bench/worker_kit.py:
`cronbox worker bench.kit_worker:worker`."""

from cronbox.worker import Worker

worker = Worker()


@worker.handler("default")
async def noop(run):
    return None
