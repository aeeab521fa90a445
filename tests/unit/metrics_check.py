#!/usr/bin/env python3
"""Reads the exposition metrics_session prints with the Prometheus client
library's parser (python3-prometheus-client), checks it against the text
format 0.0.4 grammar (the library's parser is lax: it takes samples outside
their family as untyped ones), and checks the values the session's steps
must have produced. If promtool is on PATH, `promtool check metrics` must
accept it too.

Usage: metrics_check.py PATH/TO/dlock_metrics_session
Exit status: 0 passed, 1 failed, 77 skipped (no SQLite in the build).
"""
import math
import re
import shutil
import subprocess
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    sys.exit("prometheus_client is missing: apt-get install python3-prometheus-client "
             "(scripts/lib.sh lists it)")

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLOAT = re.compile(r"[+-]?(Inf|NaN|[0-9]*\.?[0-9]+([eE][+-]?[0-9]+)?)")

FAMILIES = {
    "dlock_grants_total": "counter",
    "dlock_late_grants_total": "counter",
    "dlock_busy_answers_total": "counter",
    "dlock_waits_total": "counter",
    "dlock_wait_seconds": "histogram",
    "dlock_wakeups_total": "counter",
    "dlock_leases_held": "gauge",
    "dlock_leases_lost_total": "counter",
    "dlock_renewals_total": "counter",
    "dlock_renewal_failures_total": "counter",
    "dlock_renewal_round_trips_total": "counter",
    "dlock_outcome_unknown_total": "counter",
    "dlock_release_failures_total": "counter",
    "dlock_commands_sent_total": "counter",
    "dlock_reconnects_total": "counter",
}
LOCK_FAMILIES = {
    "dlock_lock_held": "gauge",
    "dlock_lock_fence": "gauge",
    "dlock_lock_remaining_seconds": "gauge",
    "dlock_lock_holders": "gauge",
    "dlock_lock_waiters": "gauge",
}
SERVICE = 'metrics "check"\n'
LOCK = 'job "1"\\'


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def parse_labels(text, line):
    """The label pairs between the braces; raises Failed on bad syntax."""
    labels, i = [], 0
    while i < len(text):
        m = LABEL.match(text, i)
        check(m, f"bad label name at {text[i:]!r} in {line!r}")
        name, i = m.group(0), m.end()
        check(text[i:i + 2] == '="', f"expected =\" after {name} in {line!r}")
        i += 2
        value = []
        while True:
            check(i < len(text), f"unterminated value of {name} in {line!r}")
            c = text[i]
            if c == '"':
                i += 1
                break
            if c == "\\":
                nxt = text[i + 1:i + 2]
                check(nxt in ('\\', '"', "n"), f"bad escape \\{nxt} in {line!r}")
                value.append("\n" if nxt == "n" else nxt)
                i += 2
                continue
            check(c != "\n", f"raw newline in {line!r}")
            value.append(c)
            i += 1
        labels.append((name, "".join(value)))
        if i < len(text):
            check(text[i] == ",", f"expected , at {text[i:]!r} in {line!r}")
            i += 1
    names = [n for n, _ in labels]
    check(len(names) == len(set(names)), f"a label given twice in {line!r}")
    return labels


def check_grammar(text, expected_families):
    """The text format 0.0.4, strictly; returns {(name, labels): value}."""
    check(text.endswith("\n"), "the exposition does not end with a newline")
    families, samples = {}, {}
    family = typ = help_of = None
    for line in text[:-1].split("\n"):
        check(line != "", "a blank line")
        if line.startswith("# HELP "):
            parts = line.split(" ", 3)
            check(len(parts) == 4 and NAME.fullmatch(parts[2]), f"bad HELP line {line!r}")
            check(re.fullmatch(r"([^\\]|\\\\|\\n)*", parts[3]), f"bad escape in {line!r}")
            help_of = parts[2]
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            check(len(parts) == 4 and NAME.fullmatch(parts[2]), f"bad TYPE line {line!r}")
            family, typ = parts[2], parts[3]
            check(typ in ("counter", "gauge", "histogram"), f"unexpected type in {line!r}")
            check(help_of == family, f"# HELP of {family} is not right before its # TYPE")
            check(family not in families, f"family {family} declared twice")
            families[family] = typ
            continue
        check(not line.startswith("#"), f"stray comment {line!r}")
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        check(m, f"bad sample line {line!r}")
        name, labels, value = m.group(1), parse_labels(m.group(2) or "", line), m.group(3)
        check(FLOAT.fullmatch(value), f"bad value in {line!r}")
        check(family is not None, f"sample before any # TYPE: {line!r}")
        if typ == "histogram":
            check(name in (family + "_bucket", family + "_sum", family + "_count"),
                  f"{line!r} outside its family {family}")
            check((name == family + "_bucket") == any(n == "le" for n, _ in labels),
                  f"le on a non-bucket, or a bucket without le: {line!r}")
        else:
            check(name == family, f"{line!r} outside its family {family}")
        if typ == "counter":
            check(name.endswith("_total"), f"counter {name} does not end in _total")
        key = (name, tuple(sorted(labels)))
        check(key not in samples, f"series given twice: {line!r}")
        samples[key] = float(value)
    check(families == expected_families,
          f"families {sorted(families.items())} != expected {sorted(expected_families.items())}")
    # Histograms: cumulative buckets, le increasing up to +Inf, which is _count.
    for fam, t in families.items():
        if t != "histogram":
            continue
        series = {}
        for (name, labels), value in samples.items():
            if not name.startswith(fam + "_"):
                continue
            rest = tuple(l for l in labels if l[0] != "le")
            series.setdefault(rest, {})
            if name.endswith("_bucket"):
                series[rest].setdefault("buckets", []).append((float(dict(labels)["le"]), value))
            else:
                series[rest][name[len(fam):]] = value
        for rest, parts in series.items():
            buckets = parts.get("buckets", [])
            check(buckets and math.isinf(buckets[-1][0]), f"{fam}{rest}: no le=\"+Inf\" bucket")
            les = [le for le, _ in buckets]
            check(les == sorted(les) and len(set(les)) == len(les), f"{fam}{rest}: le not increasing")
            counts = [c for _, c in buckets]
            check(counts == sorted(counts), f"{fam}{rest}: buckets not cumulative: {counts}")
            check(parts.get("_count") == counts[-1], f"{fam}{rest}: _count != the +Inf bucket")
            check("_sum" in parts, f"{fam}{rest}: no _sum")
    return samples


