"""Ten classes as rays from the origin in 2-d, of very different lengths: points like
those a classifier's 2-d bottleneck makes (docs/figures/2d-space.png, the Fashion-MNIST
points of docs/RESULTS.md sections 21 and 29), where a linear map with a learned prior
empties clusters. Writes OUT/rays.csv (x, y, label), 20 000 rows.

    python3 scripts/study/rays2d.py OUT [SEED]
"""
import os
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
k, n = 10, 20000
angles = np.sort(rng.uniform(0, 2 * np.pi, k))
lengths = np.exp(rng.uniform(np.log(10), np.log(120), k))
x, y = [], []
for c in range(k):
    m = n // k
    r = np.abs(rng.normal(0, lengths[c], m))
    a = angles[c] + rng.normal(0, 0.12, m)
    x.append(np.stack([r * np.cos(a), r * np.sin(a)], 1) + rng.normal(0, 1.5, (m, 2)))
    y += [c] * m
x = np.concatenate(x)
y = np.array(y)
order = rng.permutation(len(y))
with open(os.path.join(out, "rays.csv"), "w") as f:
    f.write("x,y,label\n")
    for (a, b), c in zip(x[order], y[order]):
        f.write(f"{a:.4f},{b:.4f},{c}\n")
