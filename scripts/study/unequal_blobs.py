"""Twelve Gaussian blobs of unequal size (333 to 5000 of 20 000 rows) in 128
dimensions: a user's embeddings where groups differ in size (docs/RESULTS.md
section 72). Writes OUT/emb.npy (float32 rows) and OUT/truth.txt (one class a line).

    python3 scripts/study/unequal_blobs.py OUT
    emclust train --data OUT/emb.npy --k 12 --out runs/blobs
    emclust score --truth OUT/truth.txt --pred runs/blobs/assignments.csv
"""
import os
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
k, d, n = 12, 128, 20000
weights = np.array([1, 1, 2, 2, 3, 3, 4, 5, 6, 8, 10, 15], float)
sizes = rng.multinomial(n, weights / weights.sum())
centres = rng.normal(0, 1, (k, d)) * 0.9
x, y = [], []
for c, size in enumerate(sizes):
    x.append(centres[c] + rng.normal(0, 0.5, (size, d)) * rng.uniform(0.7, 1.3))
    y += [c] * size
x = np.concatenate(x).astype(np.float32)
y = np.array(y)
order = rng.permutation(n)
np.save(os.path.join(out, "emb.npy"), x[order])
np.savetxt(os.path.join(out, "truth.txt"), y[order], fmt="%d")
print("sizes", sizes.tolist())
