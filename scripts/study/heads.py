"""heads.py EPOCH RUN...: does --heads help, and does the agreement between heads pick
a good one (issue 14, sub-heads)?

Reads each run folder's metrics.jsonl (evaluated every epoch: --eval-every 1) and
prints, per run, its ACC at EPOCH (the head the run selected, or its only head), the
mean of its ACC over epochs 1..EPOCH, and, for runs with heads, at EPOCH: the best
and the mean head's ACC, the rank by ACC of the head the agreement selected (1: the
best), and the Spearman correlation between the heads' agreement and ACC over every
evaluation up to EPOCH (ranks within an evaluation, pooled).

Debian: python3-scipy for /usr/bin/python3; run it from outside the repository (its
torch/ folder shadows the torch module)."""
import json
import os
import sys

from scipy.stats import spearmanr, rankdata


def main():
    epoch, runs = int(sys.argv[1]), sys.argv[2:]
    print("| run | heads | ACC at epoch %d | mean ACC, epochs 1–%d | best head | mean head | rank of the selected head | Spearman agreement/ACC |" % (epoch, epoch))
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        with open(os.path.join(run, "metrics.jsonl")) as f:
            hist = [json.loads(line) for line in f]
        hist = [m for m in hist if m["epoch"] <= epoch]
        if len(hist) < epoch or any(m.get("acc") is None for m in hist):
            sys.exit("%s: want %d evaluated epochs with labels, found %d" % (run, epoch, len(hist)))
        last = hist[-1]
        row = [run, str(len(last.get("heads", [])) or 1), "%.4f" % last["acc"], "%.4f" % (sum(m["acc"] for m in hist) / len(hist))]
        if "heads" in last:
            accs = [h["acc"] for h in last["heads"]]
            rank = 1 + sum(a > accs[last["head"]] for a in accs)
            agree_ranks, acc_ranks = [], []
            for m in hist:
                agree_ranks += list(rankdata([h["agreement"] for h in m["heads"]]))
                acc_ranks += list(rankdata([h["acc"] for h in m["heads"]]))
            rho = spearmanr(agree_ranks, acc_ranks).correlation
            row += ["%.4f" % max(accs), "%.4f" % (sum(accs) / len(accs)), "%d of %d" % (rank, len(accs)), "%+.2f" % rho]
        else:
            row += ["", "", "", ""]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
