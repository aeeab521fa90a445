#!/usr/bin/python3
"""W1 for python3-kazoo's Lock recipe (the ephemeral-sequential queue):
one client, sequential acquire+release pairs on distinct names; one JSON
line on stdout (pairs_per_s, p50_us). kazoo's defaults: the threading
handler, a new Lock object per name (as a service locking varying names
does)."""
import argparse
import json
import logging
import time

from kazoo.client import KazooClient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", required=True)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--root", default="/kazoo-bench")
    a = ap.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    zk = KazooClient(hosts=a.hosts)
    zk.start()
    lat = []
    end = time.monotonic() + a.seconds
    start = time.monotonic()
    i = 0
    while time.monotonic() < end:
        t0 = time.perf_counter()
        lock = zk.Lock("%s/w1:%d" % (a.root, i), "bench")
        if not lock.acquire(blocking=False):
            raise SystemExit("kazoo: not acquired")
        lock.release()
        lat.append((time.perf_counter() - t0) * 1e6)
        i += 1
    secs = time.monotonic() - start
    zk.stop()
    zk.close()
    lat.sort()
    print(json.dumps({"library": "kazoo", "pairs_per_s": i / secs, "p50_us": lat[len(lat) // 2] if lat else 0}))


if __name__ == "__main__":
    main()
