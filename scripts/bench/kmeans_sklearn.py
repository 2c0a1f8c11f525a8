#!/usr/bin/env python3
"""kmeans_sklearn.py [--dir D] [--seeds 1,2] [--threads N] [--standardize]: time scikit-learn's KMeans
(n_init=10, its defaults otherwise) on the 70 000 Fashion-MNIST images as pixels scaled
to [0, 1], the features `emclust compare --dataset fashion-mnist --methods kmeans`
clusters, and print one JSON line per seed: seconds per fit, inertia, and the scores
against the labels (ACC by the Hungarian matching, NMI, ARI), an independent check of
emclust's baseline.

Debian: apt-get install python3-sklearn (for /usr/bin/python3)."""
import argparse
import gzip
import json
import os
import struct
import sys
import time

try:
    import numpy as np
    from sklearn.cluster import KMeans
    import sklearn
except ImportError as e:
    sys.exit("kmeans_sklearn.py: %s: install scikit-learn for %s (Debian: apt-get install python3-sklearn)"
             % (e, sys.executable))


def idx_images(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        b = f.read()
    _, n, h, w = struct.unpack(">IIII", b[:16])
    return np.frombuffer(b, dtype=np.uint8, offset=16).reshape(n, h * w)


def idx_labels(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        b = f.read()
    return np.frombuffer(b, dtype=np.uint8, offset=8).astype(np.int64)


def accuracy(y, c):
    """The share of rows whose cluster maps to their class, under the best one-to-one map."""
    from scipy.optimize import linear_sum_assignment
    k = max(y.max(), c.max()) + 1
    counts = np.zeros((k, k), dtype=np.int64)
    np.add.at(counts, (c, y), 1)
    rows, cols = linear_sum_assignment(-counts)
    return counts[rows, cols].sum() / len(y)


def find(d, name):
    for p in (os.path.join(d, name), os.path.join(d, name + ".gz")):
        if os.path.exists(p):
            return p
    sys.exit("kmeans_sklearn.py: no %s in %s" % (name, d))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--threads", type=int, default=0, help="OpenMP threads (0: all cores)")
    ap.add_argument("--standardize", action="store_true", help="z-score each pixel (a constant one is left at 0)")
    a = ap.parse_args()
    if a.threads:
        from threadpoolctl import threadpool_limits
        threadpool_limits(a.threads)
    x = np.concatenate([idx_images(find(a.dir, s + "-images-idx3-ubyte")) for s in ("train", "t10k")])
    x = x.astype(np.float32) / 255
    if a.standardize:
        sd = x.std(axis=0)
        x = (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1)
    y = np.concatenate([idx_labels(find(a.dir, s + "-labels-idx1-ubyte")) for s in ("train", "t10k")])
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
    for seed in (int(s) for s in a.seeds.split(",")):
        t0 = time.perf_counter()
        km = KMeans(n_clusters=10, n_init=10, random_state=seed).fit(x)
        print(json.dumps({"impl": "scikit-learn", "version": sklearn.__version__, "seed": seed, "n": len(x),
                          "standardized": a.standardize,
                          "seconds": time.perf_counter() - t0, "inertia": float(km.inertia_),
                          "iters": int(km.n_iter_), "acc": accuracy(y, km.labels_),
                          "nmi": normalized_mutual_info_score(y, km.labels_),
                          "ari": adjusted_rand_score(y, km.labels_)}), flush=True)


if __name__ == "__main__":
    main()
