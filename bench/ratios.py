#!/usr/bin/env python3
"""The distribution of Sundial/QuestDB time ratios in a results file of bench/analytics.sh.

    python3 bench/ratios.py bench/results/analytics-<time>.txt [--worst 10] [--queries FILE]

Reads the `result:` lines of both servers, pairs each query's medians and prints, overall and
per family (a query's name up to its last `_`): how many queries ran on both, the ratios'
quantiles (Sundial's median time / QuestDB's: below 1 Sundial is faster), how many are at
most 0.5 (the goal), at most 1 and above 1; then the worst queries with their SQL (from
--queries, default the battery named in the file's header), and every query that failed or
whose answer differed from QuestDB's.
"""

import argparse
import re
import sys
from collections import defaultdict


def read(path):
    medians, failed, answers, header = defaultdict(dict), defaultdict(set), {}, ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("# bench/") and not header:
                header = line
            if line.startswith("pair: "):
                fields = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
                answers[fields["query"]] = fields.get("answer", "")
                continue
            if not line.startswith("result: ") or " query=" not in line:
                continue
            fields = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
            label, query = fields["label"], fields["query"]
            if " failed: " in line:
                failed[query].add(label + ": " + line.split(" failed: ", 1)[1].strip())
            elif "median_ms" in fields:
                medians[query][label] = float(fields["median_ms"])
                if label == "sundial" and "answer" in fields:
                    answers[query] = fields["answer"]
    return medians, failed, answers, header


def family(query):
    return query.rsplit("_", 1)[0]


def quantile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def summary(label, ratios):
    r = sorted(ratios)
    n = len(r)
    if n == 0:
        return f"{label:<12} {0:>5}"
    half = sum(1 for x in r if x <= 0.5)
    one = sum(1 for x in r if x <= 1.0)
    return (f"{label:<12} {n:>5} {quantile(r, 0.1):>7.2f} {quantile(r, 0.5):>7.2f} "
            f"{quantile(r, 0.9):>7.2f} {r[-1]:>7.2f} {half:>7} {one:>7} {n - one:>7}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results")
    p.add_argument("--worst", type=int, default=10)
    p.add_argument("--queries")
    args = p.parse_args(argv)
    medians, failed, answers, header = read(args.results)
    battery = args.queries
    if battery is None:
        m = re.search(r"queries=(\S+)", header)
        battery = m.group(1) if m else None
    sql = {}
    if battery:
        try:
            with open(battery, encoding="utf-8") as f:
                for line in f:
                    if line.strip() and not line.startswith("#"):
                        name, _, text = (part.strip() for part in line.split("|", 2))
                        sql[name] = text
        except OSError:
            pass
    ratios = {q: m["sundial"] / m["questdb"] for q, m in medians.items()
              if m.get("sundial", 0) > 0 and m.get("questdb", 0) > 0}
    if not ratios:
        print(f"{args.results}: no query with both servers' medians", file=sys.stderr)
        return 1
    print("Sundial/QuestDB median-time ratios (below 1: Sundial faster; goal: at most 0.5)")
    print(f"{'family':<12} {'n':>5} {'p10':>7} {'p50':>7} {'p90':>7} {'max':>7} "
          f"{'<=0.5':>7} {'<=1':>7} {'>1':>7}")
    by_family = defaultdict(list)
    for q, r in ratios.items():
        by_family[family(q)].append(r)
    for fam in sorted(by_family):
        print(summary(fam, by_family[fam]))
    print(summary("all", list(ratios.values())))
    print(f"\nworst {args.worst}:")
    for q in sorted(ratios, key=ratios.get, reverse=True)[:args.worst]:
        m = medians[q]
        print(f"  {q:<16} {ratios[q]:>7.2f}  sundial {m['sundial']:.3f} ms  questdb "
              f"{m['questdb']:.3f} ms  {sql.get(q, '')}")
    for q in sorted(failed):
        print(f"failed {q}: {'; '.join(sorted(failed[q]))}")
    for q in sorted(q for q, a in answers.items() if a == "DIFFERENT"):
        print(f"answer differs {q}: {sql.get(q, '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
