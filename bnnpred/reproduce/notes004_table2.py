"""GLM-predictive paper (notes-004 §3.4-3.5) Table 2 and Fig. 6 on CPU: the 3c3d CNN on real Fashion-MNIST with
MNIST as the OOD set, and MNIST with Fashion-MNIST as OOD; MAP, the bnn predictive of the undampened Kronecker
Laplace-GGN and of the dampened one (Ritter et al.), the glm predictive, and the subset-of-data GP predictive; δ
chosen per method by validation NLL; accuracy, NLL, ECE and OOD-AUC beside the paper's numbers.

Tiers: ``full`` runs ``bnnpred/conf/experiment/notes004_table2.yaml`` as it is for both pairs (a GPU: 60k images, 500
epochs, 16 δ, M = 3200, one seed; the paper's five seeds and the CIFAR-10 pair, ``notes004_table2_cifar10``, are
run with ``bnnpred train -m`` as those presets describe). ``cpu`` (issue 17; about 13 h on 2 cores per pair) trains
on all 60,000 training images for 30 epochs of the paper's schedule (Adam 1e-3 x 1/(⌊epoch/10⌋ + 1), batch 512)
at δ ∈ {0.1, 1, 10, 100, 1000}, validates and tests on the paper's 5k / 5k halves of the official test set with
the 10k OOD test images, 100 predictive samples, one seed, and the GP on M = 800 training points; notes-003 Fig
5.10 re-evaluates MAP's network with the GP on M = 50 to 1600 (:data:`GP_M`; M = 1600 was killed for memory at
the campaign's commit: :data:`TRIED`). ``quick`` is a smoke run. The page states the scale its runs were made at
(read from their configs)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from bnnpred.app.report import figures
from bnnpred.app.report.tables import collect, select_by_valid_nll, summarize
from bnnpred.app.run_record import EVAL_FILES
from bnnpred.errors import BnnpredError
from bnnpred.reproduce import notes003_images
from bnnpred.reproduce.base import Reproduction, Study, document, finished
from bnnpred.reproduce.budget import evaluation_seconds
from bnnpred.reproduce.claims import (
    Claim,
    Compare,
    Verdict,
    added,
    all_of,
    claim,
    copy_passes,
    departs,
    guarded,
    item,
    items,
    lookup,
    moved,
)

PAIRS = {"fashion_mnist": "mnist", "mnist": "fashion_mnist"}  # in-distribution set -> OOD set
# one sweep over δ per posterior; each predictive of a sweep is a table row
POSTERIORS: dict[str, tuple[str, ...]] = {
    "kron": (),
    "kron_dampened": ("inference.dampen=true", "predictive.kinds=[nn]"),
}
ROWS = {("kron", "map"): "MAP", ("kron", "nn"): "bnn predictive", ("kron_dampened", "nn"): "bnn (Ritter et al.)",
        ("kron", "glm"): "glm predictive", ("kron", "gp"): "gp predictive"}
METRICS = ("accuracy", "nll", "ece", "ood_auc")
PAPER = {  # notes-004 Table 2, FMNIST (3c3d, 5 seeds): accuracy %, NLL, ECE, OOD-AUC (MNIST as OOD)
    "MAP": (91.39, 0.258, 0.017, 0.864), "bnn predictive": (84.42, 0.942, 0.411, 0.945),
    "bnn (Ritter et al.)": (91.20, 0.265, 0.024, 0.947), "glm predictive": (92.25, 0.244, 0.012, 0.955),
    "gp predictive": (91.36, 0.250, 0.007, 0.918),
}
# the δ of each tier's sweeps (the full tier: the preset's logspace(-2, 3, 16)); a sweep lacking one is not shown
DELTAS = {"quick": (1, 100), "cpu": (0.1, 1, 10, 100, 1000), "full": tuple(np.logspace(-2, 3, 16))}
CPU = ("inference.map.epochs=30", "predictive.gp_subset_size=800",
       "prior.delta=" + ",".join(f"{d:g}" for d in DELTAS["cpu"]), "seed=117")
QUICK = ("dataset.n_train=300", "dataset.n_test=200", "ood.n_test=100", "inference.map.epochs=1",
         "inference.map.batch_size=100", "predictive.n_samples=5", "predictive.gp_subset_size=20",
         "predictive.gp_prior_factors=[1,10]", "prior.delta=" + ",".join(f"{d:g}" for d in DELTAS["quick"]),
         "seed=117")


NOTES003_SET = "fashion_mnist"  # notes-003 Table 5.2 / Figs 5.9-5.10 are Fashion-MNIST's, MNIST as OOD
# notes-003's diagonal and last-layer rows on the same MAP networks (the fit cache hands each δ's network over); its
# Kronecker posteriors, exact and dampened, are this page's own
NOTES003_POSTERIORS = {name: overrides for name, overrides in notes003_images.POSTERIORS.items()
                       if name not in POSTERIORS}


def sweep_all(r: Reproduction, sets: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """Every run of every set and posterior, Table 2's first (notes-003's extra posteriors on :data:`NOTES003_SET`
    after them: a campaign cut short by its budget has made the main table's runs): one row per (run, split,
    predictive) with its set and posterior; and the sweeps not shown, each with what it lacks: none of its runs, or
    some of its tier's δ (a campaign that stopped mid-sweep: choosing δ among fewer would be another criterion)."""
    sweeps = [(name, POSTERIORS) for name in sets] + [(NOTES003_SET, NOTES003_POSTERIORS)]
    grid = DELTAS[r.tier.value]
    frames, waiting = [], []
    for name, posteriors in sweeps:
        for posterior, overrides in posteriors.items():
            sweep_dir = r.runs / "notes004_table2" / name / posterior
            folder = r.sweep(sweep_dir, "delta${prior.delta}", "experiment=notes004_table2", f"dataset={name}",
                             f"ood={PAIRS[name]}", *overrides, *r.pick(quick=(), cpu=CPU, full=()), quick=QUICK,
                             missing_ok=True)
            runs = collect([folder]) if folder is not None else None
            missing = grid if runs is None else [d for d in grid if not np.isclose(runs["delta"], d).any()]
            if missing:
                made_count = "none" if runs is None else f"{len(grid) - len(missing)} of its {len(grid)} δ"
                waiting.append(f"`{sweep_dir.relative_to(r.runs).as_posix()}` ({made_count} made)")
                if folder is not None:
                    r.forget(folder)  # not shown: not counted in the Runs, Failed runs or provenance either
            else:
                frames.append(runs.assign(set=name, posterior=posterior))
    if not frames:
        raise BnnpredError(f"no whole sweep of notes004_table2 under {r.records}: {', '.join(waiting)}; run the "
                           "study first")
    return pd.concat(frames, ignore_index=True), waiting


