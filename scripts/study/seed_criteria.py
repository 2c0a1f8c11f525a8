"""seed_criteria.py RUNS_DIR: how well label-free scores of a trained run rank its seeds.

For each data set D with run folders RUNS_DIR/runs/D-S (seed S) and the `train --json`
summaries RUNS_DIR/runs-D-S.json, print the mean, spread and best ACC over the seeds,
and for each candidate criterion its Spearman correlation with ACC and the ACC of the
seed it would pick. The criteria use only what a run leaves: assignments.csv (the
posterior of each row's cluster) and metrics.jsonl (the last training loss).

The runs of docs/RESULTS.md section 11 were made with
    for S in 1..20: emclust train --data D.csv --label-col label --standardize \\
        --epochs 300 --seed S --kmeans=false --quiet --json --device cpu \\
        --out runs/D-S > runs-D-S.json
(one run each: add --restarts 1 since vectors train ten restarts by default) (the embedded digits without --data), D.csv exported from scikit-learn's bundled
copies of the UCI tables (load_iris, load_wine, load_breast_cancer).

Debian: python3-scipy and python3-numpy for /usr/bin/python3."""
import csv
import json
import os
import sys

import numpy as np
from scipy.stats import spearmanr

CRITERIA = ["mean max posterior", "mean log max posterior", "-final loss", "cluster-size entropy"]


def scores(run):
    post, clusters = [], []
    with open(os.path.join(run, "assignments.csv")) as f:
        for r in csv.DictReader(f):
            post.append(float(r["posterior"]))
            clusters.append(int(r["cluster"]))
    post = np.array(post)
    loss = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))][-1]["loss"]
    p = np.bincount(clusters) / len(clusters)
    entropy = -(p * np.log(p + 1e-12)).sum()
    return [post.mean(), np.log(post).mean(), -loss, entropy]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    names = sorted({d.rsplit("-", 1)[0] for d in os.listdir(os.path.join(root, "runs"))})
    for name in names:
        rows = []
        for seed in range(1, 101):
            run = os.path.join(root, "runs", f"{name}-{seed}")
            summary = os.path.join(root, f"runs-{name}-{seed}.json")
            if not os.path.exists(os.path.join(run, "assignments.csv")) or not os.path.exists(summary):
                continue
            acc = json.load(open(summary))["scores"]["acc"]
            rows.append([acc] + scores(run))
        if len(rows) < 3:
            continue
        rows = np.array(rows)
        print("%s: %d seeds, ACC mean %.3f sd %.3f max %.3f" % (name, len(rows), rows[:, 0].mean(), rows[:, 0].std(), rows[:, 0].max()))
        for i, crit in enumerate(CRITERIA, 1):
            rho = spearmanr(rows[:, 0], rows[:, i]).correlation
            print("   %-24s Spearman %+.2f  ACC of the seed it picks %.3f" % (crit, rho, rows[np.argmax(rows[:, i]), 0]))


if __name__ == "__main__":
    main()
