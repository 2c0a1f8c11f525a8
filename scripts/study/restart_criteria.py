"""restart_criteria.py EMCLUST OUTDIR [SEEDS]: which label-free criterion picks the best
of several seeds (issue 14's restarts).

Trains the embedded digits and scikit-learn's bundled UCI tables (iris, wine, breast
cancer; exported to OUTDIR as CSV) for seeds 1..SEEDS (default 20) with
    emclust train --data D.csv --label-col label --standardize --epochs 300 --eval-every 0 \\
        --seed S --kmeans=false --restarts 1 --quiet --json --device cpu --out OUTDIR/runs/D-S
and reads each summary's ACC and criteria (train.Criteria: em_objective,
log_likelihood, max_posterior, size_entropy; computed over all rows in eval mode).
Prints, per data set, the ACC over seeds and, per criterion, its Spearman correlation
with ACC, the ACC of the seed it would keep of all, and the mean ACC it would keep of
5 and of 10 seeds drawn from them. Writes OUTDIR/criteria.json.

Debian: python3-sklearn, python3-scipy and python3-numpy for /usr/bin/python3."""
import json
import os
import subprocess
import sys

import numpy as np
from scipy.stats import spearmanr

# Each criterion with the sign that makes larger better.
CRITERIA = [("em_objective", -1), ("log_likelihood", 1), ("max_posterior", 1), ("size_entropy", 1)]


def export(out):
    from sklearn import datasets
    sets = {"digits": None}
    for name, load in (("iris", datasets.load_iris), ("wine", datasets.load_wine),
                       ("breast-cancer", datasets.load_breast_cancer)):
        d = load()
        path = os.path.join(out, name + ".csv")
        with open(path, "w") as f:
            f.write(",".join("f%d" % i for i in range(d.data.shape[1])) + ",label\n")
            for row, y in zip(d.data, d.target):
                f.write(",".join(repr(float(v)) for v in row) + ",%d\n" % y)
        sets[name] = path
    return sets


def main():
    emclust, out = sys.argv[1], sys.argv[2]
    seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    table = {}
    for name, path in export(out).items():
        rows = []
        for seed in range(1, seeds + 1):
            args = [emclust, "train", "--standardize", "--epochs", "300", "--eval-every", "0", "--seed", str(seed), "--kmeans=false", "--restarts", "1",
                    "--quiet", "--json", "--device", "cpu", "--out", os.path.join(out, "runs", "%s-%d" % (name, seed))]
            if path:
                args += ["--data", path, "--label-col", "label"]
            s = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
            rows.append([s["scores"]["acc"]] + [sign * s["criteria"][c] for c, sign in CRITERIA])
        rows = np.array(rows)
        acc = rows[:, 0]
        entry = {"seeds": seeds, "acc_mean": acc.mean(), "acc_sd": acc.std(ddof=1), "acc_min": acc.min(),
                 "acc_max": acc.max(), "criteria": {}}
        print("%s: %d seeds, ACC mean %.3f sd %.3f, min %.3f, max %.3f" % (name, seeds, acc.mean(), acc.std(ddof=1), acc.min(), acc.max()))
        for i, (c, sign) in enumerate(CRITERIA, 1):
            rho = spearmanr(acc, rows[:, i]).correlation
            picked = acc[np.argmax(rows[:, i])]
            entry["criteria"][c] = {"spearman": rho, "acc_of_pick": picked}
            # The ACC a run of R restarts would keep: the mean over random R-subsets
            # of the seeds, for R = 5 and 10.
            rng = np.random.default_rng(1)
            kept = {}
            for r in (5, 10):
                picks = []
                for _ in range(2000):
                    sub = rows[rng.choice(len(rows), size=r, replace=False)]
                    picks.append(sub[np.argmax(sub[:, i]), 0])
                kept[r] = float(np.mean(picks))
            entry["criteria"][c]["acc_kept"] = kept
            print("   %-15s Spearman %+.2f  ACC of the seed it keeps %.3f; kept of 5 restarts %.3f, of 10 %.3f" % (
                ("-" if sign < 0 else "") + c, rho, picked, kept[5], kept[10]))
        table[name] = entry
    with open(os.path.join(out, "criteria.json"), "w") as f:
        json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
