"""restart_agreement.py EMCLUST OUTDIR [SEEDS]: does the agreement between restarts pick
a good one (issue 14)?

Trains the four embedded tables (digits, iris, wine, breast-cancer) with the defaults
for seeds 1..SEEDS (default 30),
    emclust train --dataset T --seed S --kmeans=false --restarts 1 --quiet --out OUTDIR/T-S
and reads each run's ACC, mean max posterior (summary.json) and clustering
(assignments.csv). Prints, per table, the Spearman correlation with ACC of each seed's
agreement (its mean adjusted Rand index with every other seed's clustering) and of its
max posterior, and, for each group of ten seeds (1-10, 11-20, ...), the ACC of the seed
each criterion keeps, as `train --restarts 10 --seed 1, 11, ...` does.

Debian: python3-sklearn, python3-scipy and python3-numpy for /usr/bin/python3; run it
from outside the repository (its torch/ folder shadows the torch module)."""
import csv
import itertools
import json
import os
import subprocess
import sys

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import adjusted_rand_score

TABLES = ["digits", "iris", "wine", "breast-cancer"]


def run(emclust, out, table, seed):
    d = os.path.join(out, f"{table}-{seed}")
    if not os.path.exists(os.path.join(d, "summary.json")):
        subprocess.run([emclust, "train", "--dataset", table, "--seed", str(seed), "--kmeans=false",
                        "--restarts", "1", "--quiet", "--out", d], check=True, stdout=subprocess.DEVNULL)
    s = json.load(open(os.path.join(d, "summary.json")))
    clusters = [int(r["cluster"]) for r in csv.DictReader(open(os.path.join(d, "assignments.csv")))]
    return s["scores"]["acc"], s["criteria"]["max_posterior"], np.array(clusters)


def main():
    emclust, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    os.makedirs(out, exist_ok=True)
    for t in TABLES:
        runs = [run(emclust, out, t, s) for s in range(1, n + 1)]
        acc = [r[0] for r in runs]
        pairs = np.eye(n)
        for i, j in itertools.combinations(range(n), 2):
            pairs[i, j] = pairs[j, i] = adjusted_rand_score(runs[i][2], runs[j][2])
        agree = (pairs.sum(1) - 1) / (n - 1)
        print(f"{t}: ACC {np.mean(acc):.4f} over {n} seeds; Spearman with ACC: agreement "
              f"{spearmanr(agree, acc).correlation:.3f}, max posterior {spearmanr([r[1] for r in runs], acc).correlation:.3f}")
        for g in range(0, n - 9, 10):
            idx = list(range(g, g + 10))
            sub = pairs[np.ix_(idx, idx)]
            medoid = idx[int(np.argmax(sub.sum(1)))]
            confident = max(idx, key=lambda i: runs[i][1])
            print(f"  seeds {g + 1}-{g + 10}: kept by agreement {acc[medoid]:.4f}, by max posterior "
                  f"{acc[confident]:.4f}, mean {np.mean([acc[i] for i in idx]):.4f}")


if __name__ == "__main__":
    main()
