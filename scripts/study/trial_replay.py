#!/usr/bin/env python3
"""Replay `train --restarts R --trial-epochs T` on runs already trained.

usage: trial_replay.py [--trials 10,15,20,25] [--restarts 2,3,4] RUN [RUN ...]

Each RUN is a run folder (its metrics.jsonl evaluated every epoch, with labels) of
one seed trained at the same settings. A trial of T epochs keeps, of R seeds, the one
whose best agreement (mean ARI of an epoch's clustering with its five earlier
evaluations) up to epoch T is highest, as train.TrainTrials does; that seed then goes
on to the length L all runs share (the shortest run's), and its chosen epoch over all
L is what the run reports. For every T and R this prints the mean ACC of that choice
over every subset of R seeds, beside the mean of one seed alone, and the epochs the
choice costs (R·T + L − T, against L). The p column is the share of --null random
relabellings (each run's final ACC given to another run, the trials' agreements kept)
whose gain is at least the one seen: how often a rule that knew nothing would do as well,
as (hits + 1) / (N + 1), uncorrected for the several T and R printed.

Labels score the choices only; no choice reads them. Standard library only, so that it
runs on the GPU machine's python3.
"""

import argparse
import itertools
import json
import os
import random
import sys


def read_metrics(path):
    """The run's metrics.jsonl lines, by epoch; every epoch from 1 on, with its ACC."""
    with open(os.path.join(path, "metrics.jsonl")) as f:
        lines = sorted((json.loads(line) for line in f), key=lambda m: m["epoch"])
    for i, m in enumerate(lines):
        if m["epoch"] != i + 1 or m.get("acc") is None:
            sys.exit(f"{path}: epoch {i + 1} is missing or has no ACC: train with --eval-every 1 and labels")
    return lines


def rows_of(lines):
    """The (epoch, agreement, ACC, empty clusters) rows that chosen reads."""
    return [(m["epoch"], m.get("agreement"), m["acc"], m.get("empty_clusters", 0)) for m in lines]


def read_run(path):
    """The run's rows (rows_of) and its seed, from its config.json."""
    with open(os.path.join(path, "config.json")) as f:
        seed = json.load(f)["seed"]
    return seed, rows_of(read_metrics(path))


def chosen(rows, upto):
    """The (epoch, agreement, ACC, empty) Chosen.AgreesMore keeps among the first upto:
    of those with an agreement, of the fewest clusters empty, the first of highest
    agreement; None where none has an agreement."""
    best = None
    for row in rows[:upto]:
        if row[1] is not None and (best is None or row[3] < best[3] or (row[3] == best[3] and row[1] > best[1])):
            best = row
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", default="10,15,20,25", help="trial lengths T, in epochs")
    ap.add_argument("--restarts", default="2,3,4", help="trial counts R")
    ap.add_argument("--null", type=int, default=2000, help="random relabellings behind the p column (0: none)")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    trials = [int(t) for t in a.trials.split(",")]
    counts = [int(r) for r in a.restarts.split(",")]
    if min(trials) < 2 or min(counts) < 1:
        sys.exit("--trials: want lengths of 2 epochs or more (an agreement needs two evaluations); --restarts: counts of 1 or more")
    runs, seeds = {}, {}
    for p in a.runs:
        name = os.path.basename(os.path.normpath(p))
        seeds[name], runs[name] = read_run(p)
    length = min(len(r) for r in runs.values())
    # In seed order: of equal agreements the rule keeps the first trial, the lowest seed.
    names = sorted(runs, key=lambda n: seeds[n])
    final = {n: chosen(runs[n], length) for n in names}
    if any(c is None for c in final.values()):
        sys.exit(f"the runs share {length} epoch(s): too few for an agreement, which needs two evaluations")
    print(f"{len(names)} runs, replayed to the {length} epochs all have")
    print("| run | chosen epoch | agreement | ACC | " + " | ".join(f"agreement by {t}" for t in trials) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(trials))
    for n in names:
        e, ag, acc, _ = final[n]
        cells = []
        for t in trials:
            c = chosen(runs[n], min(t, length))
            cells.append(f"{c[1]:.3f}" if c else "–")
        print(f"| {n} | {e} | {ag:.3f} | {acc:.4f} | " + " | ".join(cells) + " |")
    alone = sum(final[n][2] for n in names) / len(names)
    print(f"\none seed alone: mean chosen-epoch ACC {alone:.4f} over {len(names)}, {length} epochs each\n")
    print("| T | R | kept seeds' mean ACC | gain | p | subsets | epochs |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    rng = random.Random(1)
    for t in trials:
        if t > length:
            continue
        trial = {n: (-chosen(runs[n], t)[3], chosen(runs[n], t)[1]) for n in names}
        for r in counts:
            if r > len(names):
                continue
            groups = list(itertools.combinations(range(len(names)), r))
            kept = [max(g, key=lambda i: (trial[names[i]], -i)) for g in groups]
            accs = [final[n][2] for n in names]
            mean = sum(accs[i] for i in kept) / len(kept)
            p = "–"
            if a.null > 0:
                hits = 0
                for _ in range(a.null):
                    rng.shuffle(accs)
                    hits += sum(accs[i] for i in kept) / len(kept) >= mean - 1e-12
                p = f"{(hits + 1) / (a.null + 1):.3f}"
            print(f"| {t} | {r} | {mean:.4f} | {mean - alone:+.4f} | {p} | {len(groups)} | {r * t + length - t} |")


if __name__ == "__main__":
    main()