def made(frame: pd.DataFrame, name: str, posteriors: dict[str, tuple[str, ...]]) -> bool:
    """Whether ``frame`` holds runs of every one of ``posteriors`` on set ``name`` (a section's sweeps)."""
    return set(posteriors) <= set(frame.loc[frame["set"] == name, "posterior"])


def pending_section(r: Reproduction, waiting: list[str]) -> list[str]:
    """The sweeps the campaign has not made yet (``waiting``: :func:`sweep_all`), and what they cost
    (bench/README.md); none when it is whole."""
    if not waiting:
        return []
    tier = "" if r.tier.value == "cpu" else f" --tier {r.tier.value}"
    return ["## Not yet run", "", "The campaign behind this page has not made these sweeps whole (it stopped at its "
            "device budget, or runs failed: see Failed runs, if listed): " + ", ".join(waiting) + ". Their sections "
            "are left out above rather than shown with fewer δ or filled by runs of another scale. "
            f"`bnnpred reproduce notes004_table2{tier} --device cpu` (or `bench/gpu/campaign.sh` on a lent GPU) "
            "continues it from the committed records, reading the sweeps another device made whole (each section's "
            "scale line names its devices) and training the others on its own, when it runs at the code its runs "
            "name (the Runs section's code digest; a worktree at its commit): a change to the computing code changes "
            "every run key, and then every sweep of that device trains again. On the CPU, where a sweep outlasts a "
            "working session, `bench/cpu/notes004_campaign.py SET --hours H` continues a set one δ at a time, each "
            "run's record written as it ends. What each sweep costs on one H100 and on the CPU: bench/README.md (the "
            "notes-004 Table 2 campaign).", ""]


