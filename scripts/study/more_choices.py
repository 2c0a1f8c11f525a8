"""more_choices.py EMCLUST OUTDIR [EXTRA.csv.gz ...]: three more label-free choices,
replayed on the runs the earlier studies cached (issue 14).

OUTDIR is that of standardize_agreement.py and network_choice.py: one run per seed
1..20 of every table, the MLP standardised and raw, and the linear map with a learned
prior on the features the spread rule chose (missing runs are trained the same way).
For each table and group of ten seeds (1-10, 11-20) it prints the ACC of

1. a consensus instead of the medoid: every run's clusters matched to the medoid's
   (the matching of most shared rows), then each row's majority cluster; for the
   MLP and the linear map on the rule's features;
2. the standardisation chosen by silhouettes: of the MLP's standardised medoid S and
   raw medoid R, the one of higher silhouette on the z-scored features, on the raw
   ones, or on their sum; against the spread rule (section 17);
3. one choice among three candidates, S, R and the linear map's medoid L: the one
   that agrees most (adjusted Rand index) with the other two, and the medoid of all
   thirty runs pooled; against emclust's default (section 29: the rule's features,
   then more clusters used and the higher silhouette as trained).

The choices see no labels; ACC comes from `emclust score`. Needs numpy; run it from
scripts/study."""
import itertools
import os
import sys

import numpy as np

from keep_by import acc, distances, silhouette, study_tables, table, zscore
from linear_net import ari
from network_choice import SEEDS, linear_runs, medoid
from standardize_agreement import runs_of


def matched(run, to, k):
    """run's clusters renamed to those of to that share the most rows with them."""
    shared = np.zeros((k, k), int)
    for a, b in zip(run, to):
        shared[a, b] += 1
    if k <= 8:
        best = max(itertools.permutations(range(k)), key=lambda p: sum(shared[i, p[i]] for i in range(k)))
    else:  # greedy: the largest overlap first
        best, free = [0] * k, shared.astype(float)
        for _ in range(k):
            i, j = np.unravel_index(np.argmax(free), free.shape)
            best[i] = j
            free[i, :], free[:, j] = -1, -1
    return [best[c] for c in run]


def consensus(group, k):
    """Each row's majority cluster over group, matched to the group's medoid."""
    centre = group[medoid(group)]
    votes = np.zeros((len(centre), k), int)
    for run in group:
        votes[np.arange(len(centre)), matched(run, centre, k)] += 1
    return votes.argmax(1).tolist()


def main():
    emclust, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    totals = {}

    def note(key, value):
        totals.setdefault(key, []).append(value)

    for name, src, path, header in study_tables(sys.argv[3:]):
        x, truth = table(path, header)
        k = len(set(truth))
        score = lambda ids: acc(emclust, truth, ids)
        dz, dr = distances(zscore(x)), distances(x)
        std_runs, _ = runs_of(emclust, out, name, src, "true", SEEDS)
        raw_runs, _ = runs_of(emclust, out, name, src, "false", SEEDS)
        lin_runs, rule = linear_runs(emclust, out, name, src)
        for g in range(0, SEEDS, 10):
            groups = {"S": std_runs[g:g + 10], "R": raw_runs[g:g + 10], "L": lin_runs[g:g + 10]}
            med = {c: runs[medoid(runs)] for c, runs in groups.items()}
            a = {c: score(run) for c, run in med.items()}
            mlp = "S" if rule == "true" else "R"
            line = [f"{name} {g + 1}-{g + 10}:"]

            # 1. consensus against medoid, for both networks on the rule's features.
            for c in (mlp, "L"):
                cons = score(consensus(groups[c], k))
                note(f"1. {'MLP' if c != 'L' else 'linear'} medoid", a[c])
                note(f"1. {'MLP' if c != 'L' else 'linear'} consensus", cons)
                line.append(f"{'MLP' if c != 'L' else 'linear'} medoid {a[c]:.4f} consensus {cons:.4f};")

            # 2. the standardisation by silhouettes.
            sil = {c: (silhouette(dz, med[c]), silhouette(dr, med[c])) for c in "SR"}
            picks = {"z-scored": sil["S"][0] > sil["R"][0], "raw": sil["S"][1] > sil["R"][1],
                     "sum": sum(sil["S"]) > sum(sil["R"]), "spread rule": rule == "true"}
            note("2. better of S and R", max(a["S"], a["R"]))
            for how, std in picks.items():
                note(f"2. silhouette {how}" if how != "spread rule" else "2. spread rule", a["S" if std else "R"])
            line.append(f"S {a['S']:.4f} R {a['R']:.4f}, silhouettes pick " +
                        ", ".join(f"{how} {'S' if std else 'R'}" for how, std in picks.items()) + ";")

            # 3. one of three candidates, and the pooled medoid, against the default.
            agree = {c: sum(ari(med[c], med[o]) for o in "SRL" if o != c) for c in "SRL"}
            middle = max("SRL", key=agree.get)
            pool = groups["S"] + groups["R"] + groups["L"]
            pooled = score(pool[medoid(pool)])
            dt = dz if rule == "true" else dr
            key = lambda c: (len(set(med[c])), silhouette(dt, med[c]))
            default = a[mlp] if key(mlp) >= key("L") else a["L"]
            note("3. default", default)
            note("3. most agreeing of S, R, L", a[middle])
            note("3. pooled medoid", pooled)
            line.append(f"L {a['L']:.4f}, most agreeing {middle} {a[middle]:.4f}, pooled {pooled:.4f}, default {default:.4f}")
            print(" ".join(line), flush=True)

    print("\nmean ACC over every table and group:")
    for key, values in totals.items():
        print(f"  {key}: {np.mean(values):.4f}")


if __name__ == "__main__":
    main()
