"""SLANG paper (notes-002 §3.6) Table 3: MNIST test error of SLANG with a ReLU MLP, against Bayes-by-Backprop.

Tiers: ``cpu`` is notes-002 §6.3 item 5 (the preset ``notes002_mnist_cpu``: 784-100-100-10 on a seeded 10k
of the training images, M = 100, S = 1, α₀ = β₀ = 0.1, ω = 0.6, 10 epochs, L ∈ {1, 8}; 100 predictive samples on a
seeded 5k half of the test images) with BBB at the same budget (``notes002_mnist_cpu_bbb``). ``full`` is the paper's
network and schedule for a GPU (``notes002_mnist``: 784-400-400-10, 60k images, 400 epochs, M = 200, S = 4, L from 1
to 32 at the reference's selected ω; its BBB number is quoted from Blundell et al., so no BBB run). ``quick`` is a
smoke run. Both use the reference's selected prior, λ = e⁴ (−log σ = 2) and 1e-6 on biases.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bnnpred.report import figures
from bnnpred.reproduce.base import Reproduction, Study, document
from bnnpred.reproduce.claims import Between, Claim, Compare, claim, every, item, items, standardised

PAPER = {"BBB": 1.82, "SLANG L=1": 2.00, "SLANG L=2": 1.95, "SLANG L=4": 1.81, "SLANG L=8": 1.92,
         "SLANG L=16": 1.77, "SLANG L=32": 1.73}  # notes-002 Table 3, test error %
FULL_DECAY = {1: 0.60, 2: 0.60, 4: 0.58, 8: 0.60, 16: 0.56, 32: 0.60}  # the reference's selected ω per L (§2.9)
QUICK = ("dataset.n_train=500", "dataset.n_test=400", "inference.iterations=10", "inference.log_every=5",
         "predictive.n_samples=5")
QUICK_BBB = ("dataset.n_train=500", "dataset.n_test=400", "inference.steps=10", "inference.log_every=5",
             "predictive.n_samples=5")


def runs(r: Reproduction) -> dict[str, Path]:
    """Train what is missing; ``{method: run directory}``."""
    base = r.runs / "notes002_mnist"
    if r.pick(quick=False, cpu=False, full=True):  # the paper's network and schedule
        return {f"SLANG L={rank}": r.train_once(base / f"slang_L{rank}", "experiment=notes002_mnist",
                                                 f"inference.rank={rank}", f"inference.decay={decay}")
                for rank, decay in FULL_DECAY.items()}
    chosen = {f"SLANG L={rank}": r.train_once(base / f"slang_L{rank}", "experiment=notes002_mnist_cpu",
                                              f"inference.rank={rank}", quick=QUICK) for rank in (1, 8)}
    chosen["BBB"] = r.train_once(base / "bbb", "experiment=notes002_mnist_cpu_bbb", quick=QUICK_BBB)
    return chosen


def summary(run_dir: Path) -> dict[str, float]:
    """Test error (%), NLL and training seconds of one run."""
    doc = document(run_dir)
    test = doc["metrics"]["test"]["nn"]
    return {"error": 100 * (1 - test["accuracy"]), "nll": test["nll"], "seconds": doc["run"]["seconds"]}


def make(r: Reproduction) -> str:
    chosen = runs(r)
    rows = {method: summary(run_dir) for method, run_dir in chosen.items()}
    errors = {method: row["error"] for method, row in rows.items()}
    traces = pd.concat([pd.read_csv(run_dir / "trace.csv").assign(method=method, set="MNIST")
                        for method, run_dir in chosen.items()], ignore_index=True)
    traces["neg_elbo"], traces["test_error"] = -traces["elbo"], 100 * (1 - traces["test_accuracy"])
    figures.plot_mean_curves(r.out / "convergence.png", traces, x="epoch", panel="set", hue="method",
                             metrics={"neg_elbo": "negative ELBO per example", "test_error": "test error % (mean)"},
                             log_y=("neg_elbo", "test_error"))
    lines = ["| method | test error (%) | test NLL | training time (s) | paper (GPU, 784-400-400-10) |",
             "|---|---|---|---|---|"]
    for method, row in rows.items():
        lines.append(f"| {method} | {row['error']:.2f} | {row['nll']:.4f} | {row['seconds']:.0f} | "
                     f"{PAPER[method]:.2f} |")
    return "\n".join([
        "# SLANG paper, Table 3: MNIST", "", r.provenance("bnnpred reproduce notes002_mnist"), "",
        "Settings: the study's docstring (`bnnpred/reproduce/notes002_mnist.py`) and the presets it names. Test "
        "error of the predictive (weight samples); the paper's numbers are for its larger network and 400 epochs "
        "on a GPU.", "", *lines, "", "![ELBO and test error per epoch](convergence.png)", "",
        r.table(full_claims(errors) if "SLANG L=32" in chosen
                else cpu_claims(errors, paired_se(chosen["SLANG L=1"], chosen["SLANG L=8"]))),
    ]) + "\n"


def full_claims(errors: dict[str, float]) -> list[Claim]:
    """notes-002 checklist item 22 on the test error (%) per method."""
    nan = float("nan")
    one, sixteen, thirtytwo = (errors.get(f"SLANG L={rank}", nan) for rank in (1, 16, 32))
    return [
        every(item(2, 22), Between("test error (%)", 1.5, 2.3), errors, over="L"),
        claim(item(2, 22), Compare("min test error over L ≥ 16", "≤", "error at L = 1"),
              (float(np.min([sixteen, thirtytwo])), one)),
        claim(item(2, 22), Compare("test error at L = 32 (%)", "≤", 1.95), thirtytwo),
    ]


def cpu_claims(errors: dict[str, float], se: float) -> list[Claim]:
    """notes-002 item 22 at the CPU plan's scale (§6.3 item 5): L = 8 against L = 1 on the same test images
    (``se``: the standard error of their paired difference, %), and the notes' expected error range."""
    nan = float("nan")
    one, eight = errors.get("SLANG L=1", nan), errors.get("SLANG L=8", nan)
    return [
        claim(item(2, 22), Compare("(test error L = 8 − L = 1) / paired s.e.", "≤", 2), standardised(eight - one, se),
              note="L = 8 not worse than L = 1", numbers=f"{eight:.2f} vs {one:.2f} (s.e. {se:.2f})"),
        every(item(2, 22), Between("test error (%)", 2.5, 4),
              {m: e for m, e in errors.items() if m.startswith("SLANG")}, over="L",
              note="the notes' guess for the CPU plan, not a paper number"),
    ]


def paired_se(first: Path, second: Path) -> float:
    """Standard error (in %) of the difference of two runs' test errors on the same images."""
    mistakes = []
    for run_dir in (first, second):
        with np.load(run_dir / "predictions.npz") as predictions:
            mistakes.append(predictions["nn_probs"].argmax(1) != predictions["y"])
    difference = mistakes[1].astype(float) - mistakes[0]
    return 100 * float(difference.std(ddof=1)) / math.sqrt(len(difference))


STUDY = Study(name="notes002_mnist", title="SLANG paper (notes-002) Table 3: MNIST, SLANG L = 1 and 8 against BBB "
              "(CPU-scale MLP)", make=make,
              cpu_cost="9 min beside three other studies (3 runs)", items=items(2, 22), full_scale=True)
