"""vector_noise.py [SIGMA ...]: does the paper's EM loss with augmentation help on
tables, with Gaussian noise as the transform (issue 14)?

Images train on the EM loss of the original batch plus that of a transformed one,
weighted by the original's posteriors (shared/DESIGN.md, Eq. em_loss_aug). Vectors
have no transform. Here the transform is x + σ·s·ε, ε ~ N(0, 1), s each feature's
standard deviation in the features as trained (1 where standardised). Both networks
of the vector default are trained in plain PyTorch, as wine_objective.py trains the
linear map, and the MLP with the noise: the MLP (2×32, uniform prior) and the linear
map with a learned prior, Adam 1e-3, batch 128, 1000 steps, γ 5. Each table keeps
the standardisation the spread rule gives it (docs/RESULTS.md section 29).

It prints, per table and σ, the MLP's mean ACC over seeds 1-20, and the default rule
replayed over two groups of ten seeds: each network's medoid by agreement (mean
adjusted Rand index with the other nine), then of the two the one that uses more
clusters, then of higher silhouette on the features as trained. The noise is the
MLP's only; the linear map's runs are the same at every σ. ACC comes from the
Hungarian matching here; the training sees no labels.

Needs Debian's python3-torch, python3-scipy and python3-sklearn; run it from
scripts/study. About 5 minutes a σ on one core."""
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, silhouette_score

from keep_by import EMBEDDED, table
from standardize_agreement import HELDOUT
from wine_objective import normalise

# name: (folder, has a header, standardised by the spread rule)
TABLES = {
    "digits": (EMBEDDED, False, False), "wine": (EMBEDDED, True, True),
    "iris": (EMBEDDED, True, False), "breast-cancer": (EMBEDDED, True, True),
    "glass": (HELDOUT, True, False), "ionosphere": (HELDOUT, True, False),
    "sonar": (HELDOUT, True, False), "vehicle": (HELDOUT, True, True),
    "satellite": (HELDOUT, True, False),
}


def features(name):
    folder, header, std = TABLES[name]
    x, labels = table(os.path.join(folder, name + ".csv.gz"), header)
    truth = np.unique(labels, return_inverse=True)[1]
    sd = x.std(0)
    sd[sd < 1e-6] = 1
    if std:
        x, sd = (x - x.mean(0)) / sd, np.ones_like(sd)
    return x.astype(np.float32), truth, sd.astype(np.float32)


def acc(ids, truth):
    k = max(ids.max(), truth.max()) + 1
    m = np.zeros((k, k))
    np.add.at(m, (ids, truth), 1)
    r, c = linear_sum_assignment(-m)
    return m[r, c].sum() / len(truth)


def train(x, k, sd, seed, net, sigma=0.0, steps=1000, gamma=5.0):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    x, sd = torch.tensor(x), torch.tensor(sd)
    d = x.shape[1]
    if net == "mlp":
        m = torch.nn.Sequential(torch.nn.Linear(d, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                                torch.nn.ReLU(), torch.nn.Linear(32, k))
    else:
        m = torch.nn.Linear(d, k)
    opt = torch.optim.Adam(m.parameters(), 1e-3)
    prior = torch.full((1, k), 1.0 / k)
    for _ in range(steps):
        xb = x[torch.randperm(len(x), generator=g)[:128]]
        a = normalise(m(xb))
        p = torch.softmax(a + prior.log(), 1).detach()
        loss = -(p * F.logsigmoid(a / gamma)).sum(1).mean()
        if sigma > 0:
            xt = xb + sigma * sd * torch.randn(xb.shape, generator=g)
            loss = loss - (p * F.logsigmoid(normalise(m(xt)) / gamma)).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if net == "linear":
            prior = 0.99 * prior + 0.01 * p.mean(0, keepdim=True)
    with torch.no_grad():
        return (normalise(m(x)) + prior.log()).argmax(1).numpy()


def medoid(runs):
    agree = [np.mean([adjusted_rand_score(r, q) for j, q in enumerate(runs) if j != i]) for i, r in enumerate(runs)]
    return runs[int(np.argmax(agree))]


def main():
    torch.set_num_threads(1)
    sigmas = [float(s) for s in sys.argv[1:]] or [0.0, 0.3]
    print("| table | σ | MLP, one run | MLP kept | linear kept | rule's choice | networks chosen |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name in TABLES:
        x, truth, sd = features(name)
        k = truth.max() + 1
        linear = [train(x, k, sd, s, "linear") for s in range(1, 21)]
        for sigma in sigmas:
            t0 = time.time()
            mlp = [train(x, k, sd, s, "mlp", sigma) for s in range(1, 21)]
            kept = {"mlp": [], "linear": [], "rule": [], "picks": []}
            for g in (0, 10):
                pair = {"mlp": medoid(mlp[g:g + 10]), "linear": medoid(linear[g:g + 10])}
                rank = lambda n: (len(np.unique(pair[n])), silhouette_score(x, pair[n]) if len(np.unique(pair[n])) > 1 else -1)
                pick = max(pair, key=rank)
                kept["mlp"].append(acc(pair["mlp"], truth))
                kept["linear"].append(acc(pair["linear"], truth))
                kept["rule"].append(acc(pair[pick], truth))
                kept["picks"].append(pick)
            print(f"| {name} | {sigma:g} | {np.mean([acc(r, truth) for r in mlp]):.4f} | {np.mean(kept['mlp']):.4f} | "
                  f"{np.mean(kept['linear']):.4f} | {np.mean(kept['rule']):.4f} | {', '.join(kept['picks'])} |"
                  f" <!-- {time.time() - t0:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
