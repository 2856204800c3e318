"""The asyncio forms of the follower's futures and subscriptions (issue 51): the event
loop is never blocked - the follower's thread waits, the loop is told through
``asyncio.wrap_future`` and ``loop.call_soon_threadsafe``; a submission runs in the
loop's default executor.  No ``asyncio.TaskGroup``: Python 3.9 stays supported."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Callable, Dict, List, TypeVar, Union

from ..model import JobStatus
from .futures import Follower, JobFuture, Subscriber

T = TypeVar("T")


async def off_loop(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` in the running loop's default executor."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(call, *args, **kwargs))


async def wait_one(follower: Follower, future: JobFuture) -> JobStatus:
    """The future's status, awaited; a cancelled await stops following it."""
    return (await wait_many(follower, [future]))[future.job_id]


async def wait_many(follower: Follower, futures: List[JobFuture]) -> Dict[str, JobStatus]:
    """Every future's status by job id (the first error raised, as ``wait_all`` would)."""
    try:
        done = await asyncio.gather(*(asyncio.wrap_future(future) for future in futures))
    finally:
        for future in futures:
            if not future.done():  # the await was cancelled, or another job failed
                follower.drop(future)
    return {status.job_id: status for status in done}


#: what the stream's queue carries: a change, the error that ends it, or its end
_Item = Union[JobStatus, BaseException, None]


class _Stream(Subscriber):
    """Hands each change to the loop's queue, from the follower's thread, in order."""

    def __init__(self, job_ids: List[str], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(job_ids)
        self.loop = loop
        self.queue: asyncio.Queue[_Item] = asyncio.Queue()

    def _put(self, item: _Item) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody iterates any more
            self.stopped = True

    def changed(self, status: JobStatus) -> None:
        self._put(status)

    def failed(self, job_id: str, error: BaseException) -> None:
        self._put(error)

    def finished(self) -> None:
        self._put(None)


async def changes(follower: Follower, job_ids: List[str]) -> AsyncIterator[JobStatus]:
    """Each state change of ``job_ids``, once and in order per job, until all ended; the
    first error a job's wait raises ends the iteration (raised)."""
    if not job_ids:
        return
    stream = _Stream(job_ids, asyncio.get_running_loop())
    follower.add([stream])
    try:
        while True:
            item = await stream.queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        follower.remove(stream)
