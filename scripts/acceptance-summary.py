#!/usr/bin/env python3
"""acceptance-summary.py OUTDIR DEVICE: gather what scripts/gpu-acceptance.sh left in
OUTDIR into OUTDIR/results.json, and print the figures for docs/RESULTS.md.

The fraction of the dense peak divides achieved TFLOP/s by the GPU's dense tensor-core
peak for the step's arithmetic: bf16 for --precision bf16, TF32 for fp32 (PyTorch lets
cuDNN convolutions use TF32 by default). Standard library only: the GPU machine has
no network to install anything.
"""
import glob
import json
import math
import os
import re
import sys

# Dense (no sparsity) peaks in TFLOP/s from NVIDIA's data sheets: (bf16, tf32).
PEAKS = [
    (r"H200", (989.4, 494.7)),
    (r"H100.*(SXM|HBM3)", (989.4, 494.7)),
    (r"H100.*NVL", (835.0, 417.5)),
    (r"H100", (756.0, 378.0)),  # PCIe
    (r"A100", (312.0, 156.0)),
    (r"L40S", (362.0, 183.0)),
]


def peak_for(gpu, precision):
    for pat, (bf16, tf32) in PEAKS:
        if gpu and re.search(pat, gpu):
            return bf16 if precision == "bf16" else tf32
    return None


