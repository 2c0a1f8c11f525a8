#!/usr/bin/env python3
"""The Python PyTorch peer of `emclust bench`: the same training step, written the way a
PyTorch user would write it, timed the same way, printed as the same JSON fields.

What is the same as emclust (see model/model.go, loss/loss.go, train/train.go,
transform/*.go, cmd_bench.go):

- networks: the MLP 64→32→32→K and the CNNs of the paper's Table net_archi
  (C = 3×3 conv pad 1 without bias + BatchNorm2d + ReLU, M = 2×2 max-pool,
  F = Linear (+ ReLU except the last)), then the relevance normalisation, a
  BatchNorm1d(K, affine=False); the parameter counts match emclust's
  (mlp 3466, mnist 772458, cifar 1309578, stl10 2695050 at K = 10);
- objectives: em (EM loss), em-aug (EM loss with augmentation, γ = 5), iic, and
  twofold (EM-aug step with Adam A, then the KL step with Adam B over the same
  parameters, with fresh detached posteriors of x under the updated θ);
- optimisers: torch.optim.Adam, lr 1e-3 (mlp), 5e-5 (A) and 1e-4 (B) for the CNNs;
- input: uint8 images → float [0,1] → (augment) → grayscale → Sobel x/y planes;
  synthetic data of the paper's shapes, batch 128, warmup steps then timed steps,
  synchronising the GPU only at the ends.

Two ways to feed the step (--aug):

- cpu: a Dataset whose __getitem__ augments and Sobel-filters one image at a time on
  the CPU, in a DataLoader with --num-workers worker processes; batches are then
  copied to the device. With torchvision installed it uses torchvision.transforms
  (RandomResizedCrop, RandomAffine, ColorJitter: what a user would write); without it
  (Debian's python3-torch has none) the same per-image transforms in plain torch ops:
  one affine_grid/grid_sample warp for crop+scale+shift+rotation, ColorJitter's four
  adjustments in a random order with torchvision's HSV hue shift.
- device: the images live on the device and each batch is augmented there with
  batched tensor ops, the same transformation as emclust's transform.Augment.

For mlp there is no augmentation: cpu means a DataLoader over rows of a CPU tensor
(default collate), device means slicing a tensor on the device.

Runs with torch 1.13 (Debian python3-torch, CPU) and PyTorch 2.x (CUDA); it uses only
APIs present in both.

    python3 scripts/bench/reference.py --model mlp,mnist --aug cpu,device --steps 10
"""

import argparse
import json
import math
import os
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    sys.exit("reference.py: %s: PyTorch is not installed for %s "
             "(Debian/Ubuntu: make bench-deps, or apt-get install python3-torch; "
             "elsewhere: pip install torch)" % (e, sys.executable))

# The paper's data sizes: rows per epoch and the input of each model (cmd_bench.go).
SHAPES = {
    "mlp": dict(rows=1797, features=64),
    "mnist": dict(rows=70000, c=1, h=28, w=28),
    "cifar": dict(rows=60000, c=3, h=32, w=32),
    "stl10": dict(rows=13000, c=3, h=96, w=96),
}

PLANS = {
    "mnist": "C64 M C128 M C256 F32 FK",
    "cifar": "C64 C64 M C128 C128 M C256 C256 FK",
    "stl10": "C64 C64 M C128 C128 M C256 C256 M C256 C256 FK",
}

GAMMA = 5.0
LUMA = (0.299, 0.587, 0.114)
SOBEL = [[[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]],
         [[-1.0, -2.0, -1.0], [0.0, 0.0, 0.0], [1.0, 2.0, 1.0]]]

# transform.DefaultAugment
AUG = dict(crop=0.7, scale=0.1, shift=0.1, rotate=15.0,
           brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)


# ---------------------------------------------------------------------------- network

