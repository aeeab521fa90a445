#!/usr/bin/python3
"""W1 for python-etcd3's Lock (Debian 12's python3-etcd3, 0.12, over
Debian's python3-grpcio and python3-protobuf): one client, sequential
acquire+release pairs on distinct names ("w1:<i>"), for --seconds, --reps
times; one JSON line on stdout (pairs_per_s and p50_us, the medians over
the reps, and each rep's), and the same in --out if given.

A cost comparison only: python-etcd3's Lock has its own single-key layout,
`/locks/<name>`. acquire() grants a new lease (ttl) and puts the key under
it in a transaction that succeeds only if the key does not exist (create
revision 0); release() deletes the key in a transaction if its value is
still the lock's uuid. It does not revoke the lease (that expires after
ttl). So it does NOT share locks with `etcdctl lock` or dlock (whose keys
are <prefix>/<name>/<lease> and a line by create revision): the same name
taken by both is two different locks. A pair is three round trips (lease
grant, lock transaction, release transaction).

The leases the timed pairs leave behind are revoked after each rep's
timing ends (untimed), so that they do not expire under whatever runs
next on the same member. With --server-pid, the etcd member's CPU time
(utime + stime from /proc/PID/stat) over the timed pairs, per pair.

Run it as /usr/bin/python3 (a pyenv shim on PATH would not see Debian's
packages):

    /usr/bin/python3 bench/peers/etcd3_bench.py --port P --seconds 3 --reps 3
"""
import argparse
import json
import os
import statistics
import time

import etcd3

TTL_S = 10


def cpu_ticks(pid):
    """utime + stime of pid, in clock ticks (fields 14 and 15 of stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def one_rep(client, seconds, first, server_pid):
    lat = []
    leases = []
    i = first
    c0 = cpu_ticks(server_pid) if server_pid else 0
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        lock = client.lock("w1:%d" % i, ttl=TTL_S)
        if not lock.acquire(timeout=0):
            raise SystemExit("python-etcd3: w1:%d not acquired" % i)
        if not lock.release():
            raise SystemExit("python-etcd3: w1:%d not released" % i)
        lat.append((time.perf_counter() - t0) * 1e6)
        leases.append(lock.lease)
        i += 1
    secs = time.monotonic() - start
    c1 = cpu_ticks(server_pid) if server_pid else 0
    for lease in leases:  # untimed: what the library leaves to expire
        lease.revoke()
    lat.sort()
    pairs = len(lat)
    res = {"pairs": pairs, "seconds": secs, "pairs_per_s": pairs / secs,
           "p50_us": lat[pairs // 2] if lat else 0}
    if server_pid and pairs:
        res["server_cpu_us_per_pair"] = (c1 - c0) * 1e6 / os.sysconf("SC_CLK_TCK") / pairs
    return res, i


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--server-pid", type=int, default=0, help="the etcd member, for its CPU per pair")
    ap.add_argument("--out", help="write the JSON result there too")
    a = ap.parse_args()
    client = etcd3.client(host=a.host, port=a.port)
    # Untimed warm-up: the channel's connection, the modules' first calls.
    for k in range(20):
        lock = client.lock("w1-warmup:%d" % k, ttl=TTL_S)
        lock.acquire(timeout=0)
        lock.release()
        lock.lease.revoke()
    reps = []
    nxt = 0
    for _ in range(a.reps):
        r, nxt = one_rep(client, a.seconds, nxt, a.server_pid)
        reps.append(r)
    client.close()
    out = {"library": "python-etcd3", "version": getattr(etcd3, "__version__", ""),
           "pairs_per_s": statistics.median(r["pairs_per_s"] for r in reps),
           "p50_us": statistics.median(r["p50_us"] for r in reps), "reps": reps}
    if a.server_pid:
        out["server_cpu_us_per_pair"] = statistics.median(r["server_cpu_us_per_pair"] for r in reps)
    text = json.dumps(out)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
