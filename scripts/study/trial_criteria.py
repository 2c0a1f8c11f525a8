#!/usr/bin/env python3
"""trial_criteria.py RUN [RUN ...]: which label-free figure, read at epoch T, ranks the
seeds by the ACC of the epoch each run finally keeps.

Each RUN is a run folder of one seed (metrics.jsonl evaluated every epoch, with labels),
all trained at the same settings. The kept epoch over the L epochs all runs share is the
one of highest agreement (train's rule, as scripts/study/trial_replay.py replays it,
whose reading and rule this takes).
For each T this prints the Spearman correlation, over the runs, between that ACC and:
the best agreement up to T (what train --trial-epochs keeps by), and the criteria of
epoch T (the EM objective and the loss negated, so that higher is better for all).

The runs of docs/RESULTS.md section 50 are in docs/runs/fm10k-bf16, those of section 51
in docs/runs/fmnist-h200-19ep.
Debian: python3-scipy for /usr/bin/python3."""
import sys

from scipy.stats import spearmanr

from trial_replay import chosen, read_metrics, rows_of


def read(run):
    lines = read_metrics(run)
    for m in lines:
        if "criteria" not in m:
            sys.exit(f"{run}: epoch {m['epoch']} has no criteria: train with --eval-every 1")
    return lines


FIGURES = [
    ("best agreement", lambda rows, t: chosen(rows_of(rows), t)[1]),
    ("-EM objective", lambda rows, t: -rows[t - 1]["criteria"]["em_objective"]),
    ("log-likelihood", lambda rows, t: rows[t - 1]["criteria"]["log_likelihood"]),
    ("max posterior", lambda rows, t: rows[t - 1]["criteria"]["max_posterior"]),
    ("size entropy", lambda rows, t: rows[t - 1]["criteria"]["size_entropy"]),
    ("-loss", lambda rows, t: -rows[t - 1]["loss"]),
]


def main():
    runs = sys.argv[1:]
    if len(runs) < 3:
        sys.exit(__doc__)
    rows = [read(r) for r in runs]
    last = min(len(r) for r in rows)
    acc = [chosen(rows_of(r), last)[2] for r in rows]
    print(f"{len(runs)} runs, kept epochs over the {last} epochs all have; Spearman with their ACC")
    print()
    print("| T | " + " | ".join(name for name, _ in FIGURES) + " |")
    print("|---:|" + "---:|" * len(FIGURES))
    for t in sorted({5, 10, 15, 20, 25, 30, last}):
        if t > last:
            continue
        cells = [f"{spearmanr([f(r, t) for r in rows], acc)[0]:+.2f}" for _, f in FIGURES]
        print(f"| {t} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
