"""The model worker's own logic: one thread, priorities, a bound, timeouts, cancellation."""

from __future__ import annotations

import asyncio
import threading

import pytest

from indexer.server.worker import PRIORITY_EMBED, PRIORITY_SEARCH, ModelWorker, Overloaded


@pytest.fixture
def worker():
    w = ModelWorker(max_queue=4, queue_timeout=30)
    yield w
    w.close()


def test_runs_jobs_on_one_thread_and_returns_values_and_errors(worker: ModelWorker) -> None:
    async def main():
        names = await asyncio.gather(*(worker.run(lambda: threading.current_thread().name) for _ in range(3)))
        with pytest.raises(ZeroDivisionError):
            await worker.run(lambda: 1 / 0)
        return names

    names = asyncio.run(main())
    assert set(names) == {"indexer-model"}
    assert worker.depth == 0 and worker.completed == 4


def test_searches_jump_ahead_of_embedding_batches(worker: ModelWorker) -> None:
    release = threading.Event()
    order: list[str] = []

    async def main():
        blocker = asyncio.create_task(worker.run(lambda: release.wait(30)))
        await asyncio.sleep(0)
        while worker.depth < 1:
            await asyncio.sleep(0.005)
        embed = asyncio.create_task(worker.run(lambda: order.append("embed"), PRIORITY_EMBED))
        while worker.depth < 2:
            await asyncio.sleep(0.005)
        search = asyncio.create_task(worker.run(lambda: order.append("search"), PRIORITY_SEARCH))
        while worker.depth < 3:
            await asyncio.sleep(0.005)
        release.set()
        await asyncio.gather(blocker, embed, search)

    asyncio.run(main())
    assert order == ["search", "embed"]


def test_bound_refuses_at_once_then_recovers(worker: ModelWorker) -> None:
    release = threading.Event()

    async def main():
        jobs = [asyncio.create_task(worker.run(lambda: release.wait(30))) for _ in range(4)]
        while worker.depth < 4:
            await asyncio.sleep(0.005)
        with pytest.raises(Overloaded) as info:
            await worker.run(lambda: None)
        assert info.value.retry_after >= 1
        release.set()
        await asyncio.gather(*jobs)
        return await worker.run(lambda: "ok")

    assert asyncio.run(main()) == "ok"
    assert worker.rejected == 1


def test_a_job_that_waited_too_long_is_not_run() -> None:
    now = [100.0]
    w = ModelWorker(max_queue=4, queue_timeout=5.0, clock=lambda: now[0])
    release = threading.Event()
    ran: list[int] = []
    try:

        async def main():
            blocker = asyncio.create_task(w.run(lambda: release.wait(30)))
            while w.depth < 1:
                await asyncio.sleep(0.005)
            late = asyncio.create_task(w.run(lambda: ran.append(1)))
            while w.depth < 2:
                await asyncio.sleep(0.005)
            now[0] += 6.0  # the queued job has now waited longer than queue_timeout
            release.set()
            await blocker
            with pytest.raises(Overloaded, match="queue_timeout"):
                await late

        asyncio.run(main())
    finally:
        w.close()
    assert ran == []


def test_a_cancelled_request_is_skipped(worker: ModelWorker) -> None:
    release = threading.Event()
    ran: list[int] = []

    async def main():
        blocker = asyncio.create_task(worker.run(lambda: release.wait(30)))
        while worker.depth < 1:
            await asyncio.sleep(0.005)
        gone = asyncio.create_task(worker.run(lambda: ran.append(1)))
        while worker.depth < 2:
            await asyncio.sleep(0.005)
        gone.cancel()
        release.set()
        await blocker
        await worker.run(lambda: None)  # runs after the cancelled one was reached

    asyncio.run(main())
    assert ran == []
