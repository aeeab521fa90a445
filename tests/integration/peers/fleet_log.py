"""The critical section of the interop tests' Python workers
(redispy_lock_worker.py, kazoo_lock_worker.py), as interop_fleet.cpp's
dlock worker runs it: "start" and "end" logged to the Redis list LOG with
the side, pid and CLOCK_MONOTONIC time in ns, and COUNTER bumped with a
non-atomic GET and SET between them, so an overlap shows in the log and in
the count."""
import os
import random
import time


def critical_section(r, log, counter, side, hold_ms):
    pid = os.getpid()
    r.rpush(log, "start %s %d %d" % (side, pid, time.monotonic_ns()))
    v = int(r.get(counter) or 0)
    time.sleep(random.uniform(0, hold_ms / 1000.0))
    r.set(counter, v + 1)
    r.rpush(log, "end %s %d %d" % (side, pid, time.monotonic_ns()))
