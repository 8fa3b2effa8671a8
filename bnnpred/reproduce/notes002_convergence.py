"""SLANG paper (notes-002 §3.2-3.3) Figs. 4 and 6: how fast SLANG converges against its baselines.

Logistic regression (checklist item 17): SLANG L = 1, 5, 10 against natural-gradient mean-field (MF Hessian) and
full-Gaussian (FG Hessian) VI at the step sizes of Table 9 (α = β, no decay), 12 samples, Table 8's prior and
minibatch, split 0, several seeds; the negative ELBO per training example after every epoch (8 posterior draws on
the training set). BNN (item 18): 1x50 ReLU on the same sets, prior λ of
Table 10 (bias 1e-6), SLANG L = 8, 16, 32 (α = β = 0.0215, momentum 0.9) against BBB (Adam 0.01, weight noise
shared by the minibatch, started like SLANG at N(θ0, I)); the negative ELBO and the test log-loss of the mean
network after every epoch, and the test log-loss of the 20-sample predictive at the end.

Tiers: ``full`` is the paper's (ten seeds; logistic regression 2,000 epochs; BNN 500 epochs, 20 samples per step).
``cpu`` is notes-002 §6.3 items 2-3 (three seeds; logistic regression 500 epochs on Australian and Breast cancer,
USPS left out: its 257 x 257 eigendecomposition per step makes it the costliest set; BNN 500 epochs on Australian
and Breast cancer, 200 on USPS with L ∈ {8, 32}; 4 samples per step, where 20 would make SLANG factorise a Gram
matrix of L + 640 gradients at every step). ``quick`` is a smoke run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from bnnpred.app.report import figures
from bnnpred.app.report.tables import find_runs
from bnnpred.errors import BnnpredError
from bnnpred.inference.mean_field import kl_to_prior
from bnnpred.reproduce.base import Reproduction, Study, read_trace
from bnnpred.reproduce.base import document as run_document
from bnnpred.reproduce.claims import Claim, Compare, Verdict, all_of, departs, every, item, items, standardised
from bnnpred.reproduce.notes002_logreg import BIAS_DELTA, SETS

LOGREG_LR = {  # notes-002 Table 9: α = β per set and method
    "australian": {"MF Hessian": 0.0215, "SLANG L=1": 0.0117, "SLANG L=5": 0.0117, "SLANG L=10": 0.0117,
                   "FG Hessian": 0.0117},
    "breast_cancer": {"MF Hessian": 0.0215, "SLANG L=1": 0.0398, "SLANG L=5": 0.0398, "SLANG L=10": 0.0398,
                      "FG Hessian": 0.0398},
    "usps_3vs5": {"MF Hessian": 0.0063, "SLANG L=1": 0.0117, "SLANG L=5": 0.0215, "SLANG L=10": 0.0398,
                  "FG Hessian": 0.0398},
}
BNN_PRIOR = {"australian": 8.0, "breast_cancer": 8.0, "usps_3vs5": 32.0}  # notes-002 Table 10
BNN_SLANG_LR, BNN_BBB_LR, BNN_BIAS_DELTA = 0.02154435, 0.01, 1e-6
BNN_WIDTH = 50  # 1x50 ReLU, one logit: 51 biases
SIGMA_ONE_RHO = math.log(math.e - 1)  # softplus(ρ) = 1: BBB starts at SLANG's Σ₀ = I


@dataclass(frozen=True)
class Scale:
    seeds: int
    logreg_sets: tuple[str, ...]
    logreg_epochs: int
    checkpoints: tuple[int, ...]  # epochs at which item 17 compares SLANG L=1 with MF Hessian
    bnn_epochs: dict[str, int]  # BNN sets and their epochs
    bnn_ranks: dict[str, tuple[int, ...]]
    samples: int  # BNN Monte Carlo samples per step
    early: int  # the epoch of item 18's first comparison


def scale(r: Reproduction) -> Scale:
    return r.pick(
        quick=Scale(1, ("australian", "breast_cancer"), 4, (2, 4), {"australian": 3}, {"australian": (8,)}, 2, 2),
        cpu=Scale(3, ("australian", "breast_cancer"), 500, (100, 500),
                  {"australian": 500, "breast_cancer": 500, "usps_3vs5": 200},
                  {"australian": (8, 16, 32), "breast_cancer": (8, 16, 32), "usps_3vs5": (8, 32)}, 4, 50),
        full=Scale(10, tuple(LOGREG_LR), 2000, (100, 2000), dict.fromkeys(BNN_PRIOR, 500),
                   dict.fromkeys(BNN_PRIOR, (8, 16, 32)), 20, 50))


def per_epoch(name: str) -> int:
    _, M, N = SETS[name]
    return N // M


def logreg_method(name: str, method: str, epochs: int) -> tuple[str, ...]:
    lr, (_, M, _) = LOGREG_LR[name][method], SETS[name]
    if method.startswith("SLANG"):
        return ("inference=slang", f"inference.rank={method.split('=')[1]}", f"inference.lr={lr}", "inference.decay=0",
                "inference.n_samples=12", f"inference.batch_size={M}", f"inference.epochs={epochs}")
    return ("inference=voggn", f"inference.structure={'diag' if method.startswith('MF') else 'full'}",
            f"inference.gamma={lr}", f"inference.mean_gamma={lr}", "inference.n_samples=12", "inference.init_var=1.0",
            "inference.tol=0", "inference.plateau_window=null", f"inference.batch_size={M}",
            f"inference.iterations={epochs * per_epoch(name)}", f"inference.log_every={per_epoch(name)}")


def bnn_method(name: str, method: str, epochs: int, samples: int) -> tuple[str, ...]:
    _, M, _ = SETS[name]
    steps = (f"inference.batch_size={M}", f"inference.n_samples={samples}", f"inference.epochs={epochs}")
    if method == "BBB":
        return ("inference=bbb", f"inference.lr={BNN_BBB_LR}", "inference.local_reparam=false",
                f"inference.init_rho={SIGMA_ONE_RHO}", *steps)
    return ("inference=slang", f"inference.rank={method.split('=')[1]}", f"inference.lr={BNN_SLANG_LR}",
            "inference.decay=0", "inference.momentum=0.9", *steps)


def sweep(r: Reproduction, folder: Path, name: str, seeds: int, *overrides: str) -> Path:
    return r.sweep(folder, "seed${seed}", f"seed={','.join(map(str, range(seeds)))}",
                   "experiment=notes002_convergence", f"dataset.dataset={name}", *overrides)


def curves(folder: Path, name: str, method: str) -> pd.DataFrame:
    """Every seed's trace with ``epoch`` = step / (N // M), the negative ELBO, the final predictive's test NLL and the
    network's number of parameters."""
    frames = []
    for run_dir in find_runs([folder]):
        trace = read_trace(run_dir)
        document = run_document(run_dir)
        if document["run"]["dataset"] != f"logreg/{name}":
            raise BnnpredError(f"{run_dir} holds a run on {document['run']['dataset']}, not logreg/{name}; "
                               "delete it and run the study again")
        final = document["metrics"]["test"]
        frames.append(trace.assign(epoch=trace["step"] / per_epoch(name), neg_elbo=-trace["elbo"], set=name,
                                   method=method, seed=run_dir.name,
                                   final_nll=next(iter(final.values()))["nll"],
                                   n_params=document["run"]["n_params"]))
    return pd.concat(frames, ignore_index=True)


