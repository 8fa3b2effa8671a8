r"""The notes' run-record items, checked on runs: each makes one small run through the runner
(:func:`bnnpred.runner.train`, as ``bnnpred train`` does) into a temporary folder and looks up, in the files the run
writes, every field the item asks a run to record.

- notes-000 #21 (every run records its seed, P, the final MAP gradient norm, the hyperparameters δ, σ², γ, S and
  Σ₀'s scale, the number of Monte Carlo samples, and for the VI methods the iterations and convergence status): a
  Laplace-GGN regression run on the cubic toy with σ² chosen on a marginal-likelihood grid, and a VOGGN run
  on two moons.
- notes-001 #11 (a results table per run: method, data set, β, multiplier, σ², seed, test log-likelihood, NLL,
  accuracy, ECE, the final ELBO and the time per epoch): a VL run of ``experiment=notes001_fmnist`` on two moons at a
  fixed σ² (Fig. 1's setting). The test log-likelihood is the negative of the recorded NLL, and the time per epoch
  the run's seconds over its epochs; the item's plots of Figs. 1 and 2 are the notes001 page's.
- notes-004 #11 (a per-run record with data set, split, seed, architecture, δ, posterior type, predictives,
  number of samples, NLL, accuracy, ECE and OOD AUC, and the δ-selection record, the validation NLL per δ): a
  Table 1 run (``experiment=notes004_table1`` on Australian split 0, a smaller network, δ chosen by validation NLL
  on a 3-point grid) and a Table 2 run (a diagonal Laplace-GGN on an MNIST subset with Fashion-MNIST as the OOD set,
  which has no split: the official one); each is not applicable without its data in the data root.

A field is recorded when its key holds a value (not null, not NaN; a column: in every row). The runs are tiny
(seconds each); their numbers are not the point, only what the run files hold.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from bnnpred.cli import compose
from bnnpred.errors import BnnpredError
from bnnpred.reproduce.claims import Between, Claim, Compare, Item, claim, item
from bnnpred.runner import train

QUIET = ("progress=false", "plot.enabled=false", "dtype=float64")
GRID = (0.1, 1.0, 10.0)  # notes-004 #11: the δ grid of the selection record
LAPLACE_REGRESSION = ("dataset=cubic", "model=mlp", "model.width=10", "inference.map.steps=2000",
                      "inference.map.lr=0.01", "selection=marglik_grid", "selection.delta_grid=[1]",
                      "selection.sigma2_grid=[3,9]", "predictive.kinds=[glm]", "predictive.n_samples=50")
VOGGN = ("dataset=two_moons", "model=mlp", "model.width=6", "inference=voggn", "inference.iterations=40",
         "selection=none", "predictive.kinds=[glm]", "predictive.n_samples=50")
VL_FIXED = ("experiment=notes001_fmnist", "dataset=two_moons", "dataset.n_test=200", "inference.epochs=30",
            "inference.fixed_sigma2=1e-4")
UCI_TABLE1 = ("experiment=notes004_table1", "dataset.dataset=australian", "dataset.split=0", "model.depth=1",
              "model.width=10", "inference.map.steps=1000", "predictive.n_samples=20", "selection=valid_nll",
              f"selection.delta_grid=[{','.join(map(str, GRID))}]")
MNIST_OOD = ("dataset=mnist", "dataset.n_train=300", "dataset.n_test=200", "ood=fashion_mnist", "ood.n_test=200",
             "model=mlp", "model.width=20", "inference.structure=diag", "inference.map.steps=200",
             "predictive.kinds=[map,nn,glm]", "predictive.n_samples=20", "selection=none", "prior.delta=10")


@dataclass(frozen=True)
class Field:
    """One field a checklist item asks a run to record, and where the run's files hold it: ``file`` is
    ``metrics.json`` or ``config.yaml`` (``key`` a dotted path) or ``selection.csv`` (``key`` a column)."""

    name: str
    file: str
    key: str


@dataclass(frozen=True)
class RunFiles:
    """What one run wrote: ``metrics.json``, ``config.yaml`` and ``selection.csv``, read back."""

    metrics: dict[str, Any]
    config: dict[str, Any]
    selection: pd.DataFrame

    def holds(self, field: Field) -> bool:
        """Whether the run recorded ``field``: a value that is not null or NaN (a column: in every row)."""
        if field.file == "selection.csv":
            return field.key in self.selection and bool(self.selection[field.key].notna().all()) \
                and len(self.selection) > 0
        value: Any = self.metrics if field.file == "metrics.json" else self.config
        for part in field.key.split("."):
            if not isinstance(value, dict) or part not in value:
                return False
            value = value[part]
        return value is not None and not (isinstance(value, float) and math.isnan(value))


def make_run(overrides: Sequence[str]) -> RunFiles:
    """One run of ``overrides`` (plus :data:`QUIET`) through :func:`bnnpred.runner.train` into a temporary folder
    (its fit cache there too), read back; the run's printed table is swallowed."""
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "run"
        cfg = compose([*overrides, *QUIET, f"fit_cache={Path(folder) / 'fit_cache'}"])
        with contextlib.redirect_stdout(io.StringIO()):
            train(cfg, run_dir)
        return RunFiles(metrics=json.loads((run_dir / "metrics.json").read_text()),
                        config=yaml.safe_load((run_dir / "config.yaml").read_text()),
                        selection=pd.read_csv(run_dir / "selection.csv"))


