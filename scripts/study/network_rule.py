"""network_rule.py EMCLUST OUT NAME=SOURCE ...: which network should `--hidden auto`
keep where the groups differ in size (issue 14, docs/RESULTS.md section 73)?

Section 29's rule keeps, of the MLP's and the linear map's kept restarts, the one
whose clustering uses more clusters, then has the higher silhouette. It guards the
2-d Fashion-MNIST points, where the linear map's learned prior empties half the
clusters, but on groups of unequal size it drops a linear map that leaves one of
twelve empty (section 72). This script replays other rules on the same runs.

For each SOURCE (an embedded table's name, or a CSV whose class column is `label`) it
runs, into OUT/NAME-def, OUT/NAME-lin and OUT/NAME-mlp (kept where they exist),
    EMCLUST compare --methods em --seeds SEEDS           (the defaults)
    ... --hidden none --prior learned                   (the linear map alone)
    ... --hidden 32,32                                  (the MLP alone)
reads from each default run's checkpoint both networks' silhouettes and clusters used,
and prints for each rule the mean ACC of the network it keeps, each network's ACC
being its own run's for the seed (the same restarts, so the same clustering but for
the stacked restarts' arithmetic). SEEDS is $SEEDS, or 10.

Rules: `used, silhouette` (section 29); `silhouette` alone; `silhouette, f` for f in
FRACTIONS: the higher silhouette among the networks using at least f·K clusters, or
section 29's rule where neither does."""
import json
import os
import struct
import subprocess
import sys

SEEDS = int(os.environ.get("SEEDS", "10"))
FRACTIONS = (0.5, 2 / 3, 0.7, 0.75, 0.9)
CONFIGS = {"def": [], "lin": ["--hidden", "none", "--prior", "learned"], "mlp": ["--hidden", "32,32"]}


def metadata(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__", {})


def run(emclust, out, name, source):
    src = ["--dataset", source] if "/" not in source else ["--data", source, "--label-col", "label"]
    for tag, extra in CONFIGS.items():
        d = os.path.join(out, f"{name}-{tag}")
        if os.path.exists(os.path.join(d, "compare.json")):
            continue
        cmd = [emclust, "compare", *src, "--methods", "em", "--seeds", str(SEEDS), "--out", d, *extra]
        with open(d + ".log", "w") as log:
            subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)


def accs(d):
    return {r["seed"]: r["acc"] for r in json.load(open(os.path.join(d, "compare.json")))["runs"]}


def keep(net, k, fraction):
    """The network a rule keeps of net = {name: (clusters used, silhouette)}."""
    by_used = max(net, key=lambda n: net[n])
    if fraction is None:
        return by_used
    ok = [n for n in net if net[n][0] >= fraction * k]
    return max(ok, key=lambda n: net[n][1]) if ok else by_used


def study(out, name):
    d = os.path.join(out, name)
    own = {"linear": accs(d + "-lin"), "mlp": accs(d + "-mlp")}
    default = accs(d + "-def")
    rules = {"used, silhouette": None, "silhouette": 0.0}
    rules.update({f"silhouette, {f:.2f}": f for f in FRACTIONS})
    kept = {r: [] for r in rules}
    notes = []
    for s in sorted(default):
        run_dir = os.path.join(d + "-def", f"em-s{s}")
        k = json.load(open(os.path.join(run_dir, "config.json")))["k"]
        state = json.loads(metadata(os.path.join(run_dir, "checkpoint.safetensors"))["state"])
        net = {r["network"]: (r["network_clusters"], r["network_silhouette"])
               for r in state["restarts"] if r.get("network_silhouette") is not None}
        if len(net) < 2:
            continue
        for r, f in rules.items():
            kept[r].append(own[keep(net, k, f)][s])
        if net["linear"][0] != net["mlp"][0]:
            notes.append(f"s{s}: linear {net['linear'][0]}/{k} sil {net['linear'][1]:.3f} "
                         f"acc {own['linear'][s]:.4f}, mlp {net['mlp'][0]}/{k} sil "
                         f"{net['mlp'][1]:.3f} acc {own['mlp'][s]:.4f}")
    n = len(kept["silhouette"])
    mean = lambda xs: sum(xs) / len(xs)
    row = [name, f"{n}", f"{mean(list(default.values())):.4f}",
           f"{mean(list(own['linear'].values())):.4f}", f"{mean(list(own['mlp'].values())):.4f}"]
    row += [f"{mean(v):.4f}" for v in kept.values()]
    return rules, row, notes


def main():
    emclust, out, sources = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    rows, all_notes = [], []
    for spec in sources:
        name, source = spec.split("=", 1)
        run(emclust, out, name, source)
        rules, row, notes = study(out, name)
        rows.append(row)
        all_notes += [f"{name} {x}" for x in notes]
        print(" | ".join(row), flush=True)
    head = ["table", "seeds", "default", "linear", "MLP", *rules]
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print("\nseeds where the networks used different numbers of clusters:")
    print("\n".join(all_notes))


if __name__ == "__main__":
    main()