def labelled(frame: pd.DataFrame, rows: dict[tuple[str, str], str]) -> pd.DataFrame:
    """The runs' rows that a table shows, each named by ``rows`` from its (posterior, predictive kind), accuracy in
    %; the row name replaces the predictive, so that δ is chosen per table row (the two bnn rows share a kind)."""
    names = [rows.get(key) for key in zip(frame["posterior"], frame["predictive"], strict=True)]
    shown = frame.assign(row=names)
    shown = shown[shown["row"].notna()].copy()
    shown["accuracy"] *= 100
    shown["predictive"] = shown["row"]
    return shown


def table(chosen: pd.DataFrame, name: str) -> list[str]:
    """Markdown: each row's test metrics at its chosen δ, the paper's FMNIST numbers in brackets."""
    stats = summarize(chosen[chosen["set"] == name], "test", ["row"]).set_index("row")
    deltas = chosen[(chosen["set"] == name) & (chosen["split"] == "test")].set_index("row")["delta"]
    lines = ["| method | δ | accuracy (%) | NLL | ECE | OOD-AUC |", "|---|---|---|---|---|---|"]
    for row in ROWS.values():
        paper = PAPER[row] if name == "fashion_mnist" else None
        cells = [f"{stats.loc[row, m]:.{1 if m == 'accuracy' else 3}f}"
                 + (f" ({paper[i]:g})" if paper else "") for i, m in enumerate(METRICS)]
        lines.append(f"| {row} | {deltas[row]:g} | " + " | ".join(cells) + " |")
    return lines


