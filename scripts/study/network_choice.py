"""network_choice.py EMCLUST OUTDIR [EXTRA.csv.gz ...]: can a label-free score of the
clustering choose between the MLP and the linear map with a learned prior (issue 14)?

Section 24 found the linear map with `--prior learned` best on wine and breast cancer
(clusters of unequal size) and the MLP best on digits and iris, and the agreement
between runs could not tell them apart. This script asks the same of scores that look
at the clustering in feature space.

For the four embedded tables, the five of data/heldout and any EXTRA tables, it trains
one run per seed 1..20 of each network, with the standardisation the automatic rule
chooses (the MLP's runs are standardize_agreement.py's, shared through OUTDIR):
    emclust compare ... --methods em --hidden none --prior learned --restarts 1 --seeds 20
For each group of ten seeds it keeps each network's medoid (the default restart rule),
and prints the mean ACC of the MLP's, the linear map's, and of the one each score
picks:
    silhouette:          mean silhouette on the z-scored features (train/silhouette.go)
    silhouette (trained): the same on the features the networks trained on (raw or z-scored)
    rule:                emclust's: the clustering with more clusters in use, then the
                         higher silhouette as trained
    calinski-harabasz:   between- over within-cluster dispersion, z-scored features
    davies-bouldin:      mean worst ratio of spreads to centre distance (lower is better)
Scores are computed here with numpy; ACC comes from `emclust score`.

Needs numpy; run it from scripts/study."""
import json
import os
import sys

import numpy as np

from keep_by import acc, distances, silhouette, study_tables, table, zscore
from linear_net import ari
from standardize_agreement import runs_of, trained_runs

SEEDS = 20


def linear_runs(emclust, out, name, src):
    """The linear map's clusterings of seeds 1..SEEDS and the standardisation the rule chose."""
    d = os.path.join(out, f"{name}-linear")
    runs = trained_runs(emclust, d, [*src, "--hidden", "none", "--prior", "learned"], SEEDS)
    with open(os.path.join(d, "em-s1", "config.json")) as fh:
        std = "true" if json.load(fh)["standardize"] else "false"
    return runs, std


def calinski_harabasz(x, ids):
    ids = np.asarray(ids)
    ks = np.unique(ids)
    if len(ks) < 2:
        return 0.0
    mean = x.mean(0)
    between = sum((ids == k).sum() * ((x[ids == k].mean(0) - mean) ** 2).sum() for k in ks)
    within = sum(((x[ids == k] - x[ids == k].mean(0)) ** 2).sum() for k in ks)
    return float(between / max(within, 1e-12) * (len(x) - len(ks)) / (len(ks) - 1))


def davies_bouldin(x, ids):
    ids = np.asarray(ids)
    ks = np.unique(ids)
    if len(ks) < 2:
        return np.inf
    centres = np.stack([x[ids == k].mean(0) for k in ks])
    spread = np.array([np.sqrt(((x[ids == k] - centres[i]) ** 2).sum(1)).mean() for i, k in enumerate(ks)])
    worst = []
    for i in range(len(ks)):
        r = [(spread[i] + spread[j]) / max(np.linalg.norm(centres[i] - centres[j]), 1e-12) for j in range(len(ks)) if j != i]
        worst.append(max(r))
    return float(np.mean(worst))


def medoid(group):
    agree = [np.mean([ari(a, b) for j, b in enumerate(group) if j != i]) for i, a in enumerate(group)]
    return int(np.argmax(agree))


def main():
    emclust, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    tables = study_tables(sys.argv[3:])
    print("| table | features | MLP | linear, learned prior | silhouette picks | silhouette (trained) picks | rule picks | CH picks | DB picks | better |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, src, path, header in tables:
        x, truth = table(path, header)
        z = zscore(x)
        d = distances(z)
        lin, std = linear_runs(emclust, out, name, src)
        dt = d if std == "true" else distances(x)
        mlp, _ = runs_of(emclust, out, name, src, std, SEEDS)
        got = {"mlp": [], "linear": [], "sil": [], "silt": [], "rule": [], "ch": [], "db": []}
        for g in range(0, SEEDS, 10):
            m = mlp[g:g + 10][medoid(mlp[g:g + 10])]
            l = lin[g:g + 10][medoid(lin[g:g + 10])]
            am, al = acc(emclust, truth, m), acc(emclust, truth, l)
            got["mlp"].append(am)
            got["linear"].append(al)
            got["sil"].append(am if silhouette(d, m) >= silhouette(d, l) else al)
            got["silt"].append(am if silhouette(dt, m) >= silhouette(dt, l) else al)
            # emclust's rule: more clusters in use first, then the silhouette as trained.
            key = lambda c: (len(set(c)), silhouette(dt, c))
            got["rule"].append(am if key(m) >= key(l) else al)
            got["ch"].append(am if calinski_harabasz(z, m) >= calinski_harabasz(z, l) else al)
            got["db"].append(am if davies_bouldin(z, m) <= davies_bouldin(z, l) else al)
        mean = {k: float(np.mean(v)) for k, v in got.items()}
        better = "MLP" if mean["mlp"] >= mean["linear"] else "linear"
        print(f"| {name} | {'standardised' if std == 'true' else 'raw'} | {mean['mlp']:.4f} | {mean['linear']:.4f} "
              f"| {mean['sil']:.4f} | {mean['silt']:.4f} | {mean['rule']:.4f} | {mean['ch']:.4f} | {mean['db']:.4f} | {better} |", flush=True)


if __name__ == "__main__":
    main()
