#!/usr/bin/python3
"""Peer baseline: redis-py's Lock, driven by the workloads of the dlock benchmark.

Run it with Debian's interpreter, /usr/bin/python3 (Python 3.11 with Debian's
python3-redis, i.e. redis-py 4.3.4): a pyenv shim can shadow `python3` on PATH
and would not see that package.

    /usr/bin/python3 bench/peers/redispy_bench.py --port 6399 --workload W1 \
        --keys distinct --settings default --seconds 5 --out w1.json

Workloads, settings and output formats: see README.md beside this file.
All timestamps are time.monotonic_ns() (CLOCK_MONOTONIC on Linux), so W3 events
from every process (and from the other harnesses) share one clock.
"""

import argparse
import json
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time

LIBRARY = "redis-py"
KEY_PREFIX = "bench:redis-py:"
HOST = "127.0.0.1"  # nothing but loopback, by design

LEASE_S = 30            # Lock(timeout=30): the lease (PX 30000)
BLOCKING_TIMEOUT_S = 5  # Lock(blocking_timeout=5): give up after 5 s
SLEEP_S = {"default": 0.1, "tuned": 0.001}  # Lock(sleep=...) between tries

DEFAULT_SECONDS = {"W1": 5.0, "W2": 5.0, "W3": 10.0, "W3-nolock": 3.0}
WARMUP_PAIRS = 20       # W1/W2: untimed pairs first (script load, connection)
MAX_PAIRS = 50_000_000  # hard bound on any loop, besides the deadline


class BenchError(Exception):
    pass


def die(msg, code=2):
    print(f"redispy_bench: error: {msg}", file=sys.stderr)
    sys.exit(code)


try:
    import redis
except ImportError as exc:  # pragma: no cover - environment problem
    die(f"cannot import redis-py ({exc}); install Debian's package "
        "(apt-get install -y python3-redis) and run this script with /usr/bin/python3")


def now_ns():
    return time.monotonic_ns()


def connect(port):
    r = redis.Redis(host=HOST, port=port, socket_connect_timeout=2,
                    socket_timeout=BLOCKING_TIMEOUT_S + 10)
    try:
        r.ping()
    except redis.exceptions.RedisError as exc:
        die(f"cannot reach redis at {HOST}:{port}: {exc}")
    return r


def lock_kwargs(settings):
    return {"timeout": LEASE_S, "sleep": SLEEP_S[settings],
            "blocking_timeout": BLOCKING_TIMEOUT_S}


def delete_prefix(r, prefix):
    """Delete this library's keys (bounded SCAN), so each workload starts fresh."""
    batch, deleted = [], 0
    for n, key in enumerate(r.scan_iter(match=prefix + "*", count=1000)):
        if n >= 20_000_000:
            raise BenchError("too many keys under " + prefix)
        batch.append(key)
        if len(batch) >= 1000:
            deleted += r.delete(*batch)
            batch = []
    if batch:
        deleted += r.delete(*batch)
    return deleted


def percentile_us(sorted_ns, p):
    """Nearest-rank percentile of sorted ns values, in µs."""
    if not sorted_ns:
        return None
    rank = max(1, math.ceil(p / 100.0 * len(sorted_ns)))
    return round(sorted_ns[rank - 1] / 1000.0, 1)


def one_pair(r, name, kw):
    lk = r.lock(name, **kw)
    if not lk.acquire():
        raise BenchError(f"uncontended acquire of {name} gave up")
    lk.release()


# ---------------------------------------------------------------- W1 ----
def run_w1(r, args):
    kw = lock_kwargs(args.settings)
    base = KEY_PREFIX + "w1:"
    for i in range(WARMUP_PAIRS):
        one_pair(r, f"{base}warm:{i}", kw)
    lat = []
    same = base + "same"
    t_start = now_ns()
    deadline = t_start + int(args.seconds * 1e9)
    t1 = t_start
    for i in range(MAX_PAIRS):
        name = same if args.keys == "same" else f"{base}d:{i}"
        t0 = now_ns()
        lk = r.lock(name, **kw)
        if not lk.acquire():
            raise BenchError(f"uncontended acquire of {name} gave up")
        lk.release()
        t1 = now_ns()
        lat.append(t1 - t0)
        if t1 >= deadline:
            break
    return summarize_pairs(args, lat, (t1 - t_start) / 1e9)