def claims(stats: pd.DataFrame, paper: tuple[tuple[float, ...], ...] | None, name: str) -> list[Claim]:
    """One set's (``name``) claims on its test metrics per row (``stats``): notes-004 checklist item 8 (Table 2's
    criteria, a-e) on Fashion-MNIST, whose table the paper prints (``paper`` = the :data:`PAPER` rows of MAP and glm,
    for e), item 10 (its CPU analogue, soft) on either set, each naming the set (both sets file the same criteria), and
    one claim added beside item 10 (not counted toward its verdict): dampening recovers the bnn accuracy (within 1
    point of MAP; notes-004 §7's expectation). Item 8 asks each criterion "on both datasets"
    (FMNIST and CIFAR-10, with the GP on M = 3200): each carries that as written (:func:`on_both`), which has no
    number while CIFAR-10 has no copy here (:func:`cifar10`). The glm criteria of items 8b, 8e and 10 (≥, ≤, within
    a band of the paper's) would also pass a glm predictive that is MAP's copy, so each asks too that glm is not
    MAP's copy (:func:`~bnnpred.reproduce.claims.moved`), beside the notes' criterion alone
    (:func:`~bnnpred.reproduce.claims.copy_passes`)."""
    acc, nll, ece, auc = ({row: lookup(stats, row, m) for row in ROWS.values()} for m in METRICS)
    bnn, ritter, glm, gp = "bnn predictive", "bnn (Ritter et al.)", "glm predictive", "gp predictive"
    others_ece = min((v for row, v in ece.items() if row != gp), default=float("nan"))
    item8 = paper is not None
    not_map = moved(item(4, 10), "glm", nll[glm], nll["MAP"])
    copy = copy_passes("glm predictive")
    absolute = [] if not item8 else [(all_of(
        *(claim(item(4, 8, "e"), Compare(f"|{row} accuracy − the paper's {table[0]:g}|", "≤", 1.5),
                abs(acc[row] - table[0]), note="points") for row, table in zip(("MAP", glm), paper, strict=True)),
        *(claim(item(4, 8, "e"), Compare(f"|{row} NLL − the paper's {table[1]:g}|", "≤", 0.03),
                abs(nll[row] - table[1])) for row, table in zip(("MAP", glm), paper, strict=True))), "e")]
    table2 = [  # the notes' criteria, each with the part whose glm criterion a copy of MAP would pass
        (claim(item(4, 8, "a"), Compare("undampened bnn accuracy", "<", "MAP accuracy", margin=-5),
               (acc[bnn], acc["MAP"]), note="points"), None),
        (all_of(claim(item(4, 8, "b"), Compare("glm accuracy", "≥", "MAP accuracy", margin=-0.2),
                      (acc[glm], acc["MAP"]), note="points"),
                claim(item(4, 8, "b"), Compare("glm NLL", "≤", "MAP NLL", margin=0.005), (nll[glm], nll["MAP"]))), "b"),
        (all_of(claim(item(4, 8, "c"), Compare("glm OOD-AUC", ">", "MAP OOD-AUC"), (auc[glm], auc["MAP"])),
                claim(item(4, 8, "c"), Compare("glm OOD-AUC", ">", "dampened bnn OOD-AUC"), (auc[glm], auc[ritter]))),
         None),
        (claim(item(4, 8, "d"), Compare("gp ECE", "<", "the lowest ECE of the other four"), (ece[gp], others_ece)),
         None),
        *absolute,
    ]
    item10 = [
        claim(item(4, 10), Compare("undampened bnn accuracy", "≤", "MAP accuracy", margin=-3), (acc[bnn], acc["MAP"]),
              note="points"),
        guarded(claim(item(4, 10), Compare("glm accuracy", "≥", "MAP accuracy", margin=-1), (acc[glm], acc["MAP"]),
                      note="points"), not_map, copy),
        guarded(claim(item(4, 10), Compare("glm NLL", "≤", "MAP NLL"), (nll[glm], nll["MAP"])), not_map, copy),
        guarded(claim(item(4, 10), Compare("glm OOD-AUC", "≥", "MAP OOD-AUC"), (auc[glm], auc["MAP"])), not_map, copy),
        added(claim(item(4, 10), Compare("dampened bnn accuracy", "≥", "MAP accuracy", margin=-1),
                    (acc[ritter], acc["MAP"]), note="points"), "notes-004 §7's dampening recovers the bnn accuracy"),
    ]
    return [
        *(on_both(c, (replace(not_map, item=item(4, 8, part)), copy) if part else None)
          for c, part in (table2 if item8 else [])),
        *(replace(c, text=f"{name}: {c.text}", as_written=c.as_written and replace(
            c.as_written, text=f"{name}: {c.as_written.text}")) for c in item10),
    ]


def on_both(notes: Claim, guard: tuple[Claim, str] | None = None) -> Claim:
    """An item-8 criterion on Fashion-MNIST (``notes``, with ``guard`` where a degenerate method would pass it: the
    guard's claim and why it is joined) beside the notes' criterion as written, "on both datasets" (FMNIST and
    CIFAR-10; the GP on M = 3200), which has no number without CIFAR-10."""
    written = Claim(notes.item, f"{notes.text}, on Fashion-MNIST and CIFAR-10", Verdict.not_applicable,
                    "no CIFAR-10 number")
    why = ("no CIFAR-10 copy on these machines: Fashion-MNIST only, at the scale its section states (the GP's M, "
           "the epochs, the δ grid and seeds; the paper's: M = 3200, 500 epochs, 16 δ, 5 seeds)")
    if guard is None:
        return departs(notes, written, why)
    return departs(all_of(notes, guard[0]), written, f"{why}; {guard[1]}")


def cifar10() -> Claim:
    """Item 8's criteria on its second set, CIFAR-10 (a: its undampened bnn below 50 %): not applicable, with why."""
    return claim(item(4, 8, "a"), Compare("CIFAR-10 undampened bnn accuracy", "<", 50), float("nan"),
                 numbers="not run: no CIFAR-10 copy on these machines (the loader is tested on generated archives; "
                         "experiment=notes004_table2_cifar10 runs it where the data is)", note="points")


