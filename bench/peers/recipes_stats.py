#!/usr/bin/python3
"""The recipes' figures from raw events, computed as dlock-recipes-bench
computes them (bench/recipes_bench.cpp), for the peers' runs.

An events file has one line per critical section or pair:
    KIND ACQ_CALL ACQ_RET REL_CALL PROC
KIND is x (exclusive lock), s (semaphore permit), r (read) or w (write);
times are CLOCK_MONOTONIC nanoseconds. As a program:
    recipes_stats.py --events FILE --workload W3|SEM|RW --seconds S [--counter N] [--set k=v ...]
prints one JSON result (the fields of dlock-recipes-bench's)."""
import argparse
import json
import math


def pct(values, p):
    """Nearest-rank percentile."""
    if not values:
        return 0
    v = sorted(values)
    return v[min(len(v), max(1, math.ceil(p / 100.0 * len(v)))) - 1]


def load(path):
    evs = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 5:
                evs.append((parts[0], int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])))
    evs.sort(key=lambda e: e[2])
    return evs


def max_concurrent(evs, kinds):
    pts = []
    for k, _, got, rel, _ in evs:
        if k in kinds:
            pts += [(got, 1), (rel, -1)]
    pts.sort()
    cur = best = 0
    for _, d in pts:
        cur += d
        best = max(best, cur)
    return best


def waits(r, prefix, evs, kinds):
    w = [(got - call) / 1000.0 for k, call, got, _, _ in evs if k in kinds]
    r[prefix + "wait_p50_us"] = pct(w, 50)
    r[prefix + "wait_p99_us"] = pct(w, 99)
    r[prefix + "wait_max_ms"] = max(w) / 1000.0 if w else 0


def per_proc(r, evs):
    n = {}
    for e in evs:
        n[e[4]] = n.get(e[4], 0) + 1
    r["per_proc_min"] = min(n.values()) if n else 0
    r["per_proc_max"] = max(n.values()) if n else 0


def stats(evs, workload, seconds, counter=None):
    r = {"workload": workload, "seconds": seconds}
    if workload == "W3":
        allh, change, same = [], [], 0
        for a, b in zip(evs, evs[1:]):
            h = (b[2] - a[3]) / 1000.0
            allh.append(h)
            if a[4] == b[4]:
                same += 1
            else:
                change.append(h)
        r.update({"critical_sections": len(evs), "cs_per_s": len(evs) / seconds,
                  "same_holder_fraction": same / max(1, len(evs) - 1),
                  "handoff_p50_us": pct(allh, 50), "handoff_p99_us": pct(allh, 99),
                  "change_p50_us": pct(change, 50), "change_p99_us": pct(change, 99), "changes": len(change)})
        waits(r, "", evs, "x")
        if counter is not None:
            r["lost_updates"] = len(evs) - counter
        r["overlaps"] = max(0, max_concurrent(evs, "x") - 1)
    elif workload == "SEM":
        r.update({"pairs": len(evs), "pairs_per_s": len(evs) / seconds, "max_holders": max_concurrent(evs, "s")})
        waits(r, "", evs, "s")
    else:
        reads = sum(1 for e in evs if e[0] == "r")
        writes = len(evs) - reads
        r.update({"ops": len(evs), "ops_per_s": len(evs) / seconds, "reads_per_s": reads / seconds,
                  "writes_per_s": writes / seconds, "max_readers": max_concurrent(evs, "r")})
        waits(r, "read_", evs, "r")
        waits(r, "write_", evs, "w")
        ws = [e for e in evs if e[0] == "w"]
        r["writer_overlaps"] = sum(1 for w in ws for e in evs if e is not w and e[2] < w[3] and w[2] < e[3])
        if counter is not None:
            r["lost_writes"] = writes - counter
    per_proc(r, evs)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--counter", type=int)
    ap.add_argument("--set", action="append", default=[], help="k=v added to the result (v as JSON if it parses)")
    a = ap.parse_args()
    r = stats(load(a.events), a.workload, a.seconds, a.counter)
    for kv in a.set:
        k, v = kv.split("=", 1)
        try:
            r[k] = json.loads(v)
        except ValueError:
            r[k] = v
    print(json.dumps(r))


if __name__ == "__main__":
    main()
