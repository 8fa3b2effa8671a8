"""What a run builds before inference: the typed config, the device, the data on it, the network, the prior and
the OOD inputs."""

from __future__ import annotations

import dataclasses
import logging
import platform
from dataclasses import dataclass, replace
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from bnnpred.app.config import Config, LikelihoodConfig, Split
from bnnpred.app.process import prepare_process
from bnnpred.app.run_checks import check_config, check_full_covariance_fits, check_task, resolve_device
from bnnpred.curvature.functional import FlatModel
from bnnpred.data import Dataset, load_dataset
from bnnpred.errors import BnnpredError
from bnnpred.likelihoods import likelihood_for
from bnnpred.models import build_model
from bnnpred.prior import Prior

SPLITS = tuple(split.value for split in Split)

log = logging.getLogger(__name__)


@dataclass
class Setup:
    """Everything a run builds before inference: typed config, data on the device, the network."""

    cfg: Config
    data: Dataset
    model: FlatModel
    device: torch.device
    dtype: torch.dtype
    prior: Prior  # the configured prior, every free group at prior.delta (selection moves it)
    X_ood: torch.Tensor | None = None  # inputs of the out-of-distribution set (``ood=NAME``), or None


def typed(cfg: DictConfig) -> Config:
    """The composed config as dataclass instances (enums and all), interpolations resolved."""
    return OmegaConf.to_object(cfg)


def setup(cfg: Config) -> Setup:
    check_config(cfg)
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    prepare_process()
    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.device)
    if device.type == "cuda":  # dtype=float32 means float32: no TF32 (10-bit mantissa) convolutions or products
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    dtype = cfg.dtype.torch
    data = to_device(load_dataset(cfg.dataset), device, dtype)
    check_targets(data)
    check_task(cfg, data)
    module = build_model(cfg.model, data.input_shape, data.output_dim).to(device=device, dtype=dtype)
    model = FlatModel(module, channels_last=True)  # bnnpred's own networks run channels last on the CPU
    log.info("model %s: P = %d parameters", cfg.model.name, model.n_params)
    check_full_covariance_fits(cfg, model, dtype)
    X_ood = ood_inputs(cfg, data, device, dtype)
    return Setup(cfg=cfg, data=data, model=model, device=device, dtype=dtype,
                 prior=Prior.from_config(model, cfg.prior), X_ood=X_ood)


def device_fields(device: torch.device) -> dict[str, str]:
    """``device`` (``cpu`` / ``cuda``) and ``device_name`` (the GPU's, or the processor's, :func:`cpu_name`) of a
    run."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    return {"device": device.type, "device_name": name}


def cpu_name(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The processor's architecture and, where the system names it (Linux's ``cpuinfo``), its model, e.g. ``x86_64
    (AMD EPYC)``: two CPUs can round a long training differently (notes001's VI at ×30 diverged on one machine and
    not on another, at the same code and config), so a run says which made it."""
    try:
        with open(cpuinfo) as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        model = ""
    return f"{platform.machine()} ({model})" if model else platform.machine()


def ood_inputs(cfg: Config, data: Dataset, device: torch.device, dtype: torch.dtype) -> torch.Tensor | None:
    """The test inputs of the OOD set (notes-004 §3.5: the OOD dataset's test split), checked against the
    in-distribution input shape and standardised with the in-distribution training statistics."""
    if cfg.ood is None:
        return None
    ood = load_dataset(dataclasses.replace(cfg.ood, standardize=False) if hasattr(cfg.ood, "standardize")
                       else cfg.ood)
    if ood.input_shape != data.input_shape:
        raise BnnpredError(f"OOD set {cfg.ood.name} has inputs {list(ood.input_shape)} but {cfg.dataset.name} has "
                           f"{list(data.input_shape)}; pick an OOD set of the same shape")
    X = torch.cat([ood.X_valid, ood.X_test])
    if data.standardization is not None:  # the network sees OOD inputs as it saw its own: the training statistics
        mean, std = data.standardization
        X = (X - mean) / std
    return X.to(device=device, dtype=dtype)


def to_device(data: Dataset, device: torch.device, dtype: torch.dtype) -> Dataset:
    """Inputs (and real or count targets) in ``dtype`` on ``device``; class labels as int64."""
    y_dtype = torch.int64 if data.task.classification else dtype
    moved = {}
    for split in SPLITS:
        X, y = data.split(split)
        moved[f"X_{split}"] = X.to(device=device, dtype=dtype)
        moved[f"y_{split}"] = y.to(device=device, dtype=y_dtype)
    return replace(data, **moved)


def check_targets(data: Dataset) -> None:
    """Every split's targets lie in the support of the task's likelihood (counts for the Poisson)."""
    likelihood = likelihood_for(data.task, 1.0)
    for split in SPLITS:
        likelihood.check_targets(data.split(split)[1])


def noise_variance(cfg: LikelihoodConfig, data: Dataset) -> float:
    """σ² on the targets the model sees: ``sigma2``, or ``1/(τ·s²)`` for a noise precision τ on the original scale
    of targets standardised by ``s``."""
    if cfg.noise_precision is None:
        return cfg.sigma2
    if data.target_scale is None:
        raise BnnpredError(f"likelihood.noise_precision is τ on the original target scale, but {data.name} does not "
                           "standardise its targets; use likelihood.sigma2")
    return 1 / (cfg.noise_precision * data.target_scale**2)


def likelihood_at(s: Setup, sigma2: float | None) -> Any:
    """The likelihood of the data's task at noise ``σ²`` (ignored for classification and counts)."""
    return likelihood_for(s.data.task, sigma2 if sigma2 is not None else 1.0)