def choose(frame: pd.DataFrame) -> pd.DataFrame:
    """δ per row by validation NLL, except the gp row, which uses the network of MAP's δ (notes-004 §3.4: "the GP
    uses the network with the best MAP validation NLL"; its own prior factor is already tuned on validation)."""
    chosen = select_by_valid_nll(frame)
    map_runs = chosen.loc[chosen["row"] == "MAP", "run_dir"]
    gp = frame[(frame["row"] == "gp predictive") & frame["run_dir"].isin(map_runs)]
    return pd.concat([chosen[chosen["row"] != "gp predictive"], gp], ignore_index=True)


def fig6(r: Reproduction, chosen: pd.DataFrame, name: str) -> str:
    """Predictive entropy of the test and OOD images per method at its chosen δ, titled with its OOD-AUC."""
    test = chosen[(chosen["set"] == name) & (chosen["split"] == "test")].set_index("row")
    panels = {row: notes003_images.entropy_panel(test.loc[row, "run_dir"], kind, test.loc[row, "ood_auc"])
              for (_, kind), row in ROWS.items()}
    path = figures.plot_entropy_histograms(r.out / f"fig6_entropy_{name}.png", panels,
                                           labels=(f"{name} (test)", f"{PAIRS[name]} (OOD)"))
    return path.name


# Fig 5.10's M on this page's 3c3d networks: notes003_images's grid and M = 1600, the largest of the notes' grid that
# the GP's memory check lets the CPU machines start alone (22 GB of their 23.5 GB, bench/README.md)
GP_M = (*notes003_images.GP_M, 1600)
GP_MEMORY = ("the paper's M = 3200 needs 53 GB for the kernel's features and matrices, bench/README.md: more than "
             "the CPU machines' 23 GB, and more than an 80 GB GPU holds beside three other runs")


def scale(frame: pd.DataFrame, name: str, gp_m: int | None = None) -> str:
    """The scale one set's runs were made at, read from one of them (the runs of a sweep share it): training
    images, epochs and batch, test and OOD images, predictive samples, the GP's M (and ``gp_m``, the table's gp
    row's, where that is a re-evaluation's: :func:`gp_at_largest_m`), the seed."""
    run = finished(Path(frame.loc[frame["set"] == name, "run_dir"].iloc[0]))
    cfg, summary = run.config, run.document["run"]
    images = f"all {summary['n_train']:,}" if cfg.dataset.n_train is None else f"a seeded {summary['n_train']:,} of the"
    epochs = cfg.inference.map.epochs
    valid = "an equal validation half" if cfg.dataset.valid == "test_half" else f"validation: {cfg.dataset.valid}"
    runs = [document(Path(d))["run"] for d in frame.loc[frame["set"] == name, "run_dir"].unique()]
    devices = sorted({run["device_name"] for run in runs})
    kinds = ", ".join(sorted({run["device"] for run in runs}))
    return (f"Trained on {images} training images for {epochs} epoch{'s' * (epochs != 1)} (batch "
            f"{cfg.inference.map.batch_size}); {summary['n_test']:,} test images ({valid}), "
            f"{summary['n_ood']:,} OOD images; {cfg.predictive.n_samples} predictive samples; the GP on "
            f"M = {cfg.predictive.gp_subset_size} training points"
            + (f", the gp row on M = {gp_m} (MAP's network re-evaluated: Fig 5.10 below)" if gp_m else "")
            + f" ({GP_MEMORY}); seed {cfg.seed}; {cfg.dtype} "
            f"on {' and '.join(devices)} (device={kinds}).")


class Notes003(NamedTuple):
    """notes-003's rows on :data:`NOTES003_SET`: its runs (labelled by :data:`~bnnpred.reproduce.notes003_images.
    ROWS`), those chosen per row, Fig 5.10's GP against M on MAP's network and the M of its grid not run
    (:func:`~bnnpred.reproduce.notes003_images.gp_by_subset_size`)."""
    runs: pd.DataFrame
    chosen: pd.DataFrame
    by_m: pd.DataFrame
    not_run: list[int]


def notes003_rows(r: Reproduction, frame: pd.DataFrame) -> Notes003:
    """:class:`Notes003` of the runs in ``frame`` (their GP re-evaluations made or read)."""
    runs = labelled(frame[frame["set"] == NOTES003_SET], notes003_images.ROWS)
    chosen = notes003_images.choose(runs)
    return Notes003(runs, chosen, *notes003_images.gp_by_subset_size(
        r, chosen, r.pick(quick=notes003_images.QUICK_GP_M, cpu=GP_M)))


