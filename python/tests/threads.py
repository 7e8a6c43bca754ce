"""Running a test's work in several Python threads at once."""
import threading
import time

import ropeattn


def run_in_threads(work, n=8):
    """Runs work(i, context) in n threads at once, context a
    ropeattn.Context(threads=2) for odd i (closed afterwards) and None for
    even i; returns what went wrong: the i of each work that returned False,
    and each exception raised (which a thread would otherwise only print)."""
    errors = []

    def run(i):
        ctx = ropeattn.Context(threads=2) if i % 2 else None
        try:
            if work(i, ctx) is False:
                errors.append(i)
        except Exception as e:  # noqa: BLE001 (returned to the test)
            errors.append(repr(e))
        finally:
            if ctx:
                ctx.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def wakeups_during(target):
    """Runs target() in a thread and counts how often this thread woke from
    a 1 ms sleep meanwhile: about one a millisecond while target has
    released the GIL, one or two in all while it holds it."""
    worker = threading.Thread(target=target)
    wakeups = 0
    worker.start()
    while worker.is_alive():
        time.sleep(0.001)
        wakeups += 1
    worker.join()
    return wakeups
