"""linear_net.py EMCLUST OUTDIR [SEEDS]: the MLP or a linear map for the relevance
scores, and can the agreement between runs choose between them (issue 14)?

For each embedded table and each network (the default MLP 32,32 and `--hidden none`),
trains one run per seed 1..SEEDS (default 30),
    emclust compare --dataset T --methods em --hidden H --restarts 1 --seeds SEEDS --out D
writes each run's clustering with `emclust predict`, and for each group of ten seeds
(1-10, 11-20, ...) prints the ACC of three choices: the medoid (highest mean adjusted
Rand index with the others) of the MLP's ten, of the linear map's ten, and of all
twenty pooled. ACC comes from `emclust eval`; the script itself needs no labels.

Standard library only."""
import csv
import json
import os
import subprocess
import sys
from collections import Counter

TABLES = ["digits", "iris", "wine", "breast-cancer"]
NETS = {"mlp": "32,32", "linear": "none"}


def pairs(n):
    return n * (n - 1) / 2


def ari(a, b):
    """Adjusted Rand index of two clusterings (Hubert and Arabie)."""
    both = sum(pairs(v) for v in Counter(zip(a, b)).values())
    sa = sum(pairs(v) for v in Counter(a).values())
    sb = sum(pairs(v) for v in Counter(b).values())
    expected = sa * sb / pairs(len(a))
    top = (sa + sb) / 2
    return 1.0 if top == expected else (both - expected) / (top - expected)


def runs(emclust, out, table, net, seeds):
    d = os.path.join(out, f"{table}-{net}")
    if not os.path.exists(os.path.join(d, "compare.json")):
        subprocess.run([emclust, "compare", "--dataset", table, "--methods", "em", "--hidden", NETS[net],
                        "--restarts", "1", "--seeds", str(seeds), "--device", "cpu", "--quiet", "--out", d],
                       check=True, stdout=subprocess.DEVNULL)
    out = []
    for s in range(1, seeds + 1):
        model, f = os.path.join(d, f"em-s{s}"), os.path.join(d, f"a-s{s}.csv")
        if not os.path.exists(f):
            subprocess.run([emclust, "predict", "--model", model, "--out", f], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(f) as fh:
            out.append((model, [int(r["cluster"]) for r in csv.DictReader(fh)]))
    return out


def medoid(group):
    mean = [sum(ari(a[1], b[1]) for j, b in enumerate(group) if j != i) / (len(group) - 1)
            for i, a in enumerate(group)]
    i = max(range(len(group)), key=mean.__getitem__)
    return group[i][0], sum(mean) / len(mean)


def acc(emclust, model):
    line = subprocess.run([emclust, "eval", "--model", model], check=True, capture_output=True, text=True).stdout
    return float(line.split()[1])


def main():
    emclust, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    print("| table | seeds | MLP medoid (mean agreement) | linear medoid (mean agreement) | pooled medoid |")
    print("|---|---|---|---|---|")
    for table in TABLES:
        got = {net: runs(emclust, out, table, net, seeds) for net in NETS}
        for g in range(0, seeds - 9, 10):
            m, ma = medoid(got["mlp"][g:g + 10])
            l, la = medoid(got["linear"][g:g + 10])
            p, _ = medoid(got["mlp"][g:g + 10] + got["linear"][g:g + 10])
            kind = "linear" if "-linear" in p else "MLP"
            print(f"| {table} | {g + 1}-{g + 10} | {acc(emclust, m):.4f} ({ma:.3f}) | {acc(emclust, l):.4f} ({la:.3f}) "
                  f"| {acc(emclust, p):.4f} ({kind}) |", flush=True)
        for net in NETS:
            with open(os.path.join(out, f"{table}-{net}", "compare.json")) as fh:
                m = json.load(fh)["methods"][0]["acc"]
            print(f"| {table} | one run, {net} | mean {m['mean']:.4f} ± {m['margin']:.4f} | | |")


if __name__ == "__main__":
    main()
