r"""The notes' run-record items, checked on runs: small runs through the runner (:func:`bnnpred.app.runner.train`, as
``bnnpred train`` makes them) into a temporary folder, and in the files each writes, every field the item asks a
run to record.

- notes-000 #21 (every run records its seed, P, the final MAP gradient norm, the hyperparameters δ, σ², γ, S and
  Σ₀'s scale, the number of Monte Carlo samples, and for the VI methods the iterations and convergence status): a
  Laplace-GGN regression run on the cubic toy with σ² chosen on a marginal-likelihood grid, and a VOGGN run on two
  moons.
- notes-001 #11 (a results table per run: method, data set, β, multiplier, σ², seed, test log-likelihood, NLL,
  accuracy, ECE, the final ELBO and the time per epoch): ``experiment=notes001_fmnist`` on two moons, a VL run at
  Table 1's β = 0.1 and multiplier 10 (σ learned), and one at a fixed σ² (Fig. 1's runs, where σ² is a setting and
  the multiplier has nothing to move). The test log-likelihood is the negative of the recorded NLL; the final ELBO
  is the trainer's objective, the β-weighted ELBO per example over the last trace window.
- notes-004 #11 (a per-run record with data set, split, seed, architecture, δ, posterior type (full / diag /
  kron / gp-M), predictive (map / nn / glm / gp), number of samples, NLL, accuracy, ECE and OOD AUC, and the
  δ-selection record, the validation NLL per δ): a Table 1 run made as ``experiment=notes004_table1`` makes them
  (Australian split 0 at one δ of the sweep, a smaller network; the study picks δ per predictive from the sweep's
  runs' validation NLL, ``report.tables.select_by_valid_nll``), and a Table 2 run (a Kronecker Laplace-GGN and a
  GP on M = 100 points, on an MNIST subset with Fashion-MNIST as the OOD set; MNIST has one official split); each
  is not applicable without its data in the data root.

A field is recorded when its key holds a value (not null, NaN or empty). A field from ``config.yaml`` is a setting
of the resolved config the run saved (marked ``(config)``): it shows the run's record holds it, not that the run
used it. The item's plots are the pages' (notes001, notes004_*), not checked here. The runs are tiny (seconds
each); their numbers are not the point, only what the run files hold.
"""

from __future__ import annotations

import contextlib
import io
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from omegaconf import OmegaConf

from bnnpred.app.compose import compose
from bnnpred.app.run_record import read_finished
from bnnpred.app.runner import train
from bnnpred.errors import MissingDataError
from bnnpred.reproduce.claims import Claim, Compare, Item, claim, item

QUIET = ("progress=false", "plot.enabled=false", "dtype=float64")
LAPLACE_REGRESSION = ("dataset=cubic", "model=mlp", "model.width=10", "inference.map.steps=2000",
                      "inference.map.lr=0.01", "selection=marglik_grid", "selection.delta_grid=[1]",
                      "selection.sigma2_grid=[3,9]", "predictive.kinds=[glm]", "predictive.n_samples=50")
VOGGN = ("dataset=two_moons", "model=mlp", "model.width=6", "inference=voggn", "inference.iterations=40",
         "selection=none", "predictive.kinds=[glm]", "predictive.n_samples=50")
VL = ("experiment=notes001_fmnist", "dataset=two_moons", "dataset.n_test=200", "inference.epochs=30")
VL_FIXED = (*VL, "inference.fixed_sigma2=1e-4")
UCI_TABLE1 = ("experiment=notes004_table1", "dataset.dataset=australian", "dataset.split=0", "prior.delta=1",
              "model.depth=1", "model.width=10", "inference.map.steps=1000", "predictive.n_samples=20")
MNIST_OOD = ("dataset=mnist", "dataset.n_train=300", "dataset.n_test=200", "ood=fashion_mnist", "ood.n_test=200",
             "model=mlp", "model.width=20", "inference.structure=kron", "inference.map.steps=200",
             "predictive.kinds=[map,nn,glm,gp]", "predictive.n_samples=20", "predictive.gp_subset_size=100",
             "selection=none", "prior.delta=10")


