#!/usr/bin/env python3
"""Aggregates the recipe runs (strategies fair-*, rw-*, semaphore-*,
election-*) of dlock-torture suite.json files into the Markdown tables of
RELIABILITY.md's "Recipes under faults": one row per recipe x backend, and
one per recipe x backend x scenario with --by-scenario.

usage: aggregate_recipes.py [--by-scenario] SUITE.json [SUITE.json...]
"""
import json
import sys
from collections import Counter, OrderedDict

RECIPES = ("fair", "rw", "semaphore", "election")


def recipe_backend(strategy):
    recipe, _, backend = strategy.partition("-")
    return (recipe, backend) if recipe in RECIPES and backend else None


def main(args):
    by_scenario = "--by-scenario" in args
    paths = [a for a in args if a != "--by-scenario"]
    latest = OrderedDict()  # a run repeated in a later file replaces the earlier one
    for path in paths:
        with open(path) as f:
            for r in json.load(f)["runs"]:
                if recipe_backend(r["strategy"]):
                    latest[(r["scenario"], r["strategy"], r["setup"].get("seed"))] = r
    rows = OrderedDict()
    for r in sorted(latest.values(), key=lambda r: (RECIPES.index(recipe_backend(r["strategy"])[0]),
                                                    recipe_backend(r["strategy"])[1], r["scenario"])):
        recipe, backend = recipe_backend(r["strategy"])
        key = (recipe, backend, r["scenario"] if by_scenario else "")
        a = rows.setdefault(key, dict(runs=0, passed=0, ops=0, grants=0, faults=Counter(), violations=Counter(),
                                      problems=0, rec=[], permit_rec=[], never=0, pairs=0, overtakes=0,
                                      excused=0, reader_ov=0, excess_u=0, excess_e=0, max_holders=0,
                                      deposed=0, rejected=0, dep_acc=0, stale=0, clashes=0, scenarios=set()))
        a["runs"] += 1
        a["scenarios"].add(r["scenario"])
        a["passed"] += 1 if r["verdict"]["pass"] else 0
        ops = r["operations"]
        a["ops"] += ops.get("acquire", {}).get("invoke", 0) + ops.get("release", {}).get("invoke", 0)
        a["grants"] += r["grants"]
        for w in r["faults"]:
            a["faults"][w["kind"]] += 1
        for v in r["verdict"]["violations"]:
            if "documented: allowed" not in v:
                a["violations"][v] += 1
        a["problems"] += 0 if r["verdict"]["pass"] else 1
        a["stale"] += r["stale_writes"]["fenced"]
        for x in r["recovery"]["list"]:
            if x["recovery_ms"] is not None:
                a["rec"].append(x["recovery_ms"])
        rr = r.get("recipe", {})
        lo = rr.get("line_order")
        if lo:
            a["pairs"] += lo["pairs_judged"]
            a["overtakes"] += lo["overtaken"]
            a["excused"] += lo["excused"]
        if "readers" in rr:
            a["reader_ov"] += rr["readers"]["overlaps"]
        if "permits" in rr:
            p = rr["permits"]
            a["excess_u"] += p["excess_unexplained"]
            a["excess_e"] += p["excess_explained"]
            a["max_holders"] = max(a["max_holders"], p["max_holders"])
            for x in p["lost_permits"]:
                if x["recovery_ms"] is None:
                    a["never"] += 1
                else:
                    a["permit_rec"].append(x["recovery_ms"])
        if "election" in rr:
            e = rr["election"]
            a["deposed"] += e["deposed_writes"]
            a["rejected"] += e["deposed_rejected"]
            a["dep_acc"] += e["deposed_accepted"]
            a["clashes"] += e["term_clashes"]

    def recipe_cell(recipe, a):
        if recipe == "fair":
            return f'line: {a["pairs"]} pairs judged, {a["overtakes"]} overtaken ({a["excused"]} excused by faults)'
        if recipe == "rw":
            return f'readers held together {a["reader_ov"]} times'
        if recipe == "semaphore":
            rec = "-"
            if a["permit_rec"]:
                s = sorted(a["permit_rec"])
                rec = f'{len(s)} lost, recovered in {s[len(s) // 2]} ms median, {s[-1]} ms max'
            if a["never"]:
                rec += f', {a["never"]} not seen recovered'
            return (f'max {a["max_holders"]} holders; over N: {a["excess_u"]} unexplained, {a["excess_e"]} '
                    f'explained; permits {rec}')
        return (f'line: {a["pairs"]} pairs, {a["overtakes"]} overtaken ({a["excused"]} excused); '
                f'{a["clashes"]} terms with two leaders; deposed writes {a["deposed"]}: rejected {a["rejected"]}, '
                f'accepted before the successor wrote {a["dep_acc"]}')

    head = "| recipe | backend |" + (" scenario |" if by_scenario else " scenarios |")
    print(head + " runs | lock ops | faults | violations (not documented) | stale writes accepted (fenced) "
          "| recovery max ms | recipe checks | met expectation |")
    print("|---" * (11) + "|")
    for (recipe, backend, scenario), a in rows.items():
        faults = ", ".join(f"{k} {n}" for k, n in sorted(a["faults"].items())) or "none"
        viol = "; ".join(f"{v} ({n} runs)" if n > 1 else v for v, n in a["violations"].items()) or "none"
        rec = str(max(a["rec"])) if a["rec"] else "-"
        where = scenario if by_scenario else str(len(a["scenarios"]))
        print(f'| {recipe} | {backend} | {where} | {a["runs"]} | {a["ops"]:,} | {faults} | {viol} | {a["stale"]} '
              f'| {rec} | {recipe_cell(recipe, a)} | {a["passed"]}/{a["runs"]} |')


if __name__ == "__main__":
    main(sys.argv[1:])
