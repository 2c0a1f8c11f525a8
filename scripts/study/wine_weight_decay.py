"""wine_weight_decay.py [WD ...]: does weight decay move wine's fixed point (issue 14)?

Section 30 found that the linear map with a learned prior settles on wine at 7 rows
wrong (0.9607), a row behind k-means, whatever the seed, γ or length. Weight decay
is the one regulariser it did not try. This trains that network with
wine_objective.py's train() (DESIGN.md's equations, seeds 1-10), with Adam's L2
penalty and with AdamW's decoupled decay at each WD, for 1000 and 3000 steps, and
prints the mean, min and max ACC (Hungarian matching, scipy; the training sees no
labels).
Needs numpy, scipy and torch (Debian's python3-numpy, -scipy, -torch); run it from
scripts/study."""
import os
import sys

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from keep_by import EMBEDDED, table
from wine_objective import train


def acc(ids, truth, k):
    m = np.zeros((k, k))
    for a, b in zip(ids, truth):
        m[a, b] += 1
    r, c = linear_sum_assignment(-m)
    return m[r, c].sum() / len(truth)


def main():
    torch.set_num_threads(1)
    x, names = table(os.path.join(EMBEDDED, "wine.csv.gz"))
    truth = np.unique(np.array(names), return_inverse=True)[1]
    k = truth.max() + 1
    z = (x - x.mean(0)) / x.std(0)
    for steps in (1000, 3000):
        for wd in [float(a) for a in sys.argv[1:]] or [0, 0.01, 0.1, 1]:
            for decoupled in (True, False):
                make = torch.optim.AdamW if decoupled else torch.optim.Adam
                opt = lambda params: make(params, 1e-3, weight_decay=wd)  # noqa: E731
                accs = [acc(train(z, k, s, steps, optimiser=opt), truth, k) for s in range(1, 11)]
                print(f"{steps} steps, {'AdamW' if decoupled else 'Adam L2'} {wd:g}: "
                      f"{np.mean(accs):.4f} ({min(accs):.4f}-{max(accs):.4f})", flush=True)


if __name__ == "__main__":
    main()
