#!/usr/bin/env python3
"""Aggregates dlock-torture suite.json files into the Markdown tables of
RELIABILITY.md: one row per scenario x strategy, summed over runs (seeds).

usage: aggregate.py SUITE.json [SUITE.json...]
"""
import json
import sys
from collections import OrderedDict


def main(paths):
    # A run repeated (same scenario, strategy and seed) in a later file
    # replaces the earlier one.
    latest = OrderedDict()
    for path in paths:
        with open(path) as f:
            for r in json.load(f)["runs"]:
                latest[(r["scenario"], r["strategy"], r["setup"].get("seed"))] = r
    rows = OrderedDict()
    for r in latest.values():
        key = (r["scenario"], r["strategy"])
        a = rows.setdefault(key, dict(runs=0, passed=0, ops=0, grants=0, faults=0, ov_e=0, ov_u=0, ov_max=0,
                                      st_f=0, st_u=0, acked=0, lost=0, fence=0, foreign=0, rec_max=-1,
                                      lockouts=0, unknown=0, caught=0, judged=True, must=False))
        a["runs"] += 1
        a["passed"] += 1 if r["verdict"]["pass"] else 0
        a["caught"] += 1 if r["verdict"]["caught"] else 0
        a["must"] = r["expectation"]["must_be_caught"]
        a["judged"] = "not judged" not in r["setup"].get("expectation", "")
        ops = r["operations"]
        a["ops"] += ops.get("acquire", {}).get("invoke", 0) + ops.get("release", {}).get("invoke", 0)
        a["unknown"] += ops.get("acquire", {}).get("info", 0) + ops.get("release", {}).get("info", 0)
        a["grants"] += r["grants"]
        a["faults"] += len(r["faults"])
        o = r["overlaps"]
        a["ov_e"] += o["explained"]
        a["ov_u"] += o["unexplained"]
        a["ov_max"] = max(a["ov_max"], o["max_ms"])
        a["st_f"] += r["stale_writes"]["fenced"]
        a["st_u"] += r["stale_writes"]["unfenced"]
        a["acked"] += r["lost_updates"]["acked"]
        a["lost"] += r["lost_updates"]["lost"]
        a["fence"] += r["fence_anomalies"]["count"]
        a["foreign"] += r["foreign_releases"]["count"]
        a["lockouts"] += r["recovery"]["lockouts"]
        if r["recovery"]["list"]:
            a["rec_max"] = max(a["rec_max"], r["recovery"]["max_ms"])
    print("| scenario | strategy | runs | lock ops (unknown) | faults | overlaps explained / unexplained (max ms) "
          "| stale writes accepted: fenced / unfenced register | lost updates | fence anomalies | foreign releases "
          "| recovery max ms (lock-outs) | verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (scenario, strategy), a in rows.items():
        pct = 100.0 * a["lost"] / a["acked"] if a["acked"] else 0.0
        rec = "-" if a["rec_max"] < 0 and not a["lockouts"] else \
            f'{a["rec_max"] if a["rec_max"] >= 0 else "never"} ({a["lockouts"]})'
        if a["must"]:
            verdict = f'caught {a["caught"]}/{a["runs"]}'
        elif strategy != "dlock" and not a["judged"]:
            verdict = "control" + (f', violations in {a["caught"]}/{a["runs"]}' if a["caught"] else "")
        else:
            verdict = f'as documented {a["passed"]}/{a["runs"]}'
        print(f'| {scenario} | {strategy} | {a["runs"]} | {a["ops"]} ({a["unknown"]}) | {a["faults"]} '
              f'| {a["ov_e"]} / {a["ov_u"]} ({a["ov_max"]}) | {a["st_f"]} / {a["st_u"]} '
              f'| {a["lost"]} of {a["acked"]} ({pct:.1f}%) | {a["fence"]} | {a["foreign"]} | {rec} | {verdict} |')


if __name__ == "__main__":
    main(sys.argv[1:])