def make_net(arch, k=10, features=64, hidden=(32, 32), h=0, w=0):
    layers = []
    if arch == "mlp":
        d = features
        for width in hidden:
            layers += [nn.Linear(d, width), nn.ReLU(inplace=True)]
            d = width
        layers.append(nn.Linear(d, k))
    else:
        c, flat = 2, False
        for tok in PLANS[arch].split():
            if tok == "M":
                layers.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
            elif tok[0] == "C":
                out = int(tok[1:])
                layers += [nn.Conv2d(c, out, 3, padding=1, bias=False),
                           nn.BatchNorm2d(out), nn.ReLU(inplace=True)]
                c = out
            else:
                if not flat:
                    layers.append(nn.Flatten())
                    flat = True
                if tok == "FK":
                    layers.append(nn.Linear(c * h * w, k))
                else:
                    out = int(tok[1:])
                    layers += [nn.Linear(c * h * w, out), nn.ReLU(inplace=True)]
                    c, h, w = out, 1, 1
    # Relevance normalisation: per-cluster batch standardisation, no affine.
    layers.append(nn.BatchNorm1d(k, affine=False))
    return nn.Sequential(*layers)


def forward_flops(net, h, w):
    """Per-input forward FLOPs, 2 per multiply-add of convs and linears (model/flops.go)."""
    total = 0
    for m in net:
        if isinstance(m, nn.Conv2d):
            total += 2 * m.in_channels * m.out_channels * 9 * h * w
        elif isinstance(m, nn.MaxPool2d):
            h, w = h // 2, w // 2
        elif isinstance(m, nn.Linear):
            total += 2 * m.in_features * m.out_features
    return total


FORWARD_EQUIVALENTS = {"em": 3, "em-aug": 6, "iic": 6, "twofold": 10}


# ---------------------------------------------------------------------------- losses

def em_loss(a, p):
    return -(p * F.logsigmoid(a / GAMMA)).sum() / a.shape[0]


def em_aug_loss(a, at, p):
    return -(p * (F.logsigmoid(a / GAMMA) + F.logsigmoid(at / GAMMA))).sum() / a.shape[0]


def kl_loss(p, at):
    return (p * (torch.log(p.clamp_min(1e-12)) - F.log_softmax(at, 1))).sum() / at.shape[0]


def iic_loss(a, at):
    p, q = F.softmax(a, 1), F.softmax(at, 1)
    joint = p.t() @ q / a.shape[0]
    joint = ((joint + joint.t()) / 2).clamp_min(1e-12)
    pi, pj = joint.sum(1, keepdim=True), joint.sum(0, keepdim=True)
    return -(joint * (joint.log() - pi.log() - pj.log())).sum()


# ---------------------------------------------------------------------------- preprocessing

def gray(x):
    """N×C×H×W (or C×H×W) float → one plane of BT.601 luma."""
    if x.shape[-3] == 1:
        return x
    r, g, b = x.unbind(-3)
    return (LUMA[0] * r + LUMA[1] * g + LUMA[2] * b).unsqueeze(-3)


def sobel(g, kernel):
    """N×1×H×W gray → N×2×H×W (Gx, Gy), zero padding 1."""
    return F.conv2d(g, kernel, padding=1)


def affine_theta(angle, zoom, tx, ty, h, w):
    """N×2×3 sampling maps, as transform.affineTheta (no flip)."""
    cos, sin, inv = torch.cos(angle), torch.sin(angle), 1.0 / zoom
    return torch.stack([
        torch.stack([cos * inv, -sin * (h / w) * inv, tx], -1),
        torch.stack([sin * (w / h) * inv, cos * inv, ty], -1),
    ], -2)


def geometry_params(u, area, cx, cy, sc, sx, sy, ang):
    """Per-image crop/zoom/shift/rotation from uniforms in [0,1] (transform.Augment)."""
    lo = lambda i, a, b: u[..., i] * (b - a) + a
    r = torch.sqrt(lo(area, AUG["crop"], 1.0))
    free = 1 - r
    s = AUG["shift"]
    tx = free * lo(cx, -1, 1) + lo(sx, -2 * s, 2 * s)
    ty = free * lo(cy, -1, 1) + lo(sy, -2 * s, 2 * s)
    zoom = lo(sc, 1 - AUG["scale"], 1 + AUG["scale"]) / r
    rad = AUG["rotate"] * math.pi / 180
    return lo(ang, -rad, rad), zoom, tx, ty


