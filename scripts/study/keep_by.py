"""keep_by.py EMCLUST OUTDIR [EXTRA.csv.gz ...]: which label-free criterion keeps the
best of ten restarts, the agreement or the silhouette (issue 14)?

Reuses the runs of standardize_agreement.py (one run per seed 1..20 of every table,
standardised and raw; OUTDIR is that script's, and missing runs are trained the same
way). For each table, preprocessing and group of ten seeds (1-10, 11-20) it takes
the run that each rule keeps,
    agreement:  the highest mean adjusted Rand index with the other nine (the medoid)
    silhouette: the highest mean silhouette of the clustering on the z-scored features
                (Euclidean, every row), computed here with numpy, independently of
                emclust's own (train/silhouette.go)
and prints the mean ACC of the kept runs over both groups, beside the mean of all
runs, the best run (an oracle) and the Spearman correlation of silhouette and ACC
over the twenty. ACC comes from `emclust score`; the rules see no labels.

Needs numpy (Debian's python3-numpy); run it from scripts/study."""
import csv
import gzip
import os
import subprocess
import sys
import tempfile

import numpy as np

from linear_net import ari
from standardize_agreement import HELDOUT, runs_of

EMBEDDED = os.path.join(os.path.dirname(HELDOUT), "embedded")
SEEDS = 20


def table(path, header=True):
    with gzip.open(path, "rt") as fh:
        rows = list(csv.reader(fh))
    if header:
        rows = rows[1:]
    return np.array([[float(v) for v in r[:-1]] for r in rows]), [r[-1] for r in rows]


def zscore(x):
    sd = x.std(0)
    sd[sd < 1e-6] = 1
    return (x - x.mean(0)) / sd


def distances(x):
    sq = (x * x).sum(1)
    return np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * x @ x.T, 0))


def silhouette(d, ids):
    ids = np.asarray(ids)
    ks = np.unique(ids)
    if len(ks) < 2:
        return -1.0
    sums = np.stack([d[:, ids == k].sum(1) for k in ks], 1)
    count = np.array([(ids == k).sum() for k in ks])
    own = np.searchsorted(ks, ids)
    rows = np.arange(len(ids))
    a = sums[rows, own] / np.maximum(count[own] - 1, 1)
    mean = sums / count[None, :]
    mean[rows, own] = np.inf
    b = mean.min(1)
    s = (b - a) / np.maximum(a, b)
    s[count[own] == 1] = 0
    return float(s.mean())


def acc(emclust, truth, ids):
    with tempfile.TemporaryDirectory() as tmp:
        t, p = os.path.join(tmp, "t"), os.path.join(tmp, "p")
        for f, v in ((t, truth), (p, ids)):
            with open(f, "w") as fh:
                fh.write("\n".join(map(str, v)) + "\n")
        out = subprocess.run([emclust, "score", "--truth", t, "--pred", p], check=True, capture_output=True, text=True)
    return float(out.stdout.split()[1])


def spearman(a, b):
    rank = lambda v: np.argsort(np.argsort(v))
    return float(np.corrcoef(rank(np.array(a)), rank(np.array(b)))[0, 1])


def study_tables(extra):
    """The embedded tables, the held-out ones and the CSV files extra: (name, emclust's
    data flags, the CSV's path, whether it has a header)."""
    tables = [(n, ["--dataset", n], os.path.join(EMBEDDED, n + ".csv.gz"), n != "digits")
              for n in ("digits", "wine", "iris", "breast-cancer")]
    tables += [(n, ["--data", os.path.join(HELDOUT, n + ".csv.gz"), "--label-col", "label"], os.path.join(HELDOUT, n + ".csv.gz"), True)
               for n in ("glass", "ionosphere", "sonar", "vehicle", "satellite")]
    return tables + [(os.path.basename(p).split(".")[0], ["--data", os.path.abspath(p), "--label-col", "label"], p, True) for p in extra]


def main():
    emclust, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    tables = study_tables(sys.argv[3:])
    print("| table | features | mean of all | agreement keeps | silhouette keeps | best | ρ(silhouette, ACC) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, src, path, header in tables:
        x, truth = table(path, header)
        d = distances(zscore(x))
        for std in ("true", "false"):
            runs, _ = runs_of(emclust, out, name, src, std, SEEDS)
            accs = [acc(emclust, truth, r) for r in runs]
            sils = [silhouette(d, r) for r in runs]
            by_agree, by_sil = [], []
            for g in range(0, SEEDS, 10):
                group = runs[g:g + 10]
                agree = [np.mean([ari(a, b) for j, b in enumerate(group) if j != i]) for i, a in enumerate(group)]
                by_agree.append(accs[g + int(np.argmax(agree))])
                by_sil.append(accs[g + int(np.argmax(sils[g:g + 10]))])
            print(f"| {name} | {'standardised' if std == 'true' else 'raw'} | {np.mean(accs):.4f} | {np.mean(by_agree):.4f} "
                  f"| {np.mean(by_sil):.4f} | {max(accs):.4f} | {spearman(sils, accs):+.2f} |", flush=True)


if __name__ == "__main__":
    main()
