"""SLANG paper (notes-002 §3.1) Table 1: Bayesian logistic regression on Australian, Breast-cancer, USPS 3 vs 5 and
a1a; mean-field and full-Gaussian VI with the empirical Fisher, the Hessian (= the GGN of a linear model) and the
exact ELBO (L-BFGS), and SLANG with L = 1, 2, 5, 10; the ablation SLANG-OnlineEig with L = 1, 2, 5 (App. B, Table 4).
Metrics: the negative ELBO per training example (expected
log-likelihood by Gauss-Hermite quadrature at each method's final posterior), the test log-loss of the GLM
predictive, and the symmetric KL to the full-Gaussian exact posterior. Settings of notes-002 Table 8 (prior λ,
minibatch M, bias prior 1e-5, 12 samples, α₀ = β₀ = 0.05 decayed with ω = 0.51, SLANG momentum 0.9). The full tier
is the paper's (20 splits, 10,000 epochs). The CPU tier is notes-002 §6.3's 1,500 epochs on 3 splits instead of 5,
and 500 epochs on USPS: with 12 samples of its 64-image minibatches SLANG factorises a 257 x 257 matrix at every
step (about 20 ms on this machine with other runs beside it), so 1,500 epochs on 5 splits would take 2 h for SLANG
alone.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from bnnpred.app.report import figures
from bnnpred.app.saved_runs import restore
from bnnpred.inference.exact_vi import expected_loglik
from bnnpred.metrics import symmetric_kl
from bnnpred.posteriors import Posterior
from bnnpred.predictive import glm_latent
from bnnpred.reproduce.base import Reproduction, Study, document
from bnnpred.reproduce.claims import (
    Claim,
    Compare,
    Trend,
    all_of,
    claim,
    departs,
    every,
    item,
    items,
    lookup,
    standardised,
)
from bnnpred.reproduce.derived import large_files, scalars

# set: (prior λ, minibatch M, training examples) — notes-002 Table 8 and §3.1 (USPS: 770 of 1,540)
BIAS_DELTA = 1e-5  # the bias column's prior precision (notes-002 Table 8), as experiment=notes002_logreg sets it
SETS = {"australian": (1e-5, 32, 345), "breast_cancer": (1.0, 32, 341), "usps_3vs5": (25.0, 64, 770),
        "a1a": (2.8072, 128, 1605)}
# the paper's fixed budget: no stop on an ELBO plateau (voggn's recipe stops there since issue 22, which ended the
# full-Gaussian runs after 1,300 of 16,171 steps, KL to FG Exact 157 on Australian)
NGVI = ("inference.gamma=0.05", "inference.mean_gamma=0.05", "inference.decay=0.51", "inference.n_samples=12",
        "inference.init_var=1.0", "inference.tol=0", "inference.plateau_window=null")
METHODS: dict[str, tuple[str, ...]] = {
    "MF EF": ("inference=voggn", "inference.structure=diag", "inference.curvature=ef", *NGVI),
    "MF Hessian": ("inference=voggn", "inference.structure=diag", *NGVI),
    "MF Exact": ("inference=exact_vi", "inference.structure=diag"),
    **{f"SLANG L={rank}": ("inference=slang", f"inference.rank={rank}", "inference.lr=0.05", "inference.decay=0.51",
                           "inference.n_samples=12") for rank in (1, 2, 5, 10)},
    "FG EF": ("inference=voggn", "inference.curvature=ef", *NGVI),
    "FG Hessian": ("inference=voggn", *NGVI),
    "FG Exact": ("inference=exact_vi",),
}
# SLANG-OnlineEig (notes-002 App. B, Table 4: "same setup as Table 1", L ∈ {1, 2, 5})
ONLINE_EIG = {f"OnlineEig L={rank}": (*METHODS[f"SLANG L={rank}"], "inference.update=online_eig") for rank in (1, 2, 5)}
RUNS = {**METHODS, **ONLINE_EIG}  # every method the study runs
TABLE4 = (*ONLINE_EIG, "SLANG L=1", "SLANG L=2", "SLANG L=5")
PAPER_TABLE4 = {  # notes-002 Table 4 in TABLE4 order: negative ELBO, test NLL, KL (its printed scale undone)
    "australian": ([0.580, 0.578, 0.652, 0.574, 0.574, 0.569], [0.344, 0.343, 0.347, 0.342, 0.342, 0.339],
                   [570, 320, 120, 330, 310, 80]),
    "breast_cancer": ([0.114, 0.116, 0.123, 0.112, 0.111, 0.111], [0.092, 0.093, 0.093, 0.092, 0.092, 0.092],
                      [1.544, 2.128, 4.402, 0.911, 0.756, 0.842]),
    "a1a": ([0.380, 0.380, 0.383, 0.377, 0.376, 0.374], [0.339] * 6, [35.1, 29.3, 25.3, 30.5, 24.9, 17.3]),
    "usps_3vs5": ([0.210, 0.208, 0.210, 0.210, 0.206, 0.198], [0.133, 0.132, 0.133, 0.132, 0.132, 0.132],
                  [14.97, 13.53, 14.32, 14.92, 12.46, 7.55]),
}
PAPER = {  # notes-002 Tables 6 and 7 (Table 1's KL) in METHODS order: negative ELBO per example, test NLL, raw
    # symmetric KL (its printed scale undone)
    "australian": ([0.6139, 0.6125, 0.5933, 0.5744, 0.5743, 0.5690, 0.5659, 0.5601, 0.5583, 0.5589],
                   [0.3480, 0.3472, 0.3413, 0.3415, 0.3416, 0.3392, 0.3382, 0.3396, 0.3386, 0.3377],
                   [22398, 20301, 1946, 332, 313, 84, 17, 0.76, 0.0, 0.0]),
    "breast_cancer": ([0.1217, 0.1208, 0.1205, 0.1117, 0.1111, 0.1114, 0.1107, 0.1107, 0.1086, 0.1087],
                      [0.0950, 0.0943, 0.0937, 0.0921, 0.0918, 0.0919, 0.0920, 0.0920, 0.0912, 0.0912],
                      [8.019, 9.071, 7.771, 0.911, 0.756, 0.842, 0.638, 0.637, 0.0017, 0.0]),
    "a1a": ([0.3838, 0.3833, 0.3828, 0.3766, 0.3759, 0.3744, 0.3732, 0.3686, 0.3678, 0.3679],
            [0.3390, 0.3389, 0.3385, 0.3386, 0.3385, 0.3386, 0.3386, 0.3386, 0.3385, 0.3386],
            [259.0, 220.8, 129.5, 30.5, 24.9, 17.3, 11.8, 1.41, 0.0, 0.0]),
    "usps_3vs5": ([0.2679, 0.2675, 0.2672, 0.2096, 0.2059, 0.1979, 0.1929, 0.1886, 0.1860, 0.1860],
                  [0.1390, 0.1388, 0.1383, 0.1325, 0.1325, 0.1317, 0.1314, 0.1309, 0.1300, 0.1301],
                  [76.8, 71.9, 70.8, 14.9, 12.5, 7.55, 4.48, 1.80, 0.01, 0.0]),
}
PAPER_SE = {  # the s.e. over 20 splits of Tables 6 and 7's negative ELBO and NLL, in METHODS order; a1a (one split):
    # items 8-9's absolute tolerances instead
    "australian": ((0.0059, 0.0059, 0.0058, 0.0055, 0.0055, 0.0056, 0.0058, 0.0059, 0.0059, 0.0059),
                   (0.0069, 0.0068, 0.0072, 0.0065, 0.0065, 0.0065, 0.0066, 0.0072, 0.0072, 0.0069)),
    "breast_cancer": ((0.0028, 0.0028, 0.0028, 0.0029, 0.0028, 0.0028, 0.0028, 0.0028, 0.0029, 0.0029),
                      (0.0024, 0.0023, 0.0024, 0.0023, 0.0023, 0.0023, 0.0023, 0.0023, 0.0023, 0.0024)),
    "usps_3vs5": ((0.0029, 0.0029, 0.0028, 0.0025, 0.0024, 0.0024, 0.0023, 0.0022, 0.0022, 0.0022),
                  (0.0020, 0.0020, 0.0020, 0.0019, 0.0019, 0.0019, 0.0019, 0.0020, 0.0020, 0.0020)),
}
EXACT = ("MF Exact", "FG Exact")  # item 8's methods; item 9's are the others (STOCHASTIC)
A1A_TOLERANCE = {8: (0.002,), 9: (0.003, 0.002)}  # a1a's one split: items 8 (ELBO) and 9 (ELBO, NLL) as written
SE_TOLERANCE = 3  # items 8-9: within 3 s.e. of the paper's tables (the paper's s.e.)
# the CPU plan's relaxed tolerance (notes-002 §6.3 item 1: "tolerances relax to 4·SE"), taken of the paper's s.e.
# combined with our mean's own over our splits
CPU_SE_TOLERANCE = 4
CPU_DEPARTURE = ("the notes' CPU plan relaxes items 8-16's tolerances to 4 s.e. (§6.3 item 1); our mean is over 3 "
                 "splits (the plan's 5, the paper's 20: 1,500 epochs on 5 splits would take SLANG alone 2 h here) and "
                 "USPS trains 500 epochs (the plan's 1,500), so its own s.e. is combined with the paper's")
# item 9's KL part: "raw KL within max(3·SE, 30% relative) of the raw values", SE the paper's (notes-002 §5), over the
# stochastic methods only (item 8 has the exact ones)
STOCHASTIC = ("MF EF", "MF Hessian", "SLANG L=1", "SLANG L=2", "SLANG L=5", "SLANG L=10", "FG EF", "FG Hessian")
KL_TOLERANCE = (3, 0.3)  # (paper's s.e., relative)
PAPER_KL_SE = {  # notes-002 Tables 6, 7: the s.e. of the raw symmetric KL over 20 splits, in METHODS order, their
    # printed scale undone (a printed 0.0000 is 0); a1a has one split and no s.e.
    "australian": (3459, 3146, 214, 68, 67, 20, 3, 0.0, 0.0, 0.0),
    "breast_cancer": (0.2540, 0.1750, 0.1173, 0.0177, 0.0290, 0.0240, 0.0222, 0.0221, 0.0003, 0.0),
    "a1a": (0.0,) * 10,
    "usps_3vs5": (1.485, 0.978, 0.893, 0.199, 0.175, 0.110, 0.058, 0.022, 0.002, 0.0),
}
# half a unit of the tables' last printed KL digit (0.0001 × 10^k): a cell printed as 0.0000 ± 0.0000 is a value
# below it, not an exact 0, so no cell's tolerance is finer than the printing
KL_PRINTED_HALF_UNIT = {"australian": 0.5, "breast_cancer": 5e-5, "a1a": 5e-3, "usps_3vs5": 5e-4}
# notes-002 Fig. 7(d): (mean, variance) of the bias for MF, SLANG L = 1, 5, 10 and the full Gaussian
PAPER_BIAS = {"australian": ((19.94, 0.04), (10.02, 1.26), (13.92, 2.82), (18.49, 6.98), (24.08, 56.93)),
              "breast_cancer": ((4.21, 0.12), (4.47, 1.17), (4.44, 1.72), (4.41, 1.75), (4.26, 1.54)),
              "a1a": ((-2.13, 0.01), (-2.04, 0.16), (-2.13, 0.25), (-2.17, 0.37), (-2.11, 1.37)),
              "usps_3vs5": ((2.28, 0.03), (2.17, 0.67), (2.06, 0.95), (1.98, 1.38), (1.80, 2.09))}
SHAPE = ("MF Exact", "SLANG L=1", "SLANG L=5", "SLANG L=10", "FG Exact")  # Figs. 1 and 7


def epochs(r: Reproduction, name: str) -> int:
    return r.pick(quick=20, cpu=500 if name == "usps_3vs5" else 1500, full=10000)


def sweep(r: Reproduction, name: str, method: str, splits: str) -> Path:
    """The method's runs on the set's splits; returns the folder the page reads."""
    delta, M, N = SETS[name]
    iterations = max(1, epochs(r, name) * N // M)
    steps = (f"inference.iterations={iterations}", f"inference.batch_size={M}") if "Exact" not in method else ()
    return r.sweep(r.runs / "notes002_logreg" / name / method.replace(" ", "_").replace("=", ""),
                   "split${dataset.split}", "experiment=notes002_logreg", f"dataset.dataset={name}",
                   f"dataset.split={splits}", f"prior.delta={delta}", *RUNS[method], *steps)


def scores(r: Reproduction, run: Path, exact: Path, posterior_of: Callable[[Path], Posterior]) -> dict[str, float]:
    """Negative ELBO per training example of the run (the paper's convention: without the bias prior's ½ log λ_b,
    notes-002 §3.1), its test NLL and the symmetric KL of its posterior to ``exact``'s (the FG Exact run of its
    split, restored by ``posterior_of``: once per split); the first and the last from the posteriors, kept beside
    the page."""
    def from_posteriors(folder: Path) -> dict[str, float]:
        s, ctx = restore(folder)
        X, y = s.data.X_train, s.data.y_train
        with torch.no_grad():
            mean, cov = glm_latent(ctx, X)
            loglik = expected_loglik(ctx.likelihood, y, mean[:, 0], cov[:, 0, 0], 64)
            elbo = loglik - ctx.posterior.kl_to_prior(ctx.prior_precision)
        paper_convention = 0.5 * math.log(s.cfg.prior.bias_delta) / len(X)
        return {"neg_elbo": -float(elbo) / len(X) + paper_convention,
                "kl": symmetric_kl(ctx.posterior, posterior_of(r.folder(exact)))}

    kept = scalars(r.derived(run, "elbo_and_kl", from_posteriors, {"exact": large_files(exact)}))
    return {"neg_elbo": kept["neg_elbo"], "nll": document(run)["metrics"]["test"]["glm"]["nll"], "kl": kept["kl"]}


def make(r: Reproduction) -> str:
    names = r.pick(quick=["australian", "breast_cancer"], cpu=list(SETS))
    n_splits = r.pick(quick=1, cpu=3, full=20)
    splits_of = {name: [0] if name == "a1a" else list(range(n_splits)) for name in names}  # a1a: its official split
    folders = {(name, method): sweep(r, name, method, ",".join(map(str, splits)))
               for name, splits in splits_of.items() for method in RUNS}

    def run(name: str, method: str, split: int) -> Path:
        return folders[name, method] / f"split{split}"

    posterior_of = functools.cache(lambda folder: restore(folder)[1].posterior)
    rows = [{"set": name, "method": method, "split": split,
             **scores(r, run(name, method, split), run(name, "FG Exact", split), posterior_of)}
            for name, splits in splits_of.items() for split in splits for method in RUNS]
    table = pd.DataFrame(rows).groupby(["set", "method"])[["neg_elbo", "nll", "kl"]].agg(["mean", "sem"])
    exact = {f"{name} {method} split {split}":
             document(run(name, method, split))["info"].get("grad_norm", math.nan)  # NaN: not recorded
             for name, splits in splits_of.items() for method in ("MF Exact", "FG Exact") for split in splits}
    shape_lines, shape_rows = covariance_shape(r, {name: {m: run(name, m, 0) for m in SHAPE} for name in names})
    return "\n".join([
        "# SLANG paper, Table 1: Bayesian logistic regression", "",
        r.provenance("bnnpred reproduce notes002_logreg"), "",
        "Epochs: " + ", ".join(f"{n} {epochs(r, n)}" for n in names) + f"; {n_splits} splits (a1a: its official "
        "split); means over splits; the paper's value "
        "in brackets (negative ELBO per example in the paper's convention, test NLL, raw symmetric KL to FG Exact; "
        "notes-002 Tables 1, 6, 7). NLL: the GLM predictive with 2000 samples.", "",
        *results_table(table, names, METHODS, PAPER), "",
        r.table([exact_claim(exact), *claims(table, names, relaxed=r.pick(quick=True, cpu=True, full=False))]), "",
        "## SLANG-OnlineEig (App. B, Table 4)", "",
        "The ablation that averages the new gradients' own top-L eigen-factor into U (eq. 18, each column's sign "
        "matched to the old one's) instead of taking the top-L part of the combined precision, with no diagonal "
        "matching (`inference.update=online_eig`); SLANG's step sizes and samples, the runs and splits above.", "",
        *results_table(table, names, TABLE4, PAPER_TABLE4), "", r.table(online_eig_claims(table, names)), "",
        "## The covariance's shape (split 0; Figs. 1 and 7)", "", *shape_lines, "",
        r.table(shape_rows),
    ]) + "\n"


def results_table(table: pd.DataFrame, names: list[str], methods: Sequence[str],
                  paper: dict[str, tuple[list[float], ...]]) -> list[str]:
    """Our means over splits per set, metric and method, the paper's value in brackets."""
    lines = ["| set | metric | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    for name in names:
        for metric, values in zip(("neg_elbo", "nll", "kl"), paper[name], strict=True):
            cells = [f"{table.loc[(name, m), (metric, 'mean')]:.4g} ({p:.4g})" for m, p in zip(methods, values,
                                                                                              strict=True)]
            lines.append(f"| {name} | {metric} | " + " | ".join(cells) + " |")
    return lines


def online_eig_claims(table: pd.DataFrame, names: list[str]) -> list[Claim]:
    """notes-002 item 25 (optional): at L = 5 SLANG's negative ELBO is at most OnlineEig's on every set."""
    def value(name: str, method: str) -> float:
        return lookup(table, (name, method), ("neg_elbo", "mean"))

    paper = ", ".join(f"{v[0][TABLE4.index('SLANG L=5')]:g} vs {v[0][TABLE4.index('OnlineEig L=5')]:g}"
                      for v in PAPER_TABLE4.values())
    return [every(item(2, 25), Compare("negative ELBO of SLANG L=5", "≤", "OnlineEig L=5's"),
                  {n: (value(n, "SLANG L=5"), value(n, "OnlineEig L=5")) for n in names}, over="set",
                  note=f"paper {paper}")]


def claims(table: pd.DataFrame, names: list[str], relaxed: bool = True) -> list[Claim]:
    """notes-002 checklist items 8 (the exact methods' ELBO) and 9-13 on the means over splits (``table``: (set,
    method) x (metric, mean/sem)); ``relaxed``: the CPU plan's tolerances for items 8-9 (:func:`closeness`)."""
    def value(name: str, method: str, metric: str) -> float:
        return lookup(table, (name, method), (metric, "mean"))

    def gaps(method: str, other: str, metric: str) -> dict[str, float]:
        return {n: abs(value(n, method, metric) - value(n, other, metric)) for n in names}

    slang = [f"SLANG L={rank}" for rank in (1, 2, 5, 10)]
    mean_field = ["MF EF", "MF Hessian", "MF Exact"]
    monotone = [n for n in names if n != "breast_cancer"]
    gated = [n for n in ("breast_cancer", "usps_3vs5") if n in names]
    kl_excess = kl_tolerance_units(table, names)
    kl_units = {cell: abs(units) for cell, units in kl_excess.items()}

    def kl_reached(number: int, methods: Sequence[str], among: list[str]) -> Claim:
        """Item ``number``'s mechanism: each run at least as close to the exact posterior as the paper's, up to item
        9's KL tolerance (a run closer than the paper's passes; one that never moved or diverged does not)."""
        return every(item(2, number), Compare("(KL − paper's) / item 9's KL tolerance", "≤", 1),
                     {f"{n} {m}": kl_excess[f"{n} {m}"] for n in among for m in methods}, over="(set, method)")

    ef_hessian = (every(item(2, 12), Compare("|negative ELBO of FG EF − FG Hessian's|", "≤", 0.004),
                        gaps("FG EF", "FG Hessian", "neg_elbo"), over="set"),
                  every(item(2, 12), Compare("|test NLL of FG EF − FG Hessian's|", "≤", 0.0015),
                        gaps("FG EF", "FG Hessian", "nll"), over="set"))
    approaches = every(item(2, 13), Compare("KL(SLANG L=10) / KL(FG EF)", "≤", 3),
                       {n: value(n, "SLANG L=10", "kl") / value(n, "FG EF", "kl") for n in gated},
                       over="set of Breast cancer and USPS")
    ungated = ", ".join(f"{n} {value(n, 'SLANG L=10', 'kl') / value(n, 'FG EF', 'kl'):.3g}" for n in names
                        if n not in gated)
    return [
        closeness(table, names, 8, "neg_elbo", relaxed),
        *(closeness(table, names, 9, metric, relaxed) for metric in ("neg_elbo", "nll")),
        departs(every(item(2, 9), Compare(f"|KL − paper's| / max({KL_TOLERANCE[0]} s.e., {KL_TOLERANCE[1]:.0%} of "
                                          "paper's, half its printed digit)", "≤", 1), kl_units,
                      over="(set, stochastic method)",
                      note="raw symmetric KL to FG Exact; s.e. the paper's, from Tables 6 and 7, none for a1a's one "
                           "split"),
                every(item(2, 9), Compare(f"|KL − paper's| / max({KL_TOLERANCE[0]} s.e., {KL_TOLERANCE[1]:.0%} of "
                                          "paper's)", "≤", 1),
                      {cell: abs(units) for cell, units in kl_tolerance_units(table, names, printed=False).items()},
                      over="(set, stochastic method)"),
                "a cell printed as 0.0000 ± 0.0000 is a value below half its last digit, not an exact 0 that any "
                "KL would miss"),
        # notes-002 #10; np.min, not min: a mean-field baseline without a KL (diverged) leaves the ratio no number
        every(item(2, 10), Compare("min mean-field KL / KL(SLANG L=1)", "≥", 2),
              {n: float(np.min([value(n, m, "kl") for m in mean_field])) / value(n, "SLANG L=1", "kl") for n in names},
              over="set", note="paper 4.2-8.5x"),
        every(item(2, 10), Compare("negative ELBO of SLANG L=1", "<", "MF Exact's"),
              {n: (value(n, "SLANG L=1", "neg_elbo"), value(n, "MF Exact", "neg_elbo")) for n in names}, over="set"),
        every(item(2, 11), Trend("KL", "strictly falls", "L = 1, 2, 5, 10"),
              {n: [value(n, m, "kl") for m in slang] for n in monotone}, over="set but Breast cancer"),
        claim(item(2, 11), Compare("Breast cancer: KL(SLANG L=10)", "<", "KL(SLANG L=1)"),
              (value("breast_cancer", "SLANG L=10", "kl"), value("breast_cancer", "SLANG L=1", "kl"))),
        all_of(every(item(2, 11), Compare("negative ELBO of SLANG L=10", "≤", "SLANG L=1's"),
                     {n: (value(n, "SLANG L=10", "neg_elbo"), value(n, "SLANG L=1", "neg_elbo")) for n in names},
                     over="set"),
               every(item(2, 11), Compare("KL(SLANG L=10)", "<", "KL(SLANG L=1)"),
                     {n: (value(n, "SLANG L=10", "kl"), value(n, "SLANG L=1", "kl")) for n in names}, over="set"),
               note="the rank changed the posterior"),
        departs(all_of(*ef_hessian, kl_reached(12, ("FG EF", "FG Hessian"), names),
                       note="both full-Gaussian runs reached the exact posterior, so two that never moved do not pass"),
                all_of(*ef_hessian),
                "each run's KL within item 9's tolerance of the paper's added: two full-Gaussian runs that never "
                "moved have gaps of 0, which the notes' two gaps alone pass"),
        departs(all_of(approaches, kl_reached(13, ("FG EF",), gated),
                       note=f"FG EF at its paper KL; ungated: {ungated or 'none run'}"),
                approaches, "FG EF's KL within item 9's tolerance of the paper's added: a diverged FG EF has a large "
                            "KL, whose ratio the notes' criterion alone passes"),
    ]


def closeness(table: pd.DataFrame, names: list[str], number: int, metric: str, relaxed: bool) -> Claim:
    """notes-002 item 8 (the exact methods' negative ELBO) or 9 (the stochastic methods' ``metric``): within 3 of the
    paper's s.e. of Tables 6 / 7 (a1a, one split: ``A1A_TOLERANCE``); ``relaxed``: the CPU plan's 4 s.e. combined
    with our mean's, the notes' 3 paper s.e. beside it (:data:`CPU_DEPARTURE`)."""
    index = ("neg_elbo", "nll").index(metric)
    methods = EXACT if number == 8 else STOCHASTIC
    label = "negative ELBO" if metric == "neg_elbo" else "test NLL"
    a1a = A1A_TOLERANCE[number][index]

    def within(scale: int, combined: bool) -> Claim:
        return every(item(2, number), Compare(f"|{label} − paper's| / tolerance", "≤", 1),
                     tolerance_units(table, names, metric, methods, scale, combined), over="(set, method)",
                     note=f"tolerance {scale} {'combined' if combined else 'paper'} s.e., a1a ±{a1a}"
                          + (", the exact methods" if number == 8 else ""))

    as_written = within(SE_TOLERANCE, combined=False)
    return departs(within(CPU_SE_TOLERANCE, combined=True), as_written, CPU_DEPARTURE) if relaxed else as_written


def exact_claim(grad_norms: dict[str, float]) -> Claim:
    """notes-002 item 8: L-BFGS ends each exact Gaussian VI (MF and FG Exact) at a stationary point of the negative
    ELBO (summed over the training set), on every set, method and split (``grad_norms``: the run info's norm)."""
    return every(item(2, 8), Compare("‖∇ negative ELBO‖ where L-BFGS stops", "<", 1e-5), grad_norms,
                 over="set, exact method and split", note="the ELBO summed over the training set, the stricter reading")


def tolerance_units(table: pd.DataFrame, names: list[str], metric: str, methods: Sequence[str], scale: int,
                    combined: bool) -> dict[str, float]:
    """Per (set, method) cell, |ours − paper's| in units of ``scale`` of the paper's s.e. (``combined``: combined
    with our mean's s.e. over splits); a1a, one split: item 9's absolute tolerance (item 8's for the exact methods)."""
    index = ("neg_elbo", "nll").index(metric)
    units = {}
    for name in names:
        for method in methods:
            column = list(METHODS).index(method)
            ours, se = lookup(table, (name, method), (metric, "mean")), lookup(table, (name, method), (metric, "sem"))
            paper_se = PAPER_SE[name][index][column] if name != "a1a" else math.nan
            tolerance = (A1A_TOLERANCE[8 if method in EXACT else 9][index] if name == "a1a"
                         else scale * (math.hypot(paper_se, se) if combined else paper_se))
            units[f"{name} {method}"] = abs(ours - PAPER[name][index][column]) / tolerance
    return units


def kl_tolerance_units(table: pd.DataFrame, names: list[str], printed: bool = True) -> dict[str, float]:
    """notes-002 #9's KL part per (set, stochastic method) cell: our mean raw KL − the paper's in units of max(3 ×
    the paper's s.e., 30 % of the paper's value) (``KL_TOLERANCE``), as the notes write it, and with ``printed``
    never finer than the tables' printing (``KL_PRINTED_HALF_UNIT``: a value printed as 0.0000 is below half its
    last digit); negative where ours is closer to the exact posterior (item 9 reads its absolute value)."""
    units = {}
    for name in names:
        for method in STOCHASTIC:
            index = list(METHODS).index(method)
            paper, se = PAPER[name][2][index], PAPER_KL_SE[name][index]
            tolerance = max(KL_TOLERANCE[0] * se, KL_TOLERANCE[1] * paper,
                            KL_PRINTED_HALF_UNIT[name] if printed else 0.0)
            units[f"{name} {method}"] = standardised(lookup(table, (name, method), ("kl", "mean")) - paper, tolerance)
    return units


def covariance_shape(r: Reproduction, runs: dict[str, dict[str, Path]]) -> tuple[list[str], list[Claim]]:
    """Figs. 1 and 7 on split 0 (``runs``: per set the run of each method of ``SHAPE``): the off-diagonal
    covariance of SLANG and FG Exact, each method's means and marginal variances, the bias's (mean, variance)
    (Fig. 7d); checklist items 14 and 15."""
    frames, bias, offdiag_error, spearman, weight_ratio = [], {}, {}, {}, {}
    for name, by_method in runs.items():
        shape = r.derived(by_method["FG Exact"], "covariance_shape",
                          lambda _, by_method=by_method: posterior_shape({m: r.folder(run)
                                                                           for m, run in by_method.items()}),
                          {"runs": {m: large_files(run) for m, run in by_method.items()}})
        heatmaps = from_levels(shape["heatmaps"])  # kept JSON sorts the names: the figure's order is SHAPE's
        figures.plot_heatmaps(r.out / f"covariance_{name}.png", {m: heatmaps[m] for m in SHAPE if m in heatmaps},
                              value="covariance", title=f"{name}: off-diagonal covariance of the weights")
        means, variances = scalars(shape["means"]), scalars(shape["variances"])
        for m in SHAPE:
            frames.append(pd.DataFrame({"parameter": range(len(means[m])), "mean": means[m],
                                        "variance": variances[m], "method": m, "set": name}))
        bias[name] = [(means[m][-1], variances[m][-1]) for m in SHAPE]  # the bias is last
        kept = scalars({key: shape[key] for key in ("offdiag_error", "spearman", "weight_ratio")})
        offdiag_error[name], spearman[name] = kept["offdiag_error"], tuple(kept["spearman"])
        weight_ratio[name] = kept["weight_ratio"]
    names = list(runs)
    figures.plot_mean_curves(r.out / "means_and_variances.png", pd.concat(frames), x="parameter", panel="set",
                             hue="method", metrics={"mean": "posterior mean", "variance": "marginal variance"},
                             log_y=("variance",))
    lines = ["![off-diagonal covariance, USPS](covariance_usps_3vs5.png)" if "usps_3vs5" in names else "",
             "![means and marginal variances](means_and_variances.png)", "",
             "Other sets: " + ", ".join(f"[{n}](covariance_{n}.png)" for n in names) + ".", "",
             "Bias (mean, variance), the paper's Fig. 7(d) in brackets:", "",
             "| set | " + " | ".join(SHAPE) + " |", "|---|" + "---|" * len(SHAPE)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(f"{m:.2f}, {v:.3g} ({pm:g}, {pv:g})" for (m, v), (pm, pv) in zip(
            bias[name], PAPER_BIAS[name], strict=True)) + " |")
    return lines, shape_claims(names, weight_ratio, offdiag_error, spearman, bias)


def shape_claims(names: list[str], weight_ratio: dict[str, float], offdiag_error: dict[str, list[float]],
                 spearman: dict[str, tuple[float, float]],
                 bias: dict[str, list[tuple[float, float]]]) -> list[Claim]:
    """notes-002 items 14-15 on split 0: per set the median weight-variance ratio MF / FG Exact, the off-diagonal
    errors of SLANG L = 1, 5, 10, the Spearman ρ of (SLANG L=1, MF) with FG, and the bias's (mean, variance) per
    method of ``SHAPE``."""
    rising = [n for n in names if n != "breast_cancer"]
    return [
        claim(item(2, 14), Compare("USPS: median weight variance MF Exact / FG Exact", "<", 0.5),
              weight_ratio.get("usps_3vs5", math.nan), note="shrinkage"),
        claim(item(2, 15), Trend("USPS: off-diagonal error to FG Exact", "strictly falls", "L = 1, 5, 10"),
              offdiag_error.get("usps_3vs5", [])),
        every(item(2, 14), Compare("Spearman ρ(SLANG L=1, FG) of the weight variances", ">", "ρ(MF, FG)"), spearman,
              over="set", note="trend reversal"),
        every(item(2, 14), Compare("bias variance MF / FG", "<", 0.1), {n: b[0][1] / b[-1][1] for n, b in bias.items()},
              over="set", note="paper 0.0007-0.078"),
        all_of(every(item(2, 14), Trend("bias variance", "does not fall", "L = 1, 5, 10"),
                     {n: [bias[n][i][1] for i in (1, 2, 3)] for n in rising}, over="set but Breast cancer"),
               every(item(2, 14), Compare("bias variance at L = 10", ">", "at L = 1"),
                     {n: (bias[n][3][1], bias[n][1][1]) for n in rising}, over="set but Breast cancer"),
               note="it rises somewhere, so ranks that changed nothing do not pass"),
    ]


def offdiag(matrix: torch.Tensor) -> torch.Tensor:
    return matrix - torch.diag(matrix.diagonal())


def posterior_shape(folders: dict[str, Path]) -> dict[str, Any]:
    """What Figs. 1 and 7 take from the posteriors of one set's split-0 runs (``folders``: per method of
    ``SHAPE``): each method's means and marginal variances ``[P]`` (the bias last), the off-diagonal error of SLANG
    L = 1, 5, 10 to FG Exact (relative Frobenius norm), the Spearman ρ of (SLANG L=1, MF Exact) with FG Exact's
    weight variances, the median weight-variance ratio MF / FG Exact, and the off-diagonal weight covariances
    of the four non-mean-field methods as colour levels (:func:`colour_levels`)."""
    posteriors = {m: restore(folders[m])[1].posterior for m in SHAPE}
    covariances = {m: torch.linalg.inv(p.dense_precision()) for m, p in posteriors.items()}
    exact_off = offdiag(covariances["FG Exact"])
    variances = pd.DataFrame({m: covariances[m].diagonal()[:-1].numpy() for m in SHAPE})
    return {"means": {m: p.mean for m, p in posteriors.items()},
            "variances": {m: c.diagonal() for m, c in covariances.items()},
            "offdiag_error": [float((offdiag(covariances[m]) - exact_off).norm() / exact_off.norm())
                              for m in ("SLANG L=1", "SLANG L=5", "SLANG L=10")],
            "spearman": [variances["SLANG L=1"].corr(variances["FG Exact"], method="spearman"),
                         variances["MF Exact"].corr(variances["FG Exact"], method="spearman")],
            "weight_ratio": float((variances["MF Exact"] / variances["FG Exact"]).median()),
            "heatmaps": colour_levels({m: c[:-1, :-1] for m, c in covariances.items() if m != "MF Exact"})}


LEVELS = 127  # colour levels each side of zero kept of a heatmap: finer than its colour map's 256 shades


def colour_levels(covariances: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Symmetric matrices ``[D, D]`` as :func:`~bnnpred.app.report.figures.plot_heatmaps` colours them (one
    symmetric scale, the diagonal blank): ``{"limit"`` (the largest off-diagonal magnitude), ``"levels"``: per name
    the strict lower triangle, row by row, as integers ``round(LEVELS · value / limit)``, None where a value is not
    finite}, a tenth of the JSON of the values themselves."""
    lower = {m: [row[:i] for i, row in enumerate(c.tolist())] for m, c in covariances.items()}
    limit = max((abs(v) for rows in lower.values() for row in rows for v in row if math.isfinite(v)), default=0.0)
    return {"limit": limit, "levels": {m: [[round(LEVELS * v / (limit or 1.0)) if math.isfinite(v) else None
                                            for v in row] for row in rows] for m, rows in lower.items()}}


def from_levels(heatmaps: dict[str, Any]) -> dict[str, np.ndarray]:
    """:func:`colour_levels`' matrices back, symmetric, the diagonal NaN (as the figure leaves it blank)."""
    matrices = {}
    for m, rows in heatmaps["levels"].items():
        matrix = np.full((len(rows), len(rows)), np.nan)
        for i, row in enumerate(rows):
            matrix[i, :i] = matrix[:i, i] = np.asarray(row, dtype=float) * heatmaps["limit"] / LEVELS
        matrices[m] = matrix
    return matrices


STUDY = Study(name="notes002_logreg", title="SLANG paper (notes-002) Table 1: Bayesian logistic regression, "
              "SLANG against mean-field and full-Gaussian VI", make=make,
              cpu_cost="about 2 h 10 min with 2 jobs for its 130 runs (2.6 h of recorded run time, 0.3-428 s a run, "
                       "a1a's 13 one-run sweeps one at a time: the records of its rerun, 2026-11-28/29)",
              items=items(2, 8, 9, 10, 11, 12, 13, 14, 15, 25), full_scale=True, from_records=True)