def gp_at_largest_m(chosen: pd.DataFrame, by_m: pd.DataFrame, name: str) -> tuple[pd.DataFrame, int | None]:
    """Table 2's rows (``chosen``: :func:`choose`'s) with set ``name``'s gp row on the largest M that Fig 5.10
    re-evaluated its network on (``by_m``: :class:`Notes003`'s), where that is above the run's own M: notes-004's
    GP on the largest M that fits in memory (the paper's M = 3200 does not: :data:`GP_MEMORY`). Its test metrics and
    folder (a re-evaluation's, whose entropy histograms Fig. 6 draws) are replaced; returns the rows and that M
    (None: the run's own GP stays)."""
    at = (chosen["set"] == name) & (chosen["row"] == "gp predictive") & (chosen["split"] == "test")
    network = by_m[by_m["run_dir"].isin(chosen.loc[at, "run_dir"])]
    if network.empty or (largest := network.loc[network["M"].idxmax()])["folder"] == str(largest["run_dir"]):
        return chosen, None
    replaced = chosen.copy()
    replaced.loc[at, [*METRICS, "run_dir"]] = [*(largest[m] for m in METRICS), largest["folder"]]
    return replaced, int(largest["M"])


def notes003_section(r: Reproduction, notes003: Notes003) -> list[str]:
    """notes-003 Table 5.2, Fig 5.9 and Fig 5.10 (checklist items 13, 15, 16) on this page's Fashion-MNIST networks
    (issue 17): :mod:`~bnnpred.reproduce.notes003_images`'s rows, choice of δ, claims and GP-against-M
    re-evaluations, on the 3c3d runs instead of that page's substitute MLP."""
    runs, chosen, by_m, not_run = notes003
    s = notes003_images.stats(chosen)
    gp_m = finished(Path(runs["run_dir"].iloc[0])).config.predictive.gp_subset_size
    at_m = by_m[by_m["M"] == notes003_images.NOTES_GP_M]
    at_notes_m = at_m[list(METRICS)].mean() if len(at_m) else None  # Fig 5.10's re-evaluation at the notes' M
    by_m.drop(columns=["run_dir", "folder"]).to_csv(r.out / "fig5_10_gp_by_m.csv", index=False)
    return [
        f"## notes-003 Table 5.2, Fig 5.9 and Fig 5.10 on the same networks ({NOTES003_SET}, OOD: "
        f"{PAIRS[NOTES003_SET]})", "",
        "The second thesis's image rows on this page's 3c3d networks, at the scale stated in the "
        f"{NOTES003_SET} section above: MAP, BNN-KFAC (the bnn predictive), GLM-KFAC (glm), GP-GGN (gp, on the M "
        "stated there), GLM-diag (the diagonal Laplace-GGN's glm predictive) and GLM-GGN-Full (the last layer's "
        "full-covariance Laplace-GGN, the rest fixed at the MAP); δ chosen per row by validation NLL (GP-GGN on "
        "MAP's network); the thesis's Table 5.2 (3c3d, 60k images) in brackets. One seed, so no spread.", "",
        notes003_images.code_versions(runs), "",
        "### Table 5.2 (notes-003 checklist item 13)", "", *notes003_images.table(chosen), "",
        r.table(notes003_images.table_claims(s, network=r.pick(
            quick="ours the same network at smoke scale", cpu="ours the same network trained for 30 epochs, not 500",
            full="ours the same network and schedule"), gp_m=gp_m, at_notes_m=at_notes_m,
            seeds_note=seed_cost(runs, by_m))), "",
        "### Fig 5.9: OOD detection by predictive entropy (item 15)", "",
        f"![fig5.9]({notes003_images.fig5_9(r, chosen)})", "",
        r.table(notes003_images.ood_claims(s, notes003_images.entropy_gaps(chosen))), "",
        "### Fig 5.10: the GP-GGN against its number of training points M (item 16)", "",
        "MAP's network (its chosen δ) re-evaluated with the GP on M random training points (`bnnpred eval`); "
        "`fig5_10_gp_by_m.csv` has the numbers.", "",
        *notes003_images.m_table(by_m, not_run), "", *not_run_note(not_run, chosen),
        f"![fig5.10]({notes003_images.fig5_10(r, by_m)})", "",
        r.table(notes003_images.gp_claims(by_m, s)), "",
    ]


