#!/usr/bin/env python3
"""A kazoo Lock user for the interop tests (zookeeper_interop_test.cpp).

Takes kazoo's own Lock on PATH until SECONDS have passed, as a service
would (an ephemeral sequential node "<uuid>__lock__<seq>", a watch on the
contender just ahead, the node deleted on release). In each critical
section it logs "start" and "end" to the Redis list LOG (on the log server
at LOG_PORT) with its side, pid and CLOCK_MONOTONIC time in ns, and bumps
COUNTER there with a non-atomic GET and SET, so an overlap shows in the log
and in the count. SESSION_S is the ZooKeeper session timeout: a SIGKILLed
holder's node goes when its session expires.

usage: kazoo_lock_worker.py HOSTS PATH LOG_PORT LOG COUNTER SECONDS SESSION_S HOLD_MS
"""
import os
import random
import sys
import time

import redis
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout

from fleet_log import critical_section


def main():
    hosts, path, log_port, log, counter = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    seconds, session_s, hold_ms = float(sys.argv[6]), float(sys.argv[7]), int(sys.argv[8])
    r = redis.Redis(host="127.0.0.1", port=log_port)
    zk = KazooClient(hosts=hosts, timeout=session_s)
    zk.start(timeout=15)
    pid = os.getpid()
    end = time.monotonic() + seconds
    grants = 0
    while time.monotonic() < end:
        lock = zk.Lock(path, identifier="kazoo-%d" % pid)
        try:
            if not lock.acquire(timeout=max(1.0, end - time.monotonic() + 2)):
                continue
        except LockTimeout:  # how kazoo's acquire tells a wait that ran out
            continue
        grants += 1
        critical_section(r, log, counter, "kazoo", hold_ms)
        lock.release()
        time.sleep(random.uniform(0, 0.02))  # a service's pace between jobs
    zk.stop()
    zk.close()
    print("grants %d" % grants)
    return 0 if grants > 0 else 3


if __name__ == "__main__":
    sys.exit(main())