@dataclass(frozen=True)
class Field:
    """One field a checklist item asks a run to record, and where the run's files hold it: ``file`` is
    ``metrics.json`` or ``config.yaml``, ``key`` a dotted path in it."""

    name: str
    file: str
    key: str


@dataclass(frozen=True)
class RunFiles:
    """What one run wrote: its ``metrics.json`` and ``config.yaml``, read back."""

    metrics: dict[str, Any]
    config: dict[str, Any]

    def holds(self, field: Field) -> bool:
        """Whether the run recorded ``field``: a value that is not null, NaN or empty."""
        value: Any = self.metrics if field.file == "metrics.json" else self.config
        for part in field.key.split("."):
            if not isinstance(value, dict) or part not in value:
                return False
            value = value[part]
        return value not in (None, {}, [], "") and not (isinstance(value, float) and math.isnan(value))


def make_run(overrides: Sequence[str]) -> RunFiles:
    """One run of ``overrides`` (plus :data:`QUIET`) through :func:`bnnpred.app.runner.train` into a temporary folder
    (its fit cache there too), read back as a finished run (:func:`bnnpred.app.run_record.read_finished`: its files
    verified against their manifest); the run's printed table is swallowed."""
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "run"
        cfg = compose([*overrides, *QUIET, f"fit_cache={Path(folder) / 'fit_cache'}"])
        with contextlib.redirect_stdout(io.StringIO()):
            train(cfg, run_dir)
        run = read_finished(run_dir)
        return RunFiles(metrics=run.document, config=OmegaConf.to_container(run.config, resolve=True))


def fields_claim(it: Item, run: str, files: RunFiles | None, fields: Sequence[Field], reason: str = "",
                 note: str = "") -> Claim:
    """``it`` holds when ``files`` records every one of ``fields``; the numbers name the recorded and the missing
    ones (no files: not applicable, for ``reason``); ``note`` says what of the item is checked elsewhere."""
    criterion = Compare(f"{run}: fields recorded, of the {len(fields)} checked", "≥", len(fields))
    if files is None:
        return claim(it, criterion, math.nan, numbers=reason, note=note)
    held = [f.name + " (config)" * (f.file == "config.yaml") for f in fields if files.holds(f)]
    missing = [f"{f.name} ({f.file}: {f.key})" for f in fields if not files.holds(f)]
    return claim(it, criterion, len(held), numbers=f"{len(held)}/{len(fields)}: {', '.join(held)}"
                 + (f"; missing: {', '.join(missing)}" if missing else ""), note=note)


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

TABLE_ROW = (Field("method", "metrics.json", "run.inference"), Field("data set", "metrics.json", "run.dataset"),
             Field("seed", "metrics.json", "run.seed"),
             Field("test log-likelihood (−NLL)", "metrics.json", "metrics.test.map.nll"),
             Field("accuracy", "metrics.json", "metrics.test.map.accuracy"),
             Field("ECE", "metrics.json", "metrics.test.map.ece"),
             Field("final β-weighted ELBO per example", "metrics.json", "info.elbo_per_example"),
             Field("time per epoch", "metrics.json", "run.training.seconds_per_epoch"))
VL_FIELDS = (*TABLE_ROW, Field("β", "config.yaml", "inference.kl_weight"),
             Field("multiplier", "config.yaml", "inference.rho_lr_factor"))
VL_FIXED_FIELDS = (*TABLE_ROW, Field("σ²", "config.yaml", "inference.fixed_sigma2"))


def notes001_claims(vl: RunFiles, vl_fixed: RunFiles) -> list[Claim]:
    """notes-001 #11 on a VL run that learns σ and one at a fixed σ²."""
    plots = "the item's plots, Figs 1 and 2, are the notes001 page's and not checked here"
    return [fields_claim(item(1, 11), "VL run, β = 0.1, multiplier 10", vl, VL_FIELDS, note=plots),
            fields_claim(item(1, 11), "VL run at a fixed σ²", vl_fixed, VL_FIXED_FIELDS, note=plots)]


