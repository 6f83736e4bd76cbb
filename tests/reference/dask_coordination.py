"""Dask's answers to tests/golden/coordination.rhai, line for line: the
same Variable, Queue, Lock, Event, Semaphore and dataset calls, and tasks
that submit tasks, on a distributed Client, printed as brisk prints them
(JSON)."""

import json

from distributed import Client, Event, Lock, Queue, Semaphore, Variable, get_client, rejoin, secede, worker_client


def show(x):
    print(json.dumps(x))


def refused(f):
    try:
        f()
        show(False)
    except Exception:
        show(True)


def main():
    with Client(processes=False, n_workers=1, threads_per_worker=4, dashboard_address=None) as c:
        v = Variable("threshold")
        v.set(0.5)
        show(c.submit(lambda x: x > Variable("threshold").get(), 0.7).result())

        def produce(n):
            q = Queue("work")
            for i in range(n):
                q.put(i * i)
            return n

        q = Queue("work")
        show(c.submit(produce, 3).result())
        show(q.get())
        show(q.get(batch=2))
        show(q.qsize())
        refused(lambda: q.get(timeout=0.1))

        lock = Lock("file")
        show(lock.acquire())
        show(c.submit(lambda: Lock("file").acquire(timeout=0.05)).result())
        show(lock.locked())
        lock.release()
        show(lock.locked())
        refused(lambda: Lock("file").release())

        e = Event("ready")
        show(e.is_set())
        f = c.submit(lambda: Event("ready").wait(timeout=10))
        e.set()
        show(f.result())
        show(e.wait(timeout=0.1))
        e.clear()
        show(e.wait(timeout=0.1))

        s = Semaphore(max_leases=2, name="db")
        show(s.acquire())
        show(s.acquire())
        show(s.acquire(timeout=0.1))
        show(s.get_value())
        s.release()
        show(s.get_value())

        b = Queue("bounded", maxsize=1)
        b.put(1)
        refused(lambda: b.put(2, timeout=0.1))
        show(b.get())

        c.publish_dataset(squares=[1, 4, 9])
        show(c.get_dataset("squares"))
        refused(lambda: c.publish_dataset(squares=[1]))
        show(list(c.list_datasets()))
        c.unpublish_dataset("squares")
        show(list(c.list_datasets()))
        refused(lambda: c.get_dataset("squares"))

        def put(i):
            Queue("jobs").put(i * 10)
            return i

        def consume():
            q = Queue("jobs")
            return sum(q.get(timeout=5) for _ in range(4))

        producers = [c.submit(put, i) for i in range(4)]
        show(c.submit(consume).result())
        c.gather(producers)

        show(c.submit(fib, 10).result())
        show(c.submit(fib2, 8).result())
        show(c.submit(lambda: get_client().submit(lambda x: x * 3, 5).result()).result())


def fib(n):
    if n < 2:
        return n
    with worker_client() as c:
        a = c.submit(fib, n - 1)
        b = c.submit(fib, n - 2)
        return a.result() + b.result()


def fib2(n):
    if n < 2:
        return n
    c = get_client()
    futures = c.map(fib2, [n - 1, n - 2])
    secede()
    total = sum(c.gather(futures))
    rejoin()
    return total


if __name__ == "__main__":
    main()
