"""Twelve Gaussian blobs of unequal size (333 to 5000 of 20 000 rows) in 128
dimensions: a user's embeddings where groups differ in size (docs/RESULTS.md
sections 72 and 73). Writes OUT/emb.npy (float32 rows), OUT/truth.txt (one class a
line) and OUT/emb.csv (the rows as f0..f127 and a last column label). SEED (0 when
not given) draws the centres, spreads and sizes.

    python3 scripts/study/unequal_blobs.py OUT [SEED]
    emclust train --data OUT/emb.npy --k 12 --out runs/blobs
    emclust score --truth OUT/truth.txt --pred runs/blobs/assignments.csv
"""
import os
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
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
with open(os.path.join(out, "emb.csv"), "w") as f:
    f.write(",".join(f"f{j}" for j in range(d)) + ",label\n")
    for row, c in zip(x[order], y[order]):
        f.write(",".join(f"{v:.7g}" for v in row) + f",{c}\n")
print("sizes", sizes.tolist())