# Device side, batched: the same transformation as emclust's transform.Augment.

def hue_basis():
    t = torch.tensor([[0.299, 0.587, 0.114],
                      [0.595716, -0.274453, -0.321263],
                      [0.211456, -0.522591, 0.311135]], dtype=torch.float64)
    ti = torch.inverse(t)
    p0 = torch.outer(ti[:, 0], t[0])
    p1 = torch.outer(ti[:, 1], t[1]) + torch.outer(ti[:, 2], t[2])
    p2 = torch.outer(ti[:, 2], t[1]) - torch.outer(ti[:, 1], t[2])
    return torch.stack([p0.flatten(), p1.flatten(), p2.flatten()]).float()  # 3×9


def augment_batch(x, hue_k):
    """x: N×C×H×W float in [0,1] on the device → T(x), every image its own draw."""
    n, c, h, w = x.shape
    u = torch.rand(n, 12, device=x.device, dtype=x.dtype)
    draw = lambda i, a, b: (u[:, i] * (b - a) + a).view(n, 1, 1, 1)
    v = AUG["brightness"]
    x = (x * draw(8, max(0, 1 - v), 1 + v)).clamp(0, 1)
    v = AUG["contrast"]
    m = gray(x).mean(dim=(1, 2, 3), keepdim=True)
    x = (m + draw(9, max(0, 1 - v), 1 + v) * (x - m)).clamp(0, 1)
    if c == 3:
        v = AUG["saturation"]
        g = gray(x)
        x = (g + draw(10, max(0, 1 - v), 1 + v) * (x - g)).clamp(0, 1)
        phi = (u[:, 11] * 2 * AUG["hue"] - AUG["hue"]) * 2 * math.pi
        coef = torch.stack([torch.ones_like(phi), torch.cos(phi), torch.sin(phi)], 1)
        mats = (coef @ hue_k).view(n, 3, 3)
        x = (mats @ x.reshape(n, 3, h * w)).view(n, 3, h, w).clamp(0, 1)
    angle, zoom, tx, ty = geometry_params(u, 0, 1, 2, 3, 4, 5, 6)
    theta = affine_theta(angle, zoom, tx, ty, h, w)
    grid = F.affine_grid(theta, [n, c, h, w], align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


# CPU side, one image at a time (what a torchvision pipeline does).

def _rgb2hsv(img):
    # torchvision.transforms.functional_tensor._rgb2hsv
    r, g, b = img.unbind(dim=-3)
    maxc = torch.max(img, dim=-3).values
    minc = torch.min(img, dim=-3).values
    eqc = maxc == minc
    cr = maxc - minc
    ones = torch.ones_like(maxc)
    s = cr / torch.where(eqc, ones, maxc)
    cr_divisor = torch.where(eqc, ones, cr)
    rc = (maxc - r) / cr_divisor
    gc = (maxc - g) / cr_divisor
    bc = (maxc - b) / cr_divisor
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = torch.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return torch.stack((h, s, maxc), dim=-3)


def _hsv2rgb(img):
    # torchvision.transforms.functional_tensor._hsv2rgb
    h, s, v = img.unbind(dim=-3)
    i = torch.floor(h * 6.0)
    f = (h * 6.0) - i
    i = i.to(dtype=torch.int32)
    p = torch.clamp((v * (1.0 - s)), 0.0, 1.0)
    q = torch.clamp((v * (1.0 - s * f)), 0.0, 1.0)
    t = torch.clamp((v * (1.0 - s * (1.0 - f))), 0.0, 1.0)
    i = i % 6
    mask = i.unsqueeze(dim=-3) == torch.arange(6, device=i.device).view(-1, 1, 1)
    a1 = torch.stack((v, q, p, p, t, v), dim=-3)
    a2 = torch.stack((t, v, v, q, p, p), dim=-3)
    a3 = torch.stack((p, p, t, v, v, q), dim=-3)
    a4 = torch.stack((a1, a2, a3), dim=-4)
    return torch.einsum("...ijk, ...xijk -> ...xjk", mask.to(dtype=img.dtype), a4)


def color_jitter_one(img):
    """torchvision ColorJitter(0.4, 0.4, 0.4, 0.1) on one C×H×W float image."""
    c = img.shape[0]
    for fn in torch.randperm(4).tolist():
        if fn == 0:
            v = AUG["brightness"]
            f = float(torch.empty(1).uniform_(max(0, 1 - v), 1 + v))
            img = (img * f).clamp(0, 1)
        elif fn == 1:
            v = AUG["contrast"]
            f = float(torch.empty(1).uniform_(max(0, 1 - v), 1 + v))
            m = gray(img).mean()
            img = (m + f * (img - m)).clamp(0, 1)
        elif fn == 2 and c == 3:
            v = AUG["saturation"]
            f = float(torch.empty(1).uniform_(max(0, 1 - v), 1 + v))
            g = gray(img)
            img = (g + f * (img - g)).clamp(0, 1)
        elif fn == 3 and c == 3:
            f = float(torch.empty(1).uniform_(-AUG["hue"], AUG["hue"]))
            hsv = _rgb2hsv(img)
            hsv = torch.stack((torch.remainder(hsv[0] + f, 1.0), hsv[1], hsv[2]))
            img = _hsv2rgb(hsv)
    return img


def augment_one(img):
    """Plain-torch T for one C×H×W float image: colour jitter, then one warp for
    random resized crop + scale + shift + rotation (affine_grid per image)."""
    c, h, w = img.shape
    img = color_jitter_one(img)
    u = torch.rand(7)
    angle, zoom, tx, ty = geometry_params(u, 0, 1, 2, 3, 4, 5, 6)
    theta = affine_theta(angle.view(1), zoom.view(1), tx.view(1), ty.view(1), h, w)
    grid = F.affine_grid(theta, [1, c, h, w], align_corners=False)
    return F.grid_sample(img.unsqueeze(0), grid, mode="bilinear", padding_mode="border",
                         align_corners=False).squeeze(0)


def torchvision_augment(h, w):
    """The torchvision pipeline a user would write for the same T."""
    import torchvision.transforms as T
    bil = T.InterpolationMode.BILINEAR
    return T.Compose([
        T.RandomResizedCrop((h, w), scale=(AUG["crop"], 1.0), ratio=(1.0, 1.0), interpolation=bil),
        T.RandomAffine(AUG["rotate"], translate=(AUG["shift"], AUG["shift"]),
                       scale=(1 - AUG["scale"], 1 + AUG["scale"]), interpolation=bil),
        T.ColorJitter(AUG["brightness"], AUG["contrast"], AUG["saturation"], AUG["hue"]),
    ])


def have_torchvision():
    try:
        import torchvision  # noqa: F401
        return True
    except Exception:
        return False


class ImageDataset(torch.utils.data.Dataset):
    """rows images of the paper's epoch, backed by n synthetic ones (index mod n).
    Returns the Sobel planes of x and of T(x), 2×H×W each."""

    def __init__(self, pix, rows, lib):
        self.pix, self.rows, self.lib = pix, rows, lib
        self.kernel = torch.tensor(SOBEL).view(2, 1, 3, 3)
        self.tv = torchvision_augment(pix.shape[2], pix.shape[3]) if lib == "torchvision" else None

    def __len__(self):
        return self.rows

    def __getitem__(self, i):
        img = self.pix[i % len(self.pix)].float() / 255
        t = self.tv(img) if self.tv is not None else augment_one(img)
        x = sobel(gray(img).unsqueeze(0), self.kernel)[0]
        xt = sobel(gray(t).unsqueeze(0), self.kernel)[0]
        return x, xt


class RowDataset(torch.utils.data.Dataset):
    def __init__(self, x, rows):
        self.x, self.rows = x, rows

    def __len__(self):
        return self.rows

    def __getitem__(self, i):
        return self.x[i % len(self.x)]


# ---------------------------------------------------------------------------- bench

def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def bench(arch, objective, aug, prec, channels_last, dev, args):
    shape = SHAPES[arch]
    bs = args.batch_size
    n = max(4 * bs, 1024)  # synthetic rows, as cmd_bench.go
    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(1)
    if arch == "mlp":
        data = torch.randn(n, shape["features"], generator=g)
        net = make_net("mlp", features=shape["features"]).to(dev)
        flops = forward_flops(net, 0, 0)
    else:
        c, h, w = shape["c"], shape["h"], shape["w"]
        data = torch.randint(0, 256, (n, c, h, w), dtype=torch.uint8, generator=g)
        net = make_net(arch, h=h, w=w).to(dev)
        flops = forward_flops(net, h, w)
    if arch == "mlp" and objective != "em":
        raise SystemExit("reference.py: mlp takes vectors; use --objective em")
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
    net.train()
    body, norm = net[:-1], net[-1]

    def fwd(x):
        # As emclust computes: the layers under bf16 autocast, the relevance
        # normalisation (and the loss after it) in float32.
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        if prec == "bf16":
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                a = body(x)
            return norm(a.float())
        return net(x)

    params = list(net.parameters())
    if arch == "mlp":
        opt_a = torch.optim.Adam(params, lr=1e-3)
    else:
        opt_a = torch.optim.Adam(params, lr=5e-5)
    opt_b = torch.optim.Adam(params, lr=1e-4) if objective == "twofold" else None
    use_aug = objective != "em"
    lib = "-"

    # Batches: an endless iterator of (x, xt) on dev.
    if aug == "cpu":
        workers = args.num_workers
        if arch == "mlp":
            ds = RowDataset(data, shape["rows"])
        else:
            lib = args.cpu_aug_lib
            if lib == "auto":
                lib = "torchvision" if have_torchvision() else "torch-ops"
            ds = ImageDataset(data, shape["rows"], lib)
        kw = dict(batch_size=bs, shuffle=True, drop_last=True, num_workers=workers,
                  pin_memory=dev.type == "cuda")
        if workers > 0:
            kw["persistent_workers"] = True
        loader = torch.utils.data.DataLoader(ds, **kw)

        def batches():
            while True:
                for b in loader:
                    if arch == "mlp":
                        yield b.to(dev, non_blocking=True), None
                    else:
                        x, xt = b
                        yield x.to(dev, non_blocking=True), xt.to(dev, non_blocking=True)
    else:
        lib = "batched"
        pix = data.to(dev)
        kernel = torch.tensor(SOBEL, device=dev).view(2, 1, 3, 3)
        hue_k = hue_basis().to(dev)

        def batches():
            perm = torch.randperm(n, device=dev)
            i = 0
            while True:
                off = (i * bs) % (n - bs + 1)
                raw = pix[perm[off:off + bs]]
                i += 1
                if arch == "mlp":
                    yield raw, None
                    continue
                f = raw.float() / 255
                x = sobel(gray(f), kernel)
                xt = sobel(gray(augment_batch(f, hue_k)), kernel) if use_aug else None
                yield x, xt

    def step(x, xt):
        # EM (or IIC) step with optimiser A.
        a = fwd(x)
        p = F.softmax(a.detach(), 1)
        if objective == "em":
            l = em_loss(a, p)
        elif objective == "iic":
            l = iic_loss(a, fwd(xt))
        else:
            l = em_aug_loss(a, fwd(xt), p)
        h_mean = torch.sigmoid(a.detach() / GAMMA).mean(0)  # noqa: F841 (emclust logs it)
        opt_a.zero_grad(set_to_none=True)
        l.backward()
        opt_a.step()
        if objective != "twofold":
            return
        # KL step with optimiser B: fresh posteriors of x under the updated θ.
        with torch.no_grad():
            p = F.softmax(fwd(x), 1)
        kl = kl_loss(p, fwd(xt))
        opt_b.zero_grad(set_to_none=True)
        kl.backward()
        opt_b.step()

    it = batches()
    for _ in range(args.warmup):
        step(*next(it))
    sync(dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    start = time.perf_counter()
    for _ in range(args.steps):
        step(*next(it))
    sync(dev)
    el = time.perf_counter() - start
    del it
    peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else -1
    sps = args.steps / el
    step_flops = flops * bs * FORWARD_EQUIVALENTS[objective]
    return {
        "arch": arch, "objective": objective, "device": str(dev), "batch": bs,
        "precision": prec, "channels_last": channels_last,
        "steps": args.steps, "ms_per_step": 1000 * el / args.steps,
        "steps_per_second": sps, "rows_per_second": sps * bs,
        "epoch_rows": shape["rows"], "epoch_seconds": (shape["rows"] // bs) / sps,
        "peak_device_bytes": peak, "params": sum(p.numel() for p in params),
        "cpu_threads": torch.get_num_threads(),
        "gflop_per_step": step_flops / 1e9, "achieved_tflops": step_flops * sps / 1e12,
        "impl": "python-%s-aug" % aug, "aug_lib": lib,
        "num_workers": args.num_workers if aug == "cpu" else 0,
        "torch": torch.__version__,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mlp,mnist", help="comma-separated: mlp, mnist, cifar, stl10")
    ap.add_argument("--objective", default="",
                    help="comma-separated em, em-aug, twofold, iic (default: em for mlp, twofold for CNNs)")
    ap.add_argument("--aug", default="cpu", help="comma-separated: cpu (DataLoader), device (batched)")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: one per CPU this process may use)")
    ap.add_argument("--num-workers", type=int, default=2, help="DataLoader workers for --aug cpu")
    ap.add_argument("--cpu-aug-lib", default="auto", choices=["auto", "torchvision", "torch-ops"],
                    help="per-image transforms of --aug cpu (auto: torchvision when installed)")
    ap.add_argument("--precision", default="fp32", help="comma-separated: fp32, bf16 (autocast)")
    ap.add_argument("--channels-last", default="false", help="comma-separated: false, true (CNNs)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        ap.error("want --steps ≥ 1 and --warmup ≥ 0")

    # 0: one per CPU this process may use, as emclust counts them (Go's runtime.NumCPU).
    torch.set_num_threads(args.threads if args.threads > 0 else len(os.sched_getaffinity(0)))
    d = args.device
    if d == "auto":
        d = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(d)
    if dev.type == "cuda":
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        torch.backends.cudnn.benchmark = True
    for arch in args.model.split(","):
        if arch not in SHAPES:
            ap.error("unknown model %r" % arch)
        objs = args.objective or ("em" if arch == "mlp" else "twofold")
        for obj in objs.split(","):
            if obj not in FORWARD_EQUIVALENTS:
                ap.error("unknown objective %r" % obj)
            for prec in args.precision.split(","):
                if prec not in ("fp32", "bf16"):
                    ap.error("unknown --precision %r" % prec)
                layouts = args.channels_last.split(",")
                for cl in layouts:
                    if cl not in ("false", "true"):
                        ap.error("--channels-last %r: want false or true" % cl)
                if arch == "mlp":
                    layouts = ["false"]  # no convolutions to lay out: timed once
                for cl in layouts:
                    for aug in args.aug.split(","):
                        if aug not in ("cpu", "device"):
                            ap.error("unknown --aug %r" % aug)
                        print(json.dumps(bench(arch, obj, aug, prec, cl == "true", dev, args)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
