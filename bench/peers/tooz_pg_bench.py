#!/usr/bin/python3
"""W1 for python3-tooz's PostgreSQL lock (session advisory locks): one
coordinator, sequential acquire+release pairs on distinct names; one JSON
line on stdout (pairs_per_s, p50_us)."""
import argparse
import json
import time

from tooz import coordination


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--seconds", type=float, default=3)
    a = ap.parse_args()
    coord = coordination.get_coordinator(a.url, b"bench")
    coord.start()
    lat = []
    end = time.monotonic() + a.seconds
    start = time.monotonic()
    i = 0
    while time.monotonic() < end:
        t0 = time.perf_counter()
        lock = coord.get_lock(b"w1:%d" % i)
        if not lock.acquire(blocking=False):
            raise SystemExit("tooz: not acquired")
        lock.release()
        lat.append((time.perf_counter() - t0) * 1e6)
        i += 1
    secs = time.monotonic() - start
    coord.stop()
    lat.sort()
    print(json.dumps({"library": "tooz", "pairs_per_s": i / secs, "p50_us": lat[len(lat) // 2] if lat else 0}))


if __name__ == "__main__":
    main()
