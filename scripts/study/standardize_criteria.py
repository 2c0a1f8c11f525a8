"""standardize_criteria.py EMCLUST OUTDIR: can the EM objective, the mean max posterior
or the mixture log-likelihood of a finished run choose whether to standardise a table
(issue 14)?

Sections 25 and 30 asked this of the agreement between runs and of silhouettes, which
look at the clustering; these criteria come from the network's output side (the
relevance normalisation makes them comparable across input scalings, in principle).
For the four embedded tables and the five of data/heldout, it trains the default
run (ten restarts of each network, kept as `emclust train` keeps them) for seeds
1, 11, 21, 31, 41, once standardised and once raw:
    emclust train --dataset T | --data F --label-col label --seed S
        --standardize=true|false --kmeans=false --quiet --out OUTDIR/T-S-true|false
and prints per table the mean ACC of each choice, of the spread rule's (section 17),
and of the choice each criterion of summary.json makes: the lower EM objective, the
higher mean max posterior, the higher log-likelihood. Runs already in OUTDIR are
reused.

Standard library only."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HELDOUT = os.path.join(HERE, "..", "..", "data", "heldout")
SEEDS = [1, 11, 21, 31, 41]
# The spread rule's choice on each table (sections 25 and 29): standardised or not.
RULE = {"digits": False, "wine": True, "iris": False, "breast-cancer": True, "glass": False,
        "ionosphere": False, "sonar": False, "vehicle": True, "satellite": False}


def summary(emclust, out, table, seed, std):
    d = os.path.join(out, f"{table}-{seed}-{'true' if std else 'false'}")
    if not os.path.exists(os.path.join(d, "summary.json")):
        src = ["--dataset", table]
        if table not in ("digits", "wine", "iris", "breast-cancer"):
            src = ["--data", os.path.join(HELDOUT, table + ".csv.gz"), "--label-col", "label"]
        subprocess.run([emclust, "train", *src, "--seed", str(seed), f"--standardize={'true' if std else 'false'}",
                        "--kmeans=false", "--quiet", "--out", d], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(d, "summary.json")) as f:
        s = json.load(f)
    c = s["criteria"]
    return {"acc": s["scores"]["acc"], "em": c["em_objective"], "mp": c["max_posterior"], "ll": c["log_likelihood"]}


def main():
    emclust, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    picks = {  # which of the two runs each criterion keeps
        "EM objective": lambda s, r: s if s["em"] < r["em"] else r,
        "max posterior": lambda s, r: s if s["mp"] > r["mp"] else r,
        "log-likelihood": lambda s, r: s if s["ll"] > r["ll"] else r,
    }
    print("| table | standardised | raw | the spread rule | " + " | ".join(picks) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(picks))
    totals = [0.0] * (3 + len(picks))
    for table, rule in RULE.items():
        pairs = [(summary(emclust, out, table, s, True), summary(emclust, out, table, s, False)) for s in SEEDS]
        mean = lambda f: sum(f(s, r)["acc"] for s, r in pairs) / len(pairs)
        row = [mean(lambda s, r: s), mean(lambda s, r: r), mean(lambda s, r: s if rule else r)]
        row += [mean(p) for p in picks.values()]
        totals = [t + v for t, v in zip(totals, row)]
        print(f"| {table} | " + " | ".join(f"{v:.4f}" for v in row) + " |", flush=True)
    print("| mean | " + " | ".join(f"{t / len(RULE):.4f}" for t in totals) + " |")


if __name__ == "__main__":
    main()
