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

    epochs = jsonl(os.path.join(out, "train", "metrics.jsonl"))
    train = {"epochs": [{k: e.get(k) for k in ("epoch", "steps", "seconds", "acc", "nmi", "ari")} for e in epochs]}
    if epochs:
        # GFLOP of one step from the emclust bench row of the same model and arithmetic.
        cfg = {}
        try:
            cfg = json.load(open(os.path.join(out, "train", "config.json")))
        except (OSError, ValueError):
            pass
        prec = cfg.get("precision", "fp32")
        cl = bool(cfg.get("channels_last", False))
        bench = next((r for r in speed if r["impl"] == "emclust" and r["arch"] == "mnist"
                      and r["objective"] == "twofold" and (r["precision"] or "fp32") == prec
                      and bool(r["channels_last"]) == cl and r["gflop_per_step"]), None)
        secs = [e["seconds"] for e in epochs[1:]] or [epochs[0]["seconds"]]  # the first epoch warms up
        train["median_epoch_seconds"] = sorted(secs)[len(secs) // 2]
        train["precision"], train["channels_last"] = prec, cl
        if bench:
            steps = epochs[-1]["steps"]
            tf = bench["gflop_per_step"] * steps / train["median_epoch_seconds"] / 1000
            train["achieved_tflops"] = tf
            pk = peak_for(gpu, prec) if device == "cuda" else None
            train["fraction_of_dense_peak"] = tf / pk if pk else None
        last = epochs[-1]
        train["last"] = {k: last.get(k) for k in ("epoch", "acc", "nmi", "ari")}
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
    if epochs:
        print("- train: %d epochs, median %.1f s/epoch%s, last epoch ACC %s" % (
            len(epochs), train["median_epoch_seconds"],
            ", %.1f%% of dense peak" % (100 * train["fraction_of_dense_peak"]) if train.get("fraction_of_dense_peak") else "",
            "%.4f" % last["acc"] if last.get("acc") is not None else "-"))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
