"""epoch_criteria.py EMCLUST OUTDIR EPOCHS [TRAIN ARGS...]: which label-free criterion
picks a good epoch within one run (issue 14, model selection within a run)?

Trains one run an epoch at a time,
    emclust train TRAIN ARGS --restarts 1 --epochs 1 --out OUTDIR/run
    emclust train --resume OUTDIR/run --epochs E        (E = 2..EPOCHS)
which a resume makes the same run as one that never stopped (the tests check it), and
after each epoch keeps its summary.json (ACC, the criteria over all rows in eval mode)
and assignments.csv. Prints, per epoch, ACC and the criteria, then each criterion's
Spearman correlation with ACC over the epochs and the ACC of the epoch it keeps, for:
the mean max posterior, −EM objective, the log-likelihood, the cluster-size entropy,
and the agreement of an epoch's clustering with the previous W epochs' (mean adjusted
Rand index, W = 1, 3, 5), which is what an online rule can know.

Debian: python3-sklearn, python3-scipy, python3-numpy for /usr/bin/python3; run it from
outside the repository (its torch/ folder shadows the torch module)."""
import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import adjusted_rand_score


def main():
    emclust, out, epochs, args = os.path.abspath(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    run = os.path.join(out, "run")
    rows = []
    for e in range(1, epochs + 1):
        keep = os.path.join(out, f"epoch-{e}")
        if not os.path.exists(os.path.join(keep, "summary.json")):
            if e == 1:
                cmd = [emclust, "train", *args, "--restarts", "1", "--epochs", "1", "--quiet", "--out", run]
            else:
                cmd = [emclust, "train", "--resume", run, "--epochs", str(e), "--quiet"]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            os.makedirs(keep, exist_ok=True)
            for f in ("summary.json", "assignments.csv"):
                shutil.copy(os.path.join(run, f), keep)
        s = json.load(open(os.path.join(keep, "summary.json")))
        cl = np.array([int(r["cluster"]) for r in csv.DictReader(open(os.path.join(keep, "assignments.csv")))])
        rows.append((s["scores"]["acc"], s["criteria"], cl))
        c = s["criteria"]
        print(f"epoch {e:3d}  ACC {s['scores']['acc']:.4f}  max posterior {c['max_posterior']:.4f}  "
              f"EM {c['em_objective']:.4f}  LL {c['log_likelihood']:.4f}  size entropy {c['size_entropy']:.4f}", flush=True)

    acc = np.array([r[0] for r in rows])
    crit = {
        "max posterior": [r[1]["max_posterior"] for r in rows],
        "-EM objective": [-r[1]["em_objective"] for r in rows],
        "log-likelihood": [r[1]["log_likelihood"] for r in rows],
        "size entropy": [r[1]["size_entropy"] for r in rows],
    }
    for w in (1, 3, 5):
        ag = [np.nan]
        for e in range(1, len(rows)):
            prev = rows[max(0, e - w):e]
            ag.append(np.mean([adjusted_rand_score(rows[e][2], p[2]) for p in prev]))
        crit[f"agreement, last {w}"] = ag
    print(f"\nACC over {len(rows)} epochs: mean {acc.mean():.4f}, min {acc.min():.4f}, max {acc.max():.4f}, last {acc[-1]:.4f}")
    print("| criterion | Spearman with ACC | ACC of the epoch it keeps (epoch) |")
    print("|---|---:|---:|")
    for name, v in crit.items():
        v = np.array(v, dtype=float)
        ok = ~np.isnan(v)
        rho = spearmanr(v[ok], acc[ok]).correlation
        best = int(np.nanargmax(v))
        print(f"| {name} | {rho:+.2f} | {acc[best]:.4f} ({best + 1}) |")


if __name__ == "__main__":
    main()