def fields_claim(it: Item, run: str, files: RunFiles | None, fields: Sequence[Field], reason: str = "") -> Claim:
    """``it`` holds when ``files`` records every one of ``fields``; the numbers name the recorded and the missing
    ones (no files: not applicable, for ``reason``)."""
    criterion = Compare(f"{run}: fields recorded, of the {len(fields)} the item names", "≥", len(fields))
    if files is None:
        return claim(it, criterion, math.nan, numbers=reason)
    held = [f.name for f in fields if files.holds(f)]
    missing = [f"{f.name} ({f.file}: {f.key})" for f in fields if not files.holds(f)]
    return claim(it, criterion, len(held), numbers=f"{len(held)}/{len(fields)}: {', '.join(held)}"
                 + (f"; missing: {', '.join(missing)}" if missing else ""))


# ------------------------------------------------------------------------------------------ notes-000 #21

COMMON = (Field("seed", "metrics.json", "run.seed"), Field("P", "metrics.json", "run.n_params"),
          Field("δ", "metrics.json", "run.delta"),
          Field("Monte Carlo samples", "config.yaml", "predictive.n_samples"))
LAPLACE_FIELDS = (*COMMON, Field("σ²", "metrics.json", "run.sigma2"),
                  Field("final MAP gradient norm", "metrics.json", "info.grad_norm"))
VI_FIELDS = (*COMMON, Field("γ", "config.yaml", "inference.gamma"), Field("S", "config.yaml", "inference.n_samples"),
             Field("Σ₀ scale", "config.yaml", "inference.init_var"),
             Field("iterations", "metrics.json", "info.iterations"),
             Field("convergence status", "metrics.json", "info.converged"))


def notes000_claims(laplace: RunFiles, voggn: RunFiles) -> list[Claim]:
    """notes-000 #21 on a Laplace-GGN and a VOGGN run."""
    return [fields_claim(item(0, 21), "Laplace-GGN regression run", laplace, LAPLACE_FIELDS),
            fields_claim(item(0, 21), "VOGGN run", voggn, VI_FIELDS)]


# ------------------------------------------------------------------------------------------ notes-001 #11