def jsonl(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except (OSError, ValueError):
        return []


def fmt(v):
    return "%.4f" % v if v is not None else "-"


def train_run(d, speed):
    """One run of the train step: its epochs, their median time, the GFLOP rate of
    the emclust bench row of the same model and arithmetic, and its last epoch and
    the epoch it keeps as chosen (the highest agreement, the first of equals)."""
    epochs = jsonl(os.path.join(d, "metrics.jsonl"))
    run = {"dir": os.path.basename(d), "seed": None,
           "epochs": [{k: e.get(k) for k in ("epoch", "steps", "seconds", "acc", "nmi", "ari", "agreement")} for e in epochs]}
    if not epochs:
        return run
    cfg = {}
    try:
        cfg = json.load(open(os.path.join(d, "config.json")))
    except (OSError, ValueError):
        pass
    run["seed"] = cfg.get("seed")
    prec = cfg.get("precision", "fp32")
    cl = bool(cfg.get("channels_last", False))
    bench = next((r for r in speed if r["impl"] == "emclust" and r["arch"] == "mnist"
                  and r["objective"] == "twofold" and (r["precision"] or "fp32") == prec
                  and bool(r["channels_last"]) == cl and r["gflop_per_step"]), None)
    secs = [e["seconds"] for e in epochs[1:]] or [epochs[0]["seconds"]]  # the first epoch warms up
    run["median_epoch_seconds"] = sorted(secs)[len(secs) // 2]
    run["precision"], run["channels_last"] = prec, cl
    if bench:
        run["achieved_tflops"] = bench["gflop_per_step"] * epochs[-1]["steps"] / run["median_epoch_seconds"] / 1000
    keys = ("epoch", "acc", "nmi", "ari", "agreement")
    run["last"] = {k: epochs[-1].get(k) for k in keys}
    # As train's Chosen.AgreesMore: of the epochs with an agreement, fewest clusters
    # empty first, then the highest agreement (the first of equals).
    chosen = None
    for e in epochs:
        if e.get("agreement") is None:
            continue
        rank = (-e.get("empty_clusters", 0), e["agreement"])
        if chosen is None or rank > (-chosen.get("empty_clusters", 0), chosen["agreement"]):
            chosen = e
    run["chosen"] = {k: chosen.get(k) for k in keys} if chosen else None
    return run


def main():
    out, device = sys.argv[1], sys.argv[2]
    res = {"device": device, "steps": jsonl(os.path.join(out, "steps.jsonl"))}
    try:
        devices = open(os.path.join(out, "devices.txt")).read().splitlines()
    except OSError:
        devices = []
    res["devices"] = devices
    gpu = next((l.split(" ", 1)[1].rsplit(",", 1)[0] for l in devices if l.startswith("cuda:") and " " in l), None)
    res["gpu"] = gpu

    tests = []
    try:
        for line in open(os.path.join(out, "tests.tsv")):
            name, status, secs = line.split("\t")
            tests.append({"package": name, "status": status, "seconds": int(secs)})
    except OSError:
        pass
    res["tests"] = tests

    speed = []
    for raw in sorted(glob.glob(os.path.join(out, "speed-*", "raw.jsonl"))):
        for r in jsonl(raw):
            row = {k: r.get(k) for k in ("impl", "arch", "objective", "precision", "channels_last", "device",
                                         "ms_per_step", "gflop_per_step", "achieved_tflops")}
            pk = peak_for(gpu, r.get("precision", "fp32")) if device == "cuda" else None
            tf = r.get("achieved_tflops")
            if tf is None and r.get("gflop_per_step") and r.get("ms_per_step"):
                tf = r["gflop_per_step"] / r["ms_per_step"]  # GFLOP/ms = TFLOP/s
                row["achieved_tflops"] = tf
            row["fraction_of_dense_peak"] = tf / pk if pk and tf else None
            speed.append(row)
    res["speed"] = speed

    parity = jsonl(os.path.join(out, "parity", "raw.jsonl"))
    res["parity"] = [{"mode": r.get("mode"), "seed": r.get("seed"), "scores": r.get("summary", {}).get("scores")}
                     for r in parity]

    # The train step's runs, side by side, each in OUTDIR/train-sSEED.
    dirs = sorted(glob.glob(os.path.join(out, "train-s*")), key=lambda d: int(re.sub(r"\D", "", os.path.basename(d)) or 0))
    runs = [train_run(d, speed) for d in dirs]
    runs = [r for r in runs if r["epochs"]]
    train = {"runs": runs}
    if runs:
        # The GPU's work is the runs' together: their rates add up.
        tfs = [r.get("achieved_tflops") for r in runs]
        if all(tfs):
            train["achieved_tflops"] = sum(tfs)
            pk = peak_for(gpu, runs[0]["precision"]) if device == "cuda" else None
            train["fraction_of_dense_peak"] = sum(tfs) / pk if pk else None
        for k in ("last", "chosen"):
            accs = [r[k]["acc"] for r in runs if r.get(k) and r[k].get("acc") is not None]
            if len(accs) == len(runs):
                train["mean_%s_acc" % k] = sum(accs) / len(accs)
    res["train"] = train
    res["ok"] = all(s["status"] in ("ok", "skipped") for s in res["steps"]) and bool(res["steps"])

    with open(os.path.join(out, "results.json.tmp"), "w") as f:
        json.dump(res, f, indent=1)
    os.replace(os.path.join(out, "results.json.tmp"), os.path.join(out, "results.json"))

    print("\n## acceptance summary (%s%s)" % (device, ", " + gpu if gpu else ""))
    for s in res["steps"]:
        print("- %s: %s, %d s: %s" % (s["step"], s["status"], s["seconds"], s["detail"]))
    for r in speed:
        if r["impl"] == "emclust":
            f = r["fraction_of_dense_peak"]
            print("- speed %s %s %s %s: %.2f ms/step%s" % (r["arch"], r["objective"], r["precision"],
                  "-" if r["arch"] == "mlp" else "NHWC" if r["channels_last"] else "NCHW", r["ms_per_step"],
                  ", %.1f%% of dense peak" % (100 * f) if f else ""))
    for r in train["runs"]:
        ch = r.get("chosen") or {}
        print("- train seed %s: %d epochs, median %.1f s/epoch, last epoch ACC %s, chosen epoch %s ACC %s" % (
            r["seed"], len(r["epochs"]), r["median_epoch_seconds"], fmt(r["last"].get("acc")),
            ch.get("epoch", "-"), fmt(ch.get("acc"))))
    if train.get("fraction_of_dense_peak"):
        print("- train: %.1f%% of dense peak, the runs together" % (100 * train["fraction_of_dense_peak"]))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
