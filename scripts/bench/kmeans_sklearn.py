#!/usr/bin/env python3
"""kmeans_sklearn.py [--dir D] [--seeds 1,2] [--threads N]: time scikit-learn's KMeans
(n_init=10, its defaults otherwise) on the 70 000 Fashion-MNIST images as pixels scaled
to [0, 1], the features `emclust compare --dataset fashion-mnist --methods kmeans`
clusters, and print one JSON line per seed: seconds per fit and inertia.

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
    a = ap.parse_args()
    if a.threads:
        from threadpoolctl import threadpool_limits
        threadpool_limits(a.threads)
    x = np.concatenate([idx_images(find(a.dir, s + "-images-idx3-ubyte")) for s in ("train", "t10k")])
    x = x.astype(np.float32) / 255
    for seed in (int(s) for s in a.seeds.split(",")):
        t0 = time.perf_counter()
        km = KMeans(n_clusters=10, n_init=10, random_state=seed).fit(x)
        print(json.dumps({"impl": "scikit-learn", "version": sklearn.__version__, "seed": seed, "n": len(x),
                          "seconds": time.perf_counter() - t0, "inertia": float(km.inertia_),
                          "iters": int(km.n_iter_)}), flush=True)


if __name__ == "__main__":
    main()