VL_FIELDS = (Field("method", "metrics.json", "run.inference"), Field("data set", "metrics.json", "run.dataset"),
             Field("β", "config.yaml", "inference.kl_weight"),
             Field("multiplier", "config.yaml", "inference.rho_lr_factor"),
             Field("σ²", "config.yaml", "inference.fixed_sigma2"), Field("seed", "metrics.json", "run.seed"),
             Field("test log-likelihood (−NLL)", "metrics.json", "metrics.test.map.nll"),
             Field("accuracy", "metrics.json", "metrics.test.map.accuracy"),
             Field("ECE", "metrics.json", "metrics.test.map.ece"),
             Field("final ELBO", "metrics.json", "info.elbo_per_example"),
             Field("seconds (per epoch: over the epochs)", "metrics.json", "run.seconds"),
             Field("epochs", "config.yaml", "inference.epochs"))


def notes001_claims(vl: RunFiles) -> list[Claim]:
    """notes-001 #11 on a VL run at a fixed σ²."""
    return [fields_claim(item(1, 11), "VL run at a fixed σ²", vl, VL_FIELDS)]


# ------------------------------------------------------------------------------------------ notes-004 #11

KINDS = ("map", "nn", "glm")
TABLE1_FIELDS = (Field("data set", "metrics.json", "run.dataset"), Field("split", "metrics.json", "run.data_split"),
                 Field("seed", "metrics.json", "run.seed"), Field("architecture", "metrics.json", "run.model"),
                 Field("depth", "config.yaml", "model.depth"), Field("width", "config.yaml", "model.width"),
                 Field("δ", "metrics.json", "run.delta"), Field("posterior type", "metrics.json", "run.structure"),
                 Field("samples", "config.yaml", "predictive.n_samples"),
                 *(Field(f"{kind} {metric}", "metrics.json", f"metrics.test.{kind}.{metric}")
                   for kind in KINDS for metric in ("nll", "accuracy", "ece")),
                 Field("δ of each grid point", "selection.csv", "delta"),
                 Field("validation NLL of each grid point", "selection.csv", "valid_nll"))
OOD_FIELDS = (Field("posterior type", "metrics.json", "run.structure"),
              *(Field(f"{kind} OOD AUC", "metrics.json", f"metrics.test.{kind}.ood_auc") for kind in KINDS))


def notes004_claims(table1: RunFiles | None, ood: RunFiles | None, reasons: tuple[str, str] = ("", "")) -> list[Claim]:
    """notes-004 #11 on a Table 1 run (UCI classification, δ chosen by validation NLL) and a Table 2 run (an
    OOD set); ``None`` is not applicable, for its reason."""
    rows = math.nan if table1 is None else len(table1.selection)
    return [fields_claim(item(4, 11), "UCI-classification run (Table 1)", table1, TABLE1_FIELDS, reasons[0]),
            claim(item(4, 11), Between("rows of its δ-selection record (one per grid δ)", len(GRID), len(GRID)), rows,
                  **({"numbers": reasons[0]} if table1 is None else {})),
            fields_claim(item(4, 11), "MNIST-subset run, OOD Fashion-MNIST (Table 2)", ood, OOD_FIELDS, reasons[1])]


def data_run(overrides: Sequence[str]) -> tuple[RunFiles | None, str]:
    """:func:`make_run` of a run on real data, or None and why (its data set is not in the data root)."""
    try:
        return make_run(overrides), ""
    except BnnpredError as e:
        if not str(e).startswith(("missing data file", "no data root")):
            raise
        return None, f"no data: {e}"


def claims() -> list[Claim]:
    """notes-000 #21, notes-001 #11 and notes-004 #11, each on its own runs."""
    (table1, why_not_table1), (ood, why_not_ood) = data_run(UCI_TABLE1), data_run(MNIST_OOD)
    return [*notes000_claims(make_run(LAPLACE_REGRESSION), make_run(VOGGN)), *notes001_claims(make_run(VL_FIXED)),
            *notes004_claims(table1, ood, (why_not_table1, why_not_ood))]
