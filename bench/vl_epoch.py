"""Seconds per training epoch of MAP, VI (BBB, one weight sample) and VL (double backprop) on the same model and
data, as ratios to MAP measured in one run (notes-001 Table 2: VL / MAP = 2.75, VI / MAP = 1.03 on a GPU).

Fashion-MNIST's 60,000 training images (from BNNPRED_DATA_DIR when present, otherwise random images of the same
shape: the cost does not depend on the pixels), batch 128, float32, one thread, the notes001_fmnist softplus MLP
784-100-100-10 and the softplus thesis CNN; the fastest of three epochs per method, measured round-robin.

    python bench/vl_epoch.py

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import math
import time

import torch

from bnnpred.curvature.functional import FlatModel
from bnnpred.data.images import FashionMNISTConfig, load_images
from bnnpred.data.root import data_root
from bnnpred.errors import BnnpredError
from bnnpred.inference import Problem
from bnnpred.inference import map as map_module
from bnnpred.inference.bbb import BBBConfig, fit_bbb
from bnnpred.inference.map import MapConfig, Schedule, train_map
from bnnpred.inference.mean_field import VarianceParam
from bnnpred.inference.vl import VLConfig, fit_vl
from bnnpred.likelihoods import Categorical
from bnnpred.models.cnn import ThesisCNNConfig, build_thesis_cnn
from bnnpred.models.mlp import MLPConfig, build_mlp

N, BATCH = 60000, 128
STEPS = N // BATCH  # one epoch


def images() -> tuple[torch.Tensor, torch.Tensor, str]:
    try:
        data = load_images(FashionMNISTConfig(seed=0), data_root(None))
        return data.X_train.float(), data.y_train, "Fashion-MNIST"
    except BnnpredError:  # no data root here: random images cost the same
        gen = torch.Generator().manual_seed(0)
        return torch.rand(N, 1, 28, 28, generator=gen), torch.randint(0, 10, (N,), generator=gen), "random images"


def problem(module: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> Problem:
    model = FlatModel(module)
    theta = model.theta()
    return Problem(model=model, likelihood=Categorical(), X=X, y=y, prior_precision=torch.full_like(theta, 1.0),
                   theta0=theta, generator=torch.Generator().manual_seed(0))


def epoch_seconds(prob: Problem, repeats: int = 3) -> dict[str, float]:
    """The fastest of ``repeats`` epochs per method, measured round-robin so that load from other processes
    falls on every method alike."""
    settings = {"lr": 1e-3, "steps": STEPS, "batch_size": BATCH, "log_every": 10**9}
    runs = {
        "MAP": lambda: train_map(prob, MapConfig(schedule=Schedule.constant, **settings)),
        "VI": lambda: fit_bbb(prob, BBBConfig(variance=VarianceParam.log, local_reparam=False, **settings)),
        "VL": lambda: fit_vl(prob, VLConfig(**settings)),
    }
    seconds = {name: math.inf for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            seconds[name] = min(seconds[name], time.perf_counter() - start)
    return seconds


def main() -> None:
    # the MAP trainer ends with a full-data gradient norm (a diagnostic the other two do not compute): not an epoch
    map_module.log_joint_grad_norm = lambda problem, theta: 0.0
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)  # per-step overheads compare more stably on one core
    X, y, source = images()
    print(f"{source}: N = {len(X)}, batch {BATCH}, {STEPS} steps per epoch, {torch.get_num_threads()} threads")
    models = {"MLP 784-100-100-10 softplus": build_mlp(MLPConfig(depth=2, width=100, activation="softplus"),
                                                       (1, 28, 28), 10),
              "thesis CNN softplus": build_thesis_cnn(ThesisCNNConfig(activation="softplus"), (1, 28, 28), 10)}
    print("| model | MAP | VI | VL | VI / MAP | VL / MAP |\n|---|---|---|---|---|---|")
    for name, module in models.items():
        s = epoch_seconds(problem(module, X.reshape(len(X), 1, 28, 28), y))
        print(f"| {name} | {s['MAP']:.2f} s | {s['VI']:.2f} s | {s['VL']:.2f} s | {s['VI'] / s['MAP']:.2f} | "
              f"{s['VL'] / s['MAP']:.2f} |")


if __name__ == "__main__":
    main()