class Tried(NamedTuple):
    """A re-evaluation of Fig 5.10 tried at ``commit`` and not made there, and what happened (``what``)."""
    commit: str
    what: str


# Fig 5.10's M tried on the campaign's network and not made at its commit: the page says what happened, and the
# campaign (bench/cpu/notes004_campaign.py) does not try it again at that commit
TRIED = {1600: Tried("1a82357", "tried on 2026-12-03 on δ = 100's network, trained again to the record's posterior "
                     "bytes: at the campaign's commit 1a82357 the GP held its training points' kernel features twice "
                     "while joining them and copied them again for the kernel products, and the kernel killed it at "
                     "24.1 GB of the 23.5 GB machine, where its memory check had counted 18 GB. Later code holds them "
                     "once: its GP on M = 1600 peaks at 20.8 GB (its check counts 22.3 GB; bench/README.md, the GP's "
                     "peak memory), but a re-evaluation runs at its run's commit: M = 1600 waits for a campaign at "
                     "such a commit, or a machine with more memory")}


def not_run_note(not_run: list[int], chosen: pd.DataFrame) -> list[str]:
    """Why the M of Fig 5.10's grid without a re-evaluation in the records were not run (:data:`TRIED`), and how
    the others are made: on a machine that holds the posterior of MAP's chosen network (``chosen``:
    :func:`~bnnpred.reproduce.notes003_images.choose`'s rows)."""
    untried = [M for M in not_run if M not in TRIED]
    deltas = " ".join(f"{d:g}" for d in sorted(set(chosen.loc[chosen["row"] == "MAP", "delta"])))
    lines = [f"M = {M}: {TRIED[M].what}." for M in not_run if M in TRIED]
    if untried:
        lines.append(f"M = {', '.join(map(str, untried))}: no re-evaluation in the records. Only a machine that "
                     f"holds the posterior of MAP's chosen network (δ = {deltas}) can make it: "
                     f"`bench/cpu/notes004_campaign.py {NOTES003_SET} --deltas {deltas}` there, or after that run is "
                     "trained again to the same bytes at the campaign's commit.")
    return [line for text in lines for line in (text, "")]


def seed_cost(runs: pd.DataFrame, by_m: pd.DataFrame) -> str:
    """What one seed of :func:`notes003_section` cost, from its records: the runs' recorded seconds (training, fit,
    predictives) and the GP re-evaluations' (their predictives' seconds, the OOD images' included), so the page says
    what each further seed asks."""
    run_dirs = set(runs["run_dir"])
    run_hours = sum(document(Path(d))["run"]["seconds"] for d in run_dirs) / 3600
    evaluations = [f for f in set(by_m["folder"]) if f not in run_dirs]
    eval_hours = sum(evaluation_seconds(document(Path(f), EVAL_FILES)) for f in evaluations) / 3600
    seeds = sorted(runs["seed"].unique())
    return (f"{len(seeds)} seed{'s' * (len(seeds) != 1)} run ({', '.join(str(seed) for seed in seeds)}): "
            f"{len(run_dirs)} runs that recorded {run_hours:.1f} h and {len(evaluations)} GP "
            f"re-evaluation{'s' * (len(evaluations) != 1)} {eval_hours:.1f} h (on the devices the scale line above "
            f"names); each further seed asks about {(run_hours + eval_hours) / len(seeds):.1f} h more")