def at(frame: pd.DataFrame, name: str, method: str, epoch: float, column: str = "neg_elbo") -> float:
    """The mean over seeds of ``column`` at the trace row nearest ``epoch``."""
    rows = frame[(frame["set"] == name) & (frame["method"] == method)]
    nearest = rows.loc[(rows["epoch"] - epoch).abs() == (rows["epoch"] - epoch).abs().min()]
    return float(nearest[column].mean())


def mean_curve(frame: pd.DataFrame, name: str, method: str) -> pd.Series:
    """The seed-averaged negative ELBO per epoch of one (set, method)."""
    return frame[(frame["set"] == name) & (frame["method"] == method)].groupby("epoch")["neg_elbo"].mean()


def curve_range(frame: pd.DataFrame, name: str, method: str) -> float:
    """How far :func:`mean_curve` moved over the run (its largest minus its smallest value); NaN without a curve."""
    curve = mean_curve(frame, name, method)
    return float(curve.max() - curve.min()) if len(curve) else math.nan


def settled_epoch(frame: pd.DataFrame, name: str, method: str, within: float = 0.01) -> float:
    """The first epoch from which the seed-averaged negative ELBO stays within ``within`` of its final value (the
    mean of its last tenth, which smooths the 8-draw estimate); ``inf`` if its last point is outside; NaN (no
    number) for a curve with a missing or non-finite value, which would otherwise "settle" at its first epoch."""
    curve = mean_curve(frame, name, method)
    if curve.empty or not np.isfinite(curve.to_numpy()).all():
        return math.nan
    final = curve.iloc[-max(1, len(curve) // 10):].mean()
    outside = curve[(curve - final).abs() >= within]
    if outside.empty:
        return float(curve.index[0])
    later = curve.index[curve.index > outside.index[-1]]
    return float(later.min()) if len(later) else math.inf


def logreg(r: Reproduction, s: Scale) -> tuple[list[str], list[Claim]]:
    frames = []
    for name in s.logreg_sets:
        for method in LOGREG_LR[name]:
            delta = SETS[name][0]
            folder = sweep(r, r.runs / "notes002_convergence" / "logreg" / name / slug(method), name, s.seeds,
                           "model.depth=0", f"prior.delta={delta}", f"prior.bias_delta={BIAS_DELTA}",
                           "predictive.kinds=[glm]", "predictive.n_samples=200", *logreg_method(name, method,
                                                                                              s.logreg_epochs))
            frames.append(curves(folder, name, method))
    frame = pd.concat(frames, ignore_index=True)
    figures.plot_mean_curves(r.out / "logreg_convergence.png", frame, x="epoch", panel="set", hue="method",
                             metrics={"neg_elbo": "negative ELBO per example"}, log_y=("neg_elbo",))
    methods = list(LOGREG_LR["australian"])
    lines = ["| set | epoch | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    for name in s.logreg_sets:
        for epoch in s.checkpoints:
            lines.append(f"| {name} | {epoch} | " + " | ".join(f"{at(frame, name, m, epoch):.4f}" for m in methods)
                         + " |")
    return lines, logreg_claims(frame, s.logreg_sets, s.checkpoints)


# notes-002 §6.3 item 2: the CPU plan's logistic-regression sets (the GPU criterion's are all three)
CPU_PLAN_SETS = ("usps_3vs5", "breast_cancer")


def logreg_claims(frame: pd.DataFrame, sets: tuple[str, ...], checkpoints: tuple[int, ...]) -> list[Claim]:
    """notes-002 item 17 on the per-epoch curves of :func:`curves` (means over seeds) of ``sets``; where USPS was
    left out (the cpu tier, for its cost), each claim carries the notes' CPU plan as written, on USPS and Breast
    cancer: it fails where Breast cancer fails it, and otherwise has no number without USPS."""
    coded = sets_claims(frame, sets, checkpoints)
    if "usps_3vs5" in sets:
        return coded
    why = ("USPS left out for its cost (a 257 x 257 eigendecomposition per step): Australian in its place; the "
           "plan's criterion fails where a set of it that was run fails it, else has no number without USPS")
    run = tuple(n for n in CPU_PLAN_SETS if n in sets)
    written = [replace(plan, verdict=Verdict.fails) if part.verdict is Verdict.fails else plan
               for plan, part in zip(sets_claims(frame, CPU_PLAN_SETS, checkpoints),
                                     sets_claims(frame, run, checkpoints), strict=True)]
    return [departs(c, w, why) for c, w in zip(coded, written, strict=True)]


def sets_claims(frame: pd.DataFrame, sets: tuple[str, ...], checkpoints: tuple[int, ...]) -> list[Claim]:
    """Item 17's three criteria on ``sets``."""
    last = checkpoints[-1]
    return [
        *[every(item(2, 17), Compare("SLANG L=1 negative ELBO", "<", "MF Hessian's"),
                {n: (at(frame, n, "SLANG L=1", epoch), at(frame, n, "MF Hessian", epoch)) for n in sets}, over="set",
                note=f"epoch {epoch}") for epoch in checkpoints],
        every(item(2, 17), Compare("|negative ELBO of SLANG L=10 − FG Hessian's|", "<", 0.01),
              {n: abs(at(frame, n, "SLANG L=10", last) - at(frame, n, "FG Hessian", last)) for n in sets}, over="set",
              note=f"epoch {last}"),
        # a flat curve "settles" at its first epoch, and two curves that never settle tie at inf: SLANG L=10's curve
        # must have moved, and settled within the run
        all_of(every(item(2, 17), Compare("epoch SLANG L=10 settles (within 0.01 of its final value)", "≤",
                                          "MF Hessian's"),
                     {n: (settled_epoch(frame, n, "SLANG L=10"), settled_epoch(frame, n, "MF Hessian")) for n in sets},
                     over="set"),
               every(item(2, 17), Compare("epoch SLANG L=10 settles", "≤", last),
                     {n: settled_epoch(frame, n, "SLANG L=10") for n in sets}, over="set", note="within the run"),
               every(item(2, 17), Compare("SLANG L=10 negative ELBO's range over the run", ">", 0.01),
                     {n: curve_range(frame, n, "SLANG L=10") for n in sets}, over="set", note="it moved")),
    ]


def bnn(r: Reproduction, s: Scale) -> tuple[list[str], list[Claim]]:
    frames = []
    for name, epochs in s.bnn_epochs.items():
        for method in [f"SLANG L={rank}" for rank in s.bnn_ranks[name]] + ["BBB"]:
            folder = sweep(r, r.runs / "notes002_convergence" / "bnn" / name / slug(method), name, s.seeds,
                           "model.depth=1", f"model.width={BNN_WIDTH}", "model.activation=relu",
                           f"prior.delta={BNN_PRIOR[name]}", f"prior.bias_delta={BNN_BIAS_DELTA}", "predictive=nn",
                           "predictive.n_samples=20",
                           *bnn_method(name, method, epochs, s.samples))
            frames.append(curves(folder, name, method))
    frame = pd.concat(frames, ignore_index=True)
    figures.plot_mean_curves(r.out / "bnn_convergence.png", frame, x="epoch", panel="set", hue="method",
                             metrics={"neg_elbo": "negative ELBO per example", "test_nll": "test log-loss (mean)"},
                             log_y=("neg_elbo", "test_nll"))
    finals = frame.groupby(["set", "method", "seed"])["final_nll"].first().groupby(["set", "method"]).agg(["mean",
                                                                                                          "sem"])
    lines = ["| set | method | test log-loss at epoch " + f"{s.early} (mean network) | final test log-loss "
             "(20-sample predictive) |", "|---|---|---|---|"]
    for name in s.bnn_epochs:
        for method in [f"SLANG L={rank}" for rank in s.bnn_ranks[name]] + ["BBB"]:
            early, final = at(frame, name, method, s.early, "test_nll"), finals.loc[(name, method)]
            lines.append(f"| {name} | {method} | {early:.4f} | {final['mean']:.4f} ± {final['sem']:.4f} |")
    return lines, bnn_claims(frame, finals, s.bnn_ranks, s.early, s.seeds, s.samples)


NOTES_SEEDS, NOTES_SAMPLES = 10, 20  # notes-002 #18: "20 MC, 500 epochs, 10 seeds"


def start_kl(frame: pd.DataFrame, name: str) -> float:
    """The least KL(q ‖ p) that a posterior with SLANG's starting covariance Σ₀ = I (U = 0, d = 1) can have on set
    ``name``, whatever its mean (whose term δ_j µ_j² / 2 only adds): :func:`kl_to_prior` at µ = 0, σ = 1, the weights
    at the prior δ of Table 10, the ``BNN_WIDTH`` + 1 biases at 1e-6; the parameter count is the runs'
    (``n_params``); NaN without a run on the set. A SLANG whose KL is below it has a covariance that left I."""
    n_params = frame.loc[frame["set"] == name, "n_params"]
    if n_params.empty:
        return math.nan
    biases = BNN_WIDTH + 1
    precision = torch.cat([torch.full((int(n_params.iloc[0]) - biases,), BNN_PRIOR[name], dtype=torch.float64),
                           torch.full((biases,), BNN_BIAS_DELTA, dtype=torch.float64)])
    return float(kl_to_prior(torch.zeros_like(precision), torch.ones_like(precision), precision))


def bnn_claims(frame: pd.DataFrame, finals: pd.DataFrame, ranks: dict[str, tuple[int, ...]], early: int,
               seeds: int = NOTES_SEEDS, samples: int = NOTES_SAMPLES) -> list[Claim]:
    """notes-002 item 18: per (set, rank), SLANG's test log-loss of the mean network at epoch ``early`` below BBB's,
    with its KL(q ‖ p) there below :func:`start_kl` (the mean network cannot show the covariance: one that never
    left its start would pass alone), and its final one (``finals``: mean and s.e. over ``seeds`` seeds per (set,
    method)) within 2 combined s.e. of BBB's; on fewer seeds than the notes' 10 the final criterion departs only in
    the seeds its s.e. is over (2 degrees of freedom at 3 seeds), and the notes' threshold is evaluated on them; runs
    of fewer Monte Carlo ``samples`` per training step than the notes' 20 say so in both departures."""
    fewer = (f"; {samples} Monte Carlo samples per training step, the notes' {NOTES_SAMPLES}"
             if samples < NOTES_SAMPLES else "")
    def combined_se(name: str, method: str) -> float:
        return math.hypot(finals.loc[(name, method), "sem"], finals.loc[(name, "BBB"), "sem"])

    def final_z(name: str, method: str) -> float:
        ours, bbb = finals.loc[(name, method)], finals.loc[(name, "BBB")]
        return standardised(ours["mean"] - bbb["mean"], combined_se(name, method))

    pairs = [(name, f"SLANG L={rank}") for name in ranks for rank in ranks[name]]
    mean_network = all_of(
        every(item(2, 18), Compare("SLANG test log-loss (mean network)", "<", "BBB's"),
              {f"{n} {m}": (at(frame, n, m, early, "test_nll"), at(frame, n, "BBB", early, "test_nll"))
               for n, m in pairs}, over="(set, rank)", note=f"epoch {early}"),
        every(item(2, 18), Compare("SLANG KL(q ‖ p)", "<", "the least of any posterior with its start covariance I"),
              {f"{n} {m}": (at(frame, n, m, early, "kl"), start_kl(frame, n)) for n, m in pairs}, over="(set, rank)",
              note=f"epoch {early}: the covariance moved"))
    predictive = Claim(item(2, 18), f"SLANG test log-loss (20-sample predictive) < BBB's at epoch {early} on every "
                       "(set, rank)", Verdict.not_applicable, "not logged at that epoch")
    final = every(item(2, 18), Compare("final test log-loss: (SLANG − BBB) / combined s.e.", "≤", 2),
                  {f"{n} {m}": final_z(n, m) for n, m in pairs}, over="(set, rank)")
    if seeds < NOTES_SEEDS or fewer:
        final = departs(final, every(item(2, 18), Compare("final test log-loss of SLANG", "≤",
                                                          "BBB's + 2 combined s.e."),
                                     {f"{n} {m}": (finals.loc[(n, m), "mean"],
                                                   finals.loc[(n, "BBB"), "mean"] + 2 * combined_se(n, m))
                                      for n, m in pairs}, over="(set, rank)"),
                        f"{seeds} seeds (the CPU plan has 3 on USPS, the full settings' {NOTES_SEEDS} on Australian "
                        f"and Breast cancer), where the notes' s.e. is over {NOTES_SEEDS}: the notes' threshold on "
                        f"the s.e. of {seeds} seeds, which is erratic, and its 2-s.e. band looser{fewer}"
                        if seeds < NOTES_SEEDS else fewer[2:])
    return [
        departs(mean_network, predictive, "the trace logs the mean network's test log-loss each epoch, the "
                "predictive's only at the end; the mean network's ignores the covariance, whose move the KL "
                f"shows{fewer}"),
        final,
    ]


def slug(method: str) -> str:
    return method.replace(" ", "_").replace("=", "")


def make(r: Reproduction) -> str:
    s = scale(r)
    logreg_lines, logreg_rows = logreg(r, s)
    bnn_lines, bnn_rows = bnn(r, s)
    return "\n".join([
        "# SLANG paper, Figs. 4 and 6: convergence", "", r.provenance("bnnpred reproduce notes002_convergence"), "",
        "Settings: the study's docstring (`bnnpred/reproduce/notes002_convergence.py`); means over "
        f"{s.seeds} seeds on split 0. The negative ELBO per example is estimated from 8 posterior draws on the "
        "training set after every epoch for SLANG and the natural-gradient baselines; BBB's is its training "
        "objective averaged over the epoch's minibatches (an unbiased estimate of the same quantity, half an epoch "
        "behind). The paper's figures have no numbers to compare with; the claims are notes-002 checklist items 17 "
        "and 18.", "",
        f"## Logistic regression ({s.logreg_epochs} epochs, Table 9 step sizes, no decay)", "",
        "![negative ELBO per epoch](logreg_convergence.png)", "", "Negative ELBO per training example:", "",
        *logreg_lines, "", r.table(logreg_rows), "",
        "## BNN, 1x50 ReLU (SLANG α = β = 0.0215 with momentum 0.9, BBB Adam 0.01)", "",
        "![negative ELBO and test log-loss per epoch](bnn_convergence.png)", "", *bnn_lines, "",
        r.table(bnn_rows),
    ]) + "\n"


STUDY = Study(name="notes002_convergence", title="SLANG paper (notes-002) Figs. 4 and 6: convergence of SLANG against "
              "mean-field and full-Gaussian natural-gradient VI (logistic regression) and BBB (BNN)", make=make,
              cpu_cost="about 18 min (63 runs with 2 jobs, measured)", items=items(2, 17, 18), full_scale=True,
              from_records=True, keeps_traces=True)