def parsed(text):
    """{family: Metric} as the Prometheus client library reads it."""
    out = {}
    for metric in text_string_to_metric_families(text):
        check(metric.type != "untyped", f"the parser found an untyped family: {metric.name}")
        check(metric.name not in out, f"the parser found {metric.name} twice")
        out[metric.name] = metric
    return out


def values(metrics, sample_name, **labels):
    """The values of the samples named so whose labels include `labels`."""
    fam = sample_name
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        if fam.endswith(suffix) and fam[:-len(suffix)] in metrics:
            fam = fam[:-len(suffix)]
    check(fam in metrics, f"no family for {sample_name}")
    return [s.value for s in metrics[fam].samples
            if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items())]


def one(metrics, sample_name, **labels):
    found = values(metrics, sample_name, **labels)
    check(len(found) == 1, f"{sample_name}{labels}: {len(found)} samples")
    return found[0]


def check_client(metrics, **who):
    """The session's waiting client (see metrics_session.cpp)."""
    for fam in FAMILIES:
        short = fam[:-len("_total")] if FAMILIES[fam] == "counter" else fam
        for s in metrics[short].samples:
            check(s.labels.get("backend") == "sqlite", f"{s.name}: backend label {s.labels}")
            check(s.labels.get("service") == SERVICE, f"{s.name}: service label {s.labels!r}")
    got = lambda name, **l: one(metrics, name, **who, **l)
    check(got("dlock_grants_total") == 2, "grants")
    check(got("dlock_busy_answers_total") >= 3, "busy answers")
    check(got("dlock_waits_total", outcome="timeout") == 1, "waits timed out")
    check(got("dlock_waits_total", outcome="granted") == 1, "waits granted")
    check(got("dlock_waits_total", outcome="error") == 0, "waits failed")
    check(got("dlock_wait_seconds_count") == 2, "wait histogram count")
    check(got("dlock_wait_seconds_bucket", le="+Inf") == 2, "wait histogram +Inf")
    check(got("dlock_wait_seconds_sum") >= 0.1, "the timed-out wait took 100 ms")
    check(got("dlock_leases_lost_total", reason="expired") == 1, "the fixed lease's loss")
    for reason in ("taken", "unreachable", "wrong_type"):
        check(got("dlock_leases_lost_total", reason=reason) == 0, f"losses: {reason}")
    check(got("dlock_renewals_total") >= 2, "renewals")
    check(got("dlock_renewal_failures_total") == 0, "renewal failures")
    check(got("dlock_outcome_unknown_total") == 0, "outcomes unknown")
    check(got("dlock_leases_held") == 0, "leases held at the end")
    check(got("dlock_commands_sent_total") > 0, "commands sent")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    session = sys.argv[1]
    promtool = shutil.which("promtool")
    for mode in ("client", "clients", "locks"):
        run = subprocess.run([session, mode], capture_output=True, text=True, timeout=120)
        if run.returncode == 77:
            print("skipped: the build has no SQLite")
            return 77
        check(run.returncode == 0, f"{session} {mode} exited {run.returncode}: {run.stderr}")
        text = run.stdout
        samples = check_grammar(text, LOCK_FAMILIES if mode == "locks" else FAMILIES)
        metrics = parsed(text)
        if mode == "client":
            check_client(metrics)
        elif mode == "clients":
            check_client(metrics, client="waiter")
            check(one(metrics, "dlock_grants_total", client="holder") == 2, "holder grants")
            check(one(metrics, "dlock_leases_held", client="holder") == 1, "holder leases held")
            check(one(metrics, "dlock_wait_seconds_count", client="holder") == 0, "the holder never waited")
        else:
            check(one(metrics, "dlock_lock_held", lock=LOCK) == 1, "held lock")
            check(one(metrics, "dlock_lock_held", lock="free") == 0, "free lock")
            check(one(metrics, "dlock_lock_fence", lock=LOCK) > 0, "fence")
            check(one(metrics, "dlock_lock_remaining_seconds", lock=LOCK) > 0, "remaining lease")
            check(one(metrics, "dlock_lock_remaining_seconds", lock="free") == 0, "free: no lease")
            check(one(metrics, "dlock_lock_waiters", lock=LOCK) == 0, "SQLite counts waiters: none here")
        if promtool:
            lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
            check(lint.returncode == 0, f"promtool check metrics ({mode}): {lint.stdout}{lint.stderr}")
        print(f"{mode}: {len(samples)} samples in {len(metrics)} families, parsed and as expected")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failed as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