# ------------------------------------------------------------------------------------------ notes-004 #11

def results(kinds: Sequence[str], metrics: Sequence[str], split: str = "test") -> tuple[Field, ...]:
    """The fields of each predictive's ``metrics`` on ``split``."""
    return tuple(Field(f"{kind} {split} {metric}", "metrics.json", f"metrics.{split}.{kind}.{metric}")
                 for kind in kinds for metric in metrics)


TABLE1_FIELDS = (Field("data set", "metrics.json", "run.dataset"), Field("split", "metrics.json", "run.data_split"),
                 Field("seed", "metrics.json", "run.seed"), Field("architecture", "metrics.json", "run.model"),
                 Field("depth", "config.yaml", "model.depth"), Field("width", "config.yaml", "model.width"),
                 Field("δ", "metrics.json", "run.delta"), Field("posterior type", "metrics.json", "run.structure"),
                 Field("samples", "config.yaml", "predictive.n_samples"),
                 *results(("map", "nn", "glm"), ("nll", "accuracy", "ece")),
                 *results(("map", "nn", "glm"), ("nll",), split="valid"))  # the δ-selection record's entries
OOD_FIELDS = (Field("posterior type", "metrics.json", "run.structure"),
              Field("GP subset M", "config.yaml", "predictive.gp_subset_size"),
              *results(("map", "nn", "glm", "gp"), ("ood_auc",)))


def notes004_claims(table1: RunFiles | None, ood: RunFiles | None, reasons: tuple[str, str] = ("", "")) -> list[Claim]:
    """notes-004 #11 on a Table 1 run (UCI classification) and a Table 2 run (an OOD set); ``None`` is not
    applicable, for its reason."""
    elsewhere = ("a run records its validation NLL at its δ, the δ-selection record per δ is its sweep's "
                 "(report.tables.select_by_valid_nll); the plots, Figs 3-6, are the notes004 pages' and not checked "
                 "here")
    return [fields_claim(item(4, 11), "UCI-classification run (Table 1)", table1, TABLE1_FIELDS, reasons[0],
                         note=elsewhere),
            fields_claim(item(4, 11), "MNIST-subset run, OOD Fashion-MNIST (Table 2)", ood, OOD_FIELDS, reasons[1],
                         note=elsewhere)]


class Runs(NamedTuple):
    """The runs the claims read (``None``: a run whose data is absent, and why in ``reasons``)."""

    laplace: RunFiles
    voggn: RunFiles
    vl: RunFiles
    vl_fixed: RunFiles
    table1: RunFiles | None
    ood: RunFiles | None
    reasons: tuple[str, str]


def data_run(overrides: Sequence[str]) -> tuple[RunFiles | None, str]:
    """:func:`make_run` of a run on real data, or None and why (its data set is not in the data root)."""
    try:
        return make_run(overrides), ""
    except MissingDataError as e:
        return None, f"no data: {e}"


def make_runs() -> Runs:
    (table1, why_not_table1), (ood, why_not_ood) = data_run(UCI_TABLE1), data_run(MNIST_OOD)
    return Runs(make_run(LAPLACE_REGRESSION), make_run(VOGGN), make_run(VL), make_run(VL_FIXED), table1, ood,
                (why_not_table1, why_not_ood))


def claims_of(runs: Runs) -> list[Claim]:
    """notes-000 #21, notes-001 #11 and notes-004 #11 on ``runs``."""
    return [*notes000_claims(runs.laplace, runs.voggn), *notes001_claims(runs.vl, runs.vl_fixed),
            *notes004_claims(runs.table1, runs.ood, runs.reasons)]


def claims() -> list[Claim]:
    """:func:`claims_of` runs made now."""
    return claims_of(make_runs())
