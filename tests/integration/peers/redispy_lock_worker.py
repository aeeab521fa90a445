#!/usr/bin/env python3
"""A redis-py Lock user for the interop tests (interop_test.cpp).

Takes redis-py's Lock on NAME until SECONDS have passed, as a service would
(its defaults: SET NX PX, a 0.1 s poll, compare-and-delete on release). In
each critical section it logs "start" and "end" to the Redis list LOG with
its side, pid and CLOCK_MONOTONIC time in ns, and bumps COUNTER with a
non-atomic GET and SET, so an overlap shows in the log and in the count.

usage: redispy_lock_worker.py PORT NAME LOG COUNTER SECONDS TTL_MS HOLD_MS
"""
import random
import sys
import time

import redis
from fleet_log import critical_section


def main():
    port, name, log, counter = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    seconds, ttl_ms, hold_ms = float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    r = redis.Redis(host="127.0.0.1", port=port)
    end = time.monotonic() + seconds
    grants = 0
    while time.monotonic() < end:
        lock = r.lock(name, timeout=ttl_ms / 1000.0, blocking_timeout=max(1.0, end - time.monotonic() + 2))
        if not lock.acquire():
            continue
        grants += 1
        critical_section(r, log, counter, "redis-py", hold_ms)
        lock.release()  # raises if the lease had lapsed: a failed run
        time.sleep(random.uniform(0, 0.02))  # a service's pace between jobs
    # A process left without a grant is redis-py's 0.1 s poll losing to
    # waiters that are woken: the test counts grants per side.
    print("grants %d" % grants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