# ---------------------------------------------------------------- W2 ----
def run_w2(r, args):
    kw = lock_kwargs(args.settings)
    base = KEY_PREFIX + "w2:"
    for i in range(WARMUP_PAIRS):
        one_pair(r, f"{base}warm:{i}", kw)
    n = args.tasks
    lats = [[] for _ in range(n)]
    ends = [0] * n
    errors = []
    span = {}

    def set_start():
        span["start"] = now_ns()
        span["deadline"] = span["start"] + int(args.seconds * 1e9)

    barrier = threading.Barrier(n, action=set_start, timeout=30)

    def task(t):
        try:
            barrier.wait()
            deadline = span["deadline"]
            mine = lats[t]
            for i in range(MAX_PAIRS):
                name = f"{base}t{t}:{i}"
                t0 = now_ns()
                lk = r.lock(name, **kw)  # all threads share r's connection pool
                if not lk.acquire():
                    raise BenchError(f"uncontended acquire of {name} gave up")
                lk.release()
                t1 = now_ns()
                mine.append(t1 - t0)
                if t1 >= deadline or errors:
                    break
            ends[t] = now_ns()
        except Exception as exc:  # reported by the main thread
            errors.append(f"task {t}: {exc!r}")
            barrier.abort()

    threads = [threading.Thread(target=task, args=(t,), daemon=True) for t in range(n)]
    for th in threads:
        th.start()
    limit = time.monotonic() + args.seconds + BLOCKING_TIMEOUT_S + 60
    for th in threads:
        th.join(max(0.0, limit - time.monotonic()))
        if th.is_alive():
            raise BenchError("W2 thread did not finish in time")
    if errors:
        raise BenchError("; ".join(errors[:3]))
    lat = [x for part in lats for x in part]
    res = summarize_pairs(args, lat, (max(ends) - span["start"]) / 1e9)
    res = {**{k: v for k, v in res.items() if k not in ("python_version", "lock_settings")},
           "tasks": n, **extra_fields(args)}
    return res


def summarize_pairs(args, lat, elapsed):
    lat.sort()
    res = {
        "library": LIBRARY, "settings": args.settings, "workload": args.workload,
        "pairs": len(lat), "seconds": round(elapsed, 3),
        "pairs_per_s": round(len(lat) / elapsed, 1) if elapsed > 0 else None,
        "p50_us": percentile_us(lat, 50), "p99_us": percentile_us(lat, 99),
        "version": redis.__version__,
    }
    if args.workload == "W1":
        res["keys"] = args.keys
    res.update(extra_fields(args))
    return res


def extra_fields(args):
    kw = lock_kwargs(args.settings)
    return {"python_version": sys.version.split()[0],
            "lock_settings": {"timeout_s": kw["timeout"], "sleep_s": kw["sleep"],
                              "blocking_timeout_s": kw["blocking_timeout"]}}


# ---------------------------------------------------------------- W3 ----
LOCK_KEY = KEY_PREFIX + "w3:lock"
CTR_KEY = KEY_PREFIX + "ctr"


def run_w3_child(args):
    """One contending process: own connection; waits for 'go' on stdin."""
    die_with_parent()
    r = connect(args.port)
    kw = lock_kwargs(args.settings)
    nolock = args.workload == "W3-nolock"
    events = []
    failures = 0
    print("ready", flush=True)
    line = sys.stdin.readline()
    if line.strip() != "go":
        sys.exit(3)  # parent went away before the start
    t_go = now_ns()
    deadline = t_go + int(args.seconds * 1e9)
    for _ in range(MAX_PAIRS):
        if now_ns() >= deadline:
            break
        if nolock:
            t_ac = t_ar = now_ns()
        else:
            lk = r.lock(LOCK_KEY, **kw)
            t_ac = now_ns()
            ok = lk.acquire()
            t_ar = now_ns()
            if not ok:
                failures += 1
                continue
        v = r.get(CTR_KEY)
        r.set(CTR_KEY, int(v or 0) + 1)
        if nolock:
            t_rc = t_rr = now_ns()
        else:
            t_rc = now_ns()
            lk.release()
            t_rr = now_ns()
        events.append((t_ac, t_ar, t_rc, t_rr))
    t_end = now_ns()
    pid = os.getpid()
    with open(args.events_part, "w") as f:
        for a, b, c, d in events:
            f.write(f'{{"pid": {pid}, "acq_call": {a}, "acq_ret": {b}, '
                    f'"rel_call": {c}, "rel_ret": {d}}}\n')
    print(json.dumps({"cs": len(events), "failures": failures,
                      "t_go": t_go, "t_end": t_end}), flush=True)


def die_with_parent():
    """Linux: get SIGTERM if the parent dies (prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not fatal: the child's loop is bounded by its deadline anyway
    if os.getppid() == 1:
        sys.exit(3)


def read_line(proc, deadline, what):
    """One stdout line of a child, or BenchError at the deadline."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BenchError(f"child {proc.pid} timed out ({what})")
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            line = proc.stdout.readline()
            if not line:
                raise BenchError(f"child {proc.pid} exited early ({what}), "
                                 f"exit code {proc.wait(5)}")
            return line


