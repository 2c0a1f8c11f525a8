"""standardize_agreement.py EMCLUST OUTDIR [SEEDS [EXTRA.csv.gz ...]]: can the agreement
between runs tell whether to standardise a table (issue 14)?

For the four embedded tables, the five of data/heldout and any EXTRA tables (CSV with
a `label` column), trains one run per seed 1..SEEDS (default 20) with the features
standardised and again raw,
    emclust compare --dataset T | --data F --label-col label --methods em --restarts 1
        --seeds SEEDS --standardize=true|false --out D
writes each run's clustering with `emclust predict`, and prints per table the mean
ACC and the mean pairwise adjusted Rand index of each choice, the choice with the
better ACC, and the one the agreement picks.

Standard library only; run it from the repository's scripts/study folder or with it
on PYTHONPATH (it uses linear_net.py's ari)."""
import csv
import json
import os
import subprocess
import sys

from linear_net import ari

HERE = os.path.dirname(os.path.abspath(__file__))
HELDOUT = os.path.join(HERE, "..", "..", "data", "heldout")


def runs_of(emclust, out, name, src, std, seeds):
    """The clusterings of the runs of seeds 1..seeds, trained if missing, and their folder."""
    d = os.path.join(out, f"{name}-{std}")
    return trained_runs(emclust, d, [*src, "--standardize=" + std], seeds), d


def trained_runs(emclust, d, args, seeds):
    """The clusterings of em's runs of seeds 1..seeds with emclust compare's flags args,
    one restart each, kept in d and trained if missing."""
    if not os.path.exists(os.path.join(d, "compare.json")):
        subprocess.run([emclust, "compare", *args, "--methods", "em", "--restarts", "1", "--seeds", str(seeds),
                        "--device", "cpu", "--quiet", "--out", d],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = []
    for s in range(1, seeds + 1):
        f = os.path.join(d, f"a-s{s}.csv")
        if not os.path.exists(f):
            subprocess.run([emclust, "predict", "--model", os.path.join(d, f"em-s{s}"), "--out", f],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(f) as fh:
            runs.append([int(r["cluster"]) for r in csv.DictReader(fh)])
    return runs


def clusterings(emclust, out, name, src, std, seeds):
    runs, d = runs_of(emclust, out, name, src, std, seeds)
    with open(os.path.join(d, "compare.json")) as fh:
        acc = json.load(fh)["methods"][0]["acc"]["mean"]
    pairs = [ari(runs[i], runs[j]) for i in range(seeds) for j in range(i + 1, seeds)]
    return acc, sum(pairs) / len(pairs)


def main():
    emclust, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    tables = [(t, ["--dataset", t]) for t in ["digits", "wine", "iris", "breast-cancer"]]
    files = sorted(os.path.join(HELDOUT, f) for f in os.listdir(HELDOUT) if f.endswith(".csv.gz")) + sys.argv[4:]
    tables += [(os.path.basename(f).split(".")[0], ["--data", os.path.abspath(f), "--label-col", "label"]) for f in files]
    print("| table | standardised: ACC (agreement) | raw: ACC (agreement) | better | agreement picks |")
    print("|---|---|---|---|---|")
    for name, src in tables:
        sa, sg = clusterings(emclust, out, name, src, "true", seeds)
        ra, rg = clusterings(emclust, out, name, src, "false", seeds)
        better = "standardised" if sa > ra else "raw"
        pick = "standardised" if sg > rg else "raw"
        print(f"| {name} | {sa:.4f} ({sg:.3f}) | {ra:.4f} ({rg:.3f}) | {better} | {pick} |", flush=True)


if __name__ == "__main__":
    main()