def notes003_pending(r: Reproduction) -> list[str]:
    """notes-003 items 13, 15 and 16 while :func:`notes003_section`'s sweeps are not whole: each not applicable, with
    why (the table, figures and GP re-evaluations need every posterior's sweep on :data:`NOTES003_SET`)."""
    why = (f"not run yet: notes-003's rows need the {', '.join(NOTES003_POSTERIORS)} sweeps on {NOTES003_SET} beside "
           "this page's (Not yet run)")
    rows = [("13", "Table 5.2's criteria on the 3c3d networks"), ("15", "Fig 5.9's OOD criteria on the 3c3d networks"),
            ("16", "Fig 5.10's GP-against-M criteria on the 3c3d networks")]
    return [f"## notes-003 Table 5.2, Fig 5.9 and Fig 5.10 on the same networks ({NOTES003_SET})", "",
            r.table([Claim(item(3, int(number)), text, Verdict.not_applicable, f"no number ({why})")
                     for number, text in rows]), ""]


def make(r: Reproduction) -> str:
    sets = list(PAIRS)
    frame, waiting = sweep_all(r, sets)
    table2 = labelled(frame, ROWS)
    notes003 = notes003_rows(r, frame) if made(frame, NOTES003_SET, {**POSTERIORS, **NOTES003_POSTERIORS}) else None
    chosen, gp_m = gp_at_largest_m(choose(table2), notes003.by_m, NOTES003_SET) if notes003 else (choose(table2), None)
    sections = []
    for name in (name for name in sets if made(frame, name, POSTERIORS)):
        beside = ("the paper's FMNIST numbers (60k images, 500 epochs, 5 seeds) in brackets" if name == "fashion_mnist"
                  else "the paper's MNIST table is in its missing App. B.4")
        sections += [f"## {name} (OOD: {PAIRS[name]}); {beside}", "",
                     scale(table2, name, gp_m if name == NOTES003_SET else None), "", *table(chosen, name),
                     "", r.table(claims(summarize(chosen[chosen["set"] == name], "test", ["row"]).set_index("row"),
                                        (PAPER["MAP"], PAPER["glm predictive"]) if name == "fashion_mnist" else None,
                                        name)),
                     "", f"![fig6]({fig6(r, chosen, name)})", ""]
    deltas = ", ".join(f"{d:g}" for d in np.sort(frame["delta"].unique()))
    return "\n".join([
        "# GLM predictive paper, Table 2 and Fig. 6: 3c3d on Fashion-MNIST and MNIST with OOD detection", "",
        r.provenance("bnnpred reproduce notes004_table2"), "",
        "3c3d CNN trained by Adam at each δ ∈ {" + deltas + "}; the Kronecker-factored Laplace-GGN (KFLR) at the "
        "MAP gives the bnn (sampled networks), glm (per-input logit covariance) and gp (M random training points, "
        "the reference's per-class kernel, prior δ·N/M·factor tuned on validation) predictives; the dampened "
        "posterior ((B + √δ I) ⊗ (A + √δ I), Ritter et al.) gives the second bnn row. δ is chosen per row by "
        "validation NLL (the gp row takes MAP's network, as in the paper); OOD-AUC separates the test images from "
        "the OOD set's by predictive entropy; one seed, so no error bars. Each section states the scale its runs "
        "were made at.",
        "", *sections, "## CIFAR-10 (notes-004 item 8's second set)", "", r.table([cifar10()]), "",
        *(notes003_section(r, notes003) if notes003 else notes003_pending(r)), *pending_section(r, waiting),
    ])


STUDY = Study(name="notes004_table2", title="GLM predictive paper (notes-004) Table 2 and Fig. 6: 3c3d on "
              "Fashion-MNIST / MNIST with OOD detection (MAP, bnn, dampened bnn, glm, gp); notes-003 Table 5.2 and "
              "Figs 5.9-5.10 on the same networks", make=make,
              cpu_cost="on one H100 about 25 min (estimated from its first 10 runs: a kron sweep of 5 δ 8.5 min with 4 "
              "jobs, a dampened one 40 s); on CPU with 2 threads, Fashion-MNIST's 20 runs and 4 GP re-evaluations "
              "12.8 h of recorded run time (a kron run with its network 38-72 min, 2026-12-03), MNIST's 13.3 h (a kron "
              "run 1.7-2.7 h), about 26 core-hours in all",
              items=(*items(4, 8, 10), *items(3, 13, 15, 16)), full_scale=True, from_records=True)
