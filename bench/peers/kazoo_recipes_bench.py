#!/usr/bin/python3
"""The recipes' workloads (bench/recipes_bench.cpp) with python3-kazoo's
recipes, each process with its own KazooClient (the threading handler,
kazoo's defaults):

    W3   kazoo's Lock (its queue is fair: FIFO), critical section = a counter in a file
    SEM  kazoo's Semaphore(max_leases=--permits), {acquire; read a file; release}
    RW   kazoo's ReadLock with probability --readers (reading the file), else
         its WriteLock (bumping the counter); an acquire gives up after
         --timeout and is counted in acquire_failures (kazoo 2.8's read-write
         lock can deadlock a reader and a writer: python-zk/kazoo#649)

--procs processes start together once all are connected; one JSON result
(recipes_stats.py's fields) on stdout and in --out."""
import argparse
import json
import logging
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recipes_stats  # noqa: E402


def read_counter(path):
    try:
        with open(path) as f:
            return int(f.read() or 0)
    except FileNotFoundError:
        return 0


def worker(k, a, root, counter, barrier, out):
    from kazoo.client import KazooClient
    from kazoo.exceptions import LockTimeout
    logging.basicConfig(level=logging.CRITICAL)
    zk = KazooClient(hosts=a.hosts)
    zk.start()
    ident = "p%d" % k
    if a.workload == "W3":
        lock = zk.Lock(root + "/w3", ident)
    elif a.workload == "SEM":
        sem = zk.Semaphore(root + "/sem", ident, max_leases=a.permits)
    else:
        rd, wr = zk.ReadLock(root + "/rw", ident), zk.WriteLock(root + "/rw", ident)
    rng = random.Random(os.getpid())
    evs = []
    failures = 0
    barrier.wait()
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        if a.workload == "W3":
            call = time.monotonic_ns()
            lock.acquire()
            got = time.monotonic_ns()
            v = read_counter(counter)
            with open(counter, "w") as f:
                f.write(str(v + 1))
            rel = time.monotonic_ns()
            lock.release()
            evs.append(("x", call, got, rel, k))
        elif a.workload == "SEM":
            call = time.monotonic_ns()
            sem.acquire()
            got = time.monotonic_ns()
            read_counter(counter)
            rel = time.monotonic_ns()
            sem.release()
            evs.append(("s", call, got, rel, k))
        else:
            reader = rng.random() < a.readers
            lk = rd if reader else wr
            call = time.monotonic_ns()
            try:
                lk.acquire(timeout=a.timeout)
            except LockTimeout:
                # kazoo 2.8's read-write lock can deadlock a reader and a
                # writer on each other (python-zk/kazoo#649): counted, and
                # the next operation starts afresh.
                failures += 1
                continue
            got = time.monotonic_ns()
            v = read_counter(counter)
            if not reader:
                with open(counter, "w") as f:
                    f.write(str(v + 1))
            rel = time.monotonic_ns()
            lk.release()
            evs.append(("r" if reader else "w", call, got, rel, k))
    zk.stop()
    zk.close()
    with open(out + ".failures", "w") as f:
        f.write(str(failures))
    with open(out, "w") as f:
        for e in evs:
            f.write("%s %d %d %d %d\n" % e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", required=True)
    ap.add_argument("--workload", required=True, choices=["W3", "SEM", "RW"])
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--permits", type=int, default=3)
    ap.add_argument("--readers", type=float, default=0.9)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--timeout", type=float, default=2.0, help="RW: an acquire gives up after this long")
    ap.add_argument("--out")
    a = ap.parse_args()
    root = "/kazoo-recipes-%d" % os.getpid()
    with tempfile.TemporaryDirectory(prefix="kazoo-recipes-") as d:
        counter = os.path.join(d, "counter")
        ctx = mp.get_context("fork")
        barrier = ctx.Barrier(a.procs)
        ps = [ctx.Process(target=worker, args=(k, a, root, counter, barrier, os.path.join(d, "ev.%d" % k)))
              for k in range(a.procs)]
        for p in ps:
            p.start()
        for p in ps:
            p.join(a.seconds + 120)
        if any(p.exitcode != 0 for p in ps):
            for p in ps:
                if p.is_alive():
                    p.kill()
            raise SystemExit("kazoo_recipes_bench: a worker failed")
        failures = sum(int(open(os.path.join(d, "ev.%d.failures" % k)).read()) for k in range(a.procs))
        with open(os.path.join(d, "events"), "w") as f:
            for k in range(a.procs):
                f.write(open(os.path.join(d, "ev.%d" % k)).read())
        r = recipes_stats.stats(recipes_stats.load(os.path.join(d, "events")), a.workload, a.seconds,
                                read_counter(counter) if a.workload != "SEM" else None)
    import kazoo.version
    r.update({"library": "kazoo", "backend": "zk", "procs": a.procs, "version": kazoo.version.__version__,
              "acquire_failures": failures})
    if a.workload == "SEM":
        r["permits"] = a.permits
    if a.workload == "RW":
        r["readers_fraction"] = a.readers
    if a.workload == "W3":
        r["fair"] = True
    line = json.dumps(r)
    if a.out:
        with open(a.out, "w") as f:
            f.write(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