def run_w3(r, args):
    if not args.events:
        raise BenchError("--events FILE is required for W3 and W3-nolock")
    events_path = os.path.abspath(args.events)
    delete_prefix(r, KEY_PREFIX)
    r.set(CTR_KEY, 0)
    procs, parts = [], []
    try:
        for i in range(args.procs):
            part = f"{events_path}.part{i}"
            parts.append(part)
            cmd = [sys.executable, os.path.abspath(__file__), "--child",
                   "--port", str(args.port), "--workload", args.workload,
                   "--settings", args.settings, "--seconds", str(args.seconds),
                   "--events-part", part]
            procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, text=True))
        ready_by = time.monotonic() + 30
        for p in procs:
            if read_line(p, ready_by, "start").strip() != "ready":
                raise BenchError(f"child {p.pid} did not report ready")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        done_by = time.monotonic() + args.seconds + BLOCKING_TIMEOUT_S + 60
        summaries = [json.loads(read_line(p, done_by, "run")) for p in procs]
        for p in procs:
            if p.wait(max(1.0, done_by - time.monotonic())) != 0:
                raise BenchError(f"child {p.pid} exited with {p.returncode}")
        with open(events_path, "w") as out:
            for part in parts:
                with open(part) as f:
                    for line in f:
                        out.write(line)
    finally:
        stop_children(procs)
        for part in parts:
            try:
                os.unlink(part)
            except FileNotFoundError:
                pass
    counter = int(r.get(CTR_KEY) or 0)
    cs = sum(s["cs"] for s in summaries)
    elapsed = (max(s["t_end"] for s in summaries) - min(s["t_go"] for s in summaries)) / 1e9
    return {
        "library": LIBRARY, "settings": args.settings, "workload": args.workload,
        "procs": args.procs, "seconds": args.seconds, "elapsed_s": round(elapsed, 3),
        "critical_sections": cs,
        "cs_per_s": round(cs / elapsed, 1) if elapsed > 0 else None,
        "acquire_failures": sum(s["failures"] for s in summaries),
        "counter": counter, "counter_ok": counter == cs,
        "cs_per_proc": [s["cs"] for s in summaries],
        "events": args.events, "version": redis.__version__,
        **extra_fields(args),
    }


def stop_children(procs):
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        p.terminate()
    for p in alive:
        try:
            p.wait(3)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# -------------------------------------------------------------- main ----
def parse_args(argv):
    ap = argparse.ArgumentParser(description="redis-py Lock peer benchmark (run with /usr/bin/python3)")
    ap.add_argument("--port", type=int, required=True, help="redis on 127.0.0.1:PORT")
    ap.add_argument("--workload", required=True, choices=["W1", "W2", "W3", "W3-nolock"])
    ap.add_argument("--keys", default="distinct", choices=["distinct", "same"], help="W1 only")
    ap.add_argument("--settings", default="default", choices=["default", "tuned"])
    ap.add_argument("--seconds", type=float, default=None,
                    help="run time (default W1/W2 5, W3 10, W3-nolock 3)")
    ap.add_argument("--procs", type=int, default=8, help="W3: processes")
    ap.add_argument("--tasks", type=int, default=64, help="W2: threads")
    ap.add_argument("--out", help="write the JSON result here (also printed)")
    ap.add_argument("--events", help="W3: raw events, JSON lines")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--events-part", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.seconds is None:
        args.seconds = DEFAULT_SECONDS[args.workload]
    if not 0 < args.seconds <= 3600:
        ap.error("--seconds must be in (0, 3600]")
    if not 1 <= args.procs <= 256 or not 1 <= args.tasks <= 4096:
        ap.error("--procs must be in [1, 256] and --tasks in [1, 4096]")
    if not 0 < args.port < 65536:
        ap.error("--port out of range")
    return args


def main(argv):
    args = parse_args(argv)
    if args.child:
        run_w3_child(args)
        return 0
    # Turn SIGTERM into SystemExit so the finally blocks stop the children.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    r = connect(args.port)
    try:
        if args.workload in ("W1", "W2"):
            delete_prefix(r, KEY_PREFIX)
            res = run_w1(r, args) if args.workload == "W1" else run_w2(r, args)
        else:
            res = run_w3(r, args)
        delete_prefix(r, KEY_PREFIX)
    except BenchError as exc:
        die(str(exc), 1)
    except redis.exceptions.RedisError as exc:
        die(f"redis error: {exc!r}", 1)
    text = json.dumps(res)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
