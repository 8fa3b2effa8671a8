"""notes004_table2's sweeps on the CPU, a few runs per session, continued on whatever machine comes next (issue 38).

A run (60k images, 30 epochs, a posterior and its predictives) takes one to three hours on 2 cores, and a set is 5 δ x
2-4 posteriors: many sessions. Each run is trained at the commit of its set's committed CPU records (their code
digest: a change to the computing code changes every run key), in a git worktree at that commit, and its record is
written into this checkout's ``outputs/`` as soon as it ends. One δ at a time, every posterior of the set in turn
(``POSTERIORS``; on notes-003's set its diagonal and last-layer ones too), so that the later posteriors take the δ's
MAP network from the fit cache instead of training it again (the cache, like the run folders, stays on the machine);
after the δ's runs, Fig 5.10's re-evaluations of a network (the GP on other M), where its posterior is. A run is
started only when the records of its posterior at the campaign's commit say that it ends inside the budget, and each
re-evaluation likewise, so a session's end kills nothing half-done; a step that does not fit is passed over for the
later ones that do (on the same machine, a δ's network stays in the fit cache for its runs passed over). A run's
record is written as it ends, before its re-evaluations, and each re-evaluation into it as that ends: a session's end
among them keeps the run, and a later call on the same machine makes the ones missing. A run killed anyway leaves no
record (runs commit atomically) and, on the same machine, resumes from its checkpoints, first of all. Runs whose
records exist are skipped; a failed run stops the campaign and leaves the records as they were.

    .venv/bin/python bench/cpu/notes004_campaign.py SET [--hours H] [--commit C]   # from the checkout's root

The first run of a set names its commit (``--commit``); later sessions read it from the records. Then commit the
records (``outputs/notes004_table2/runs/cpu/``) and rebuild the page with ``bnnpred reproduce notes004_table2
--report-only``. ``--dry`` prints the plan from the estimates and trains nothing. Work beside it at low priority needs
its autogroup lowered, not only ``nice``: a job started with ``setsid`` has an autogroup of its own, and Linux shares
the cores between autogroups whatever their processes' nice values (``echo 19 > /proc/PID/autogroup`` for the
session's leader). Measured on a 2-core machine beside a two-job study whose processes were all reniced to 19: a
two-thread GEMM took 8.1 s, 3.6 s once the study's autogroup was set to 19, and 3.9 s with the study stopped (a
one-thread probe does not show it: it leaves the study a core).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from bnnpred.app.compose import predictive_overrides
from bnnpred.app.records import export_records, same_fit
from bnnpred.app.run_files import RECORD
from bnnpred.app.run_index import INDEX, copy_relative
from bnnpred.app.run_record import NotFinished
from bnnpred.app.runner import CHECKPOINTS
from bnnpred.app.saved_runs import eval_folder
from bnnpred.data.root import data_root
from bnnpred.errors import BnnpredError
from bnnpred.provenance import COMMIT_VARIABLE
from bnnpred.reproduce import notes003_images
from bnnpred.reproduce import notes004_table2 as study
from bnnpred.reproduce.budget import longest_evaluation

RECORDS = Path("outputs/notes004_table2/runs/cpu/notes004_table2")
TIERS = {"cpu": study.CPU, "quick": study.QUICK}  # each with its δ list, which the campaign replaces by one δ
GP_M = {"cpu": study.GP_M, "quick": notes003_images.QUICK_GP_M}  # Fig 5.10's re-evaluations per tier
ORDER = (100.0, 1000.0, 10.0, 1.0, 0.1)  # the middle of the grid first: a set cut short still brackets its optimum
# seconds, until the commit has records: the network's training, a posterior's stages after it (others: 1200), one
# re-evaluation; from the Fashion-MNIST record of kron at δ = 100 made at 09ecd77 (training 2,985 s, its stages
# 2,173 s, re-evaluations about 420 s; the MNIST records at 0d5ceb8, older code, took 2,900-3,400 and 2,900-4,400 s)
GUESS = {"training": 3000.0, "kron": 2200.0, "evaluation": 450.0}
MIN = "0001-01-01T00:00:00+00:00"  # the finish of a record that names none


class Refused(Exception):
    """Bad input or state: one line, exit status 2."""


def plan(name: str, deltas: tuple[float, ...]) -> list[tuple[float, str, tuple[str, ...] | None]]:
    """(δ, posterior, its overrides) for every run of set ``name``, one δ at a time, and after a δ's runs (δ,
    posterior, None) for the re-evaluations of each of its runs that the page re-evaluates (:func:`reevaluated`):
    a δ's posteriors before the extra GPs of one of them."""
    posteriors = {**study.POSTERIORS, **(study.NOTES003_POSTERIORS if name == study.NOTES003_SET else {})}
    return [step for delta in deltas for step in [(delta, posterior, overrides) for posterior, overrides
                                                  in posteriors.items()]
            + [(delta, posterior, None) for posterior in posteriors if reevaluated(name, posterior)]]


MAP_ROW = next(key for key, row in notes003_images.ROWS.items() if row == "MAP")  # (posterior, its predictive)


def reevaluated(name: str, posterior: str) -> bool:
    """Whether the page re-evaluates runs of set ``name`` and ``posterior``: notes-003 Fig 5.10's GP against M, of
    the network behind Table 5.2's MAP row on its set."""
    return name == study.NOTES003_SET and posterior == MAP_ROW[0]


def map_valid_nll(run: Path) -> float:
    """The validation NLL of the MAP row's predictive in the run (or record) in ``run``: what the page chooses MAP's
    δ by (:func:`~bnnpred.reproduce.notes003_images.choose`)."""
    return float(json.loads((run / "metrics.json").read_text())["metrics"]["valid"][MAP_ROW[1]]["nll"])


def outdone(run: Path, records: Path) -> str | None:
    """Why the run in ``run`` needs no re-evaluation: a record of another δ under ``records`` (the set's records of
    its posterior) whose MAP has a lower validation NLL, so that the page never chooses this network for Fig 5.10
    (:func:`~bnnpred.reproduce.notes003_images.gp_by_subset_size` re-evaluates MAP's chosen network alone); None
    when none has."""
    own = map_valid_nll(run)
    lower = min(((map_valid_nll(record.parent), record.parent.name) for record in records.glob("*/metrics.json")
                 if record.parent.name != run.name), default=None)
    if lower is None or lower[0] >= own:
        return None
    return f"its MAP's validation NLL {own:.4f} is above δ={float(lower[1].removeprefix('delta')):g}'s {lower[0]:.4f}"


def evaluations(tier: str, own: int | None, commit: str) -> list[int]:
    """The M of Fig 5.10's re-evaluations of a run whose own GP is on ``own`` points (:func:`~bnnpred.reproduce.
    notes003_images.own_gp`): each M of the tier's grid but that one and those tried at ``commit`` and not made
    there (:data:`~bnnpred.reproduce.notes004_table2.TRIED`, which the page states)."""
    return [M for M in GP_M[tier] if M != own and not (M in study.TRIED and same_commit(study.TRIED[M].commit, commit))]


def same_commit(a: str, b: str) -> bool:
    """Whether two spellings of commit hashes (of any length) name the same commit."""
    return a.startswith(b) or b.startswith(a)


def lacking(run: Path, wanted: list[int]) -> list[int]:
    """The M of ``wanted`` whose re-evaluation the run (or record) in ``run`` does not hold."""
    return [M for M in wanted if not (eval_folder(run, predictive_overrides(list(notes003_images.gp_overrides(M))))
                                      / "metrics.json").is_file()]


def recorded_runs(records: Path) -> list[dict]:
    """The ``run`` blocks of the records under ``records`` (none if it is absent): their re-evaluations and the
    dot-folders an interrupted export leaves are not records."""
    return [json.loads(p.read_text())["run"] for p in sorted(records.glob("**/metrics.json"))
            if not any(part == "evals" or part.startswith(".") for part in p.relative_to(records).parts)]


def training(run: dict) -> float | None:
    """The seconds a recorded run spent training its network (0 when it came from the fit cache), or None when the
    record cannot say: the training's clock counts every process, the run's ``seconds`` and ``fit_seconds`` (its
    training and posterior) only the last, so a training longer than the last process's fit was resumed."""
    trained = run.get("training") or {}
    if trained.get("from_fit_cache"):
        return 0.0
    seconds = trained.get("seconds", 0.0)
    return seconds if seconds < run.get("fit_seconds", run["seconds"]) or not seconds else None


def estimate(records: Path, commit: str, posterior: str, map_here: bool, since: datetime | None = None) -> float:
    """Seconds a run of ``posterior`` takes at ``commit``: the longest of its CPU records of that commit (on any set)
    after its MAP network, and, unless the δ's network is in this machine's fit cache (``map_here``), the longest
    training of those records; of the records finished ``since`` (this call's own: this machine, under its load now)
    where there are any; :data:`GUESS` where there are none (records of other code time other code)."""
    def longest(posteriors: str, seconds: Callable[[dict], float | None]) -> float | None:
        timed = [(run, value) for folder in sorted(records.glob(f"*/{posteriors}")) for run in recorded_runs(folder)
                 if same_commit(commit, run["commit"])
                 and training(run) is not None and (value := seconds(run))]
        recent = [value for run, value in timed if since and datetime.fromisoformat(run.get("finished", MIN)) >= since]
        return max(recent or [value for _, value in timed], default=None)

    after = longest(posterior, lambda run: run["seconds"] - training(run))
    after = GUESS.get(posterior, 1200.0) if after is None else after
    if map_here:
        return after
    trained = longest("*", training)  # a network from the fit cache (0 s) times no training
    return after + (GUESS["training"] if trained is None else trained)


def evaluation_estimate(records: Path, name: str, posterior: str, M: int) -> float:
    """Seconds the re-evaluation with the GP on ``M`` points takes: the longest of the set's recorded
    re-evaluations of the posterior, or, where ``M`` is above all their M, the one of the largest M scaled by the
    ratio of the two (the GP's cost per test point grows with M: its kernel row is against M·C outputs); else a
    guess."""
    timed = [(subset_size(folder), seconds) for folder in records.glob(f"{name}/{posterior}/*/evals/*")
             if (seconds := longest_evaluation([folder])) is not None]
    if not timed:
        return GUESS["evaluation"]
    largest = max(m for m, _ in timed)
    if M <= largest:
        return max(seconds for _, seconds in timed)
    return M / largest * max(seconds for m, seconds in timed if m == largest)


def subset_size(evaluation: Path) -> int:
    """The M of the GP that the re-evaluation (or its record) in ``evaluation`` ran."""
    return int(json.loads((evaluation / "metrics.json").read_text())["run"]["changes"]["predictive.gp_subset_size"])


def subdir(delta: float) -> str:
    """The run folder Hydra names for δ (``delta${prior.delta}``: the config holds a float)."""
    return f"delta{float(delta)}"


def bnnpred(worktree: Path, workdir: Path, *args: str) -> int:
    """``bnnpred ARGS`` with the worktree's code, in ``workdir`` (its ``runs/`` and fit cache, ``runs/fit_cache``,
    relative to it: the overrides go into the committed index, which must name no machine's paths)."""
    command = [sys.executable, "-m", "bnnpred.cli", *args, "device=cpu", "progress=true"]
    env = {name: value for name, value in os.environ.items() if name != COMMIT_VARIABLE}  # the worktree's own commit
    return subprocess.run(command, cwd=workdir, env={**env, "PYTHONPATH": str(worktree)}).returncode


def train_args(name: str, posterior: str, overrides: tuple[str, ...], tier: str, delta: float,
               threads: int) -> list[str]:
    """``train -m`` of one run into ``runs/notes004_table2/SET/POSTERIOR/deltaδ``."""
    fixed = [o for o in TIERS[tier] if not o.startswith("prior.delta=")]
    return ["train", "-m", "experiment=notes004_table2", f"dataset={name}", f"ood={study.PAIRS[name]}", *overrides,
            *fixed, f"prior.delta={float(delta)}", f"threads={threads}", "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=1", f"hydra.sweep.dir=runs/notes004_table2/{name}/{posterior}",
            "hydra.sweep.subdir=delta${prior.delta}"]


def record(sweep: Path, to: Path) -> int:
    """Write the records of the sweep's finished runs into ``to``, and its index merged into theirs (every
    machine's jobs); returns how many records were written."""
    written = export_records(sweep, to, "cpu")
    if (sweep / INDEX).is_file():
        copy_relative(sweep, to, merge=True)
    return len(written)


def git(*args: str, cwd: Path = Path(".")) -> str:
    """A git command's output; :class:`Refused` with git's own message if it fails."""
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise Refused(f"git {' '.join(args)}: {(out.stderr.strip().splitlines() or ['failed'])[-1]}")
    return out.stdout.strip()


def campaign_commit(records: Path, given: str | None) -> str:
    """The short hash of the one commit of the set's records, which ``given`` (any spelling) must name if both
    exist; :class:`Refused` if the records name several, disagree with ``given``, or neither exists."""
    commits = {git("rev-parse", "--short", f"{run['commit']}^{{commit}}") for run in recorded_runs(records)}
    if len(commits) > 1:
        raise Refused(f"the records under {records} name several commits ({', '.join(sorted(commits))}); a set is "
                      "one campaign at one commit: move the others' records aside")
    stated = git("rev-parse", "--short", f"{given}^{{commit}}") if given else None
    if commits and stated and stated not in commits:
        raise Refused(f"{records.name}'s records were made at {commits.pop()}, not {stated}: one set, one commit "
                      "(drop --commit)")
    if not commits and not stated:
        raise Refused(f"no CPU records of {records.name} under {records.parent}: name the commit its campaign runs at "
                      "with --commit")
    return stated or commits.pop()


def ready_worktree(worktree: Path, commit: str) -> None:
    """Make the worktree at ``commit`` (detached) if absent; :class:`Refused` if one is there at another commit or
    with uncommitted changes to the package (its runs would name another commit)."""
    if not worktree.is_dir():
        git("worktree", "add", "--detach", str(worktree), commit)
    at = git("rev-parse", "--short", "HEAD", cwd=worktree)
    if at != commit or git("status", "--porcelain", "--", "bnnpred", cwd=worktree):
        raise Refused(f"{worktree} is at {at}{' with uncommitted changes' if at == commit else ''}, not at {commit}: "
                      "give --worktree a clean checkout of the campaign's commit, or remove it")


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("set", choices=sorted(study.PAIRS))
    parser.add_argument("--hours", type=float, default=2.5, help="the budget (default 2.5)")
    parser.add_argument("--commit", help="the commit to run at (default: the set's records')")
    parser.add_argument("--worktree", type=Path, help="a checkout at that commit (default: ../campaign-COMMIT)")
    parser.add_argument("--workdir", type=Path, help="where the runs/ and the fit cache are (default: the worktree)")
    parser.add_argument("--deltas", type=float, nargs="+", default=ORDER)
    parser.add_argument("--tier", choices=sorted(TIERS), default="cpu", help="quick: a tiny size, for tests")
    parser.add_argument("--records", type=Path, default=RECORDS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dry", action="store_true", help="print the plan from the estimates; train nothing")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.hours) and args.hours > 0):
        raise Refused(f"--hours {args.hours}: give a positive number of hours")
    if args.threads < 1:
        raise Refused(f"--threads {args.threads}: give at least 1")
    if any(not (math.isfinite(d) and d > 0) for d in args.deltas) or len(set(args.deltas)) < len(args.deltas):
        raise Refused(f"--deltas {' '.join(map(str, args.deltas))}: give distinct positive prior precisions")
    if args.workdir is not None and not args.workdir.is_dir():
        raise Refused(f"--workdir {args.workdir} is not a folder: make it, or leave it out (the worktree)")
    if args.tier != "cpu" and args.records.resolve() == RECORDS.resolve():
        raise Refused(f"--tier {args.tier} would write its small runs among the campaign's records: give --records")
    return args


def campaign(args: argparse.Namespace) -> int:
    commit = campaign_commit(args.records / args.set, args.commit)
    worktree = (args.worktree or Path("..") / f"campaign-{commit}").resolve()
    if not args.dry:
        data_root(None)  # no run can start without it: refused before the worktree is made
        ready_worktree(worktree, commit)
    workdir = (args.workdir or worktree).resolve()
    since, clock = datetime.now(timezone.utc), time.monotonic()  # this call's start
    deadline = clock + args.hours * 3600
    networks, started = set(), False  # the δ whose MAP network this invocation has trained (or, dry, plans to)
    planned = set()  # dry: the (δ, posterior) of the runs planned
    own_m = next(int(o.split("=")[1]) for o in TIERS[args.tier] if o.startswith("predictive.gp_subset_size="))

    def left() -> float:
        return deadline - (clock if args.dry else time.monotonic())

    def failed(posterior: str, delta: float, status: int, log: Path) -> int:
        print(f"notes004_campaign: {posterior} δ={delta:g} failed (exit status {status}; its log is in {log}); the "
              "records are left as they were", file=sys.stderr, flush=True)
        return 1

    for delta, posterior, overrides in plan(args.set, tuple(args.deltas)):
        relative = Path("runs") / "notes004_table2" / args.set / posterior
        sweep, to, run = workdir / relative, args.records / args.set / posterior, relative / subdir(delta)
        recorded, here = (to / subdir(delta) / "metrics.json").is_file(), made_here(workdir / run)
        if overrides is not None and not recorded:
            resumed = (sweep / subdir(delta) / CHECKPOINTS).is_dir() and not started  # a run cut short goes first
            network = delta in networks or any(sweep.parent.glob(f"*/{subdir(delta)}/metrics.json"))
            need = 0.0 if resumed else estimate(args.records, commit, posterior, network, since)
            if need > left():
                print(f"notes004_campaign: {posterior} δ={delta:g} passed over: about {need:.0f} s, "
                      f"{max(left(), 0):.0f} s of the budget left", flush=True)
                continue
            print(f"notes004_campaign: {time.strftime('%FT%T', time.gmtime())} {args.set} {posterior} δ={delta:g} "
                  f"({'resumed from its checkpoints' if resumed else f'about {need:.0f} s'}) at {commit}", flush=True)
            started = True
            networks.add(delta)
            if args.dry:
                clock += need
                planned.add((delta, posterior))
            elif status := bnnpred(worktree, workdir, *train_args(args.set, posterior, overrides, args.tier, delta,
                                                                  args.threads)):
                return failed(posterior, delta, status, sweep / subdir(delta))
            else:  # its record at once: a session's end among its re-evaluations keeps it
                print(f"notes004_campaign: {record(sweep, to)} records of {args.set} {posterior} written to {to}",
                      flush=True)
        if overrides is not None:
            continue
        # Fig 5.10's re-evaluations, where the run's posterior is, each started only if it ends inside the budget
        if (delta, posterior) in planned:
            todo = evaluations(args.tier, own_m, commit)
        elif (why := outdone(workdir / run if here else to / subdir(delta), to) if here or recorded else None):
            print(f"notes004_campaign: {posterior} δ={delta:g} not re-evaluated: {why} (Fig 5.10 re-evaluates the "
                  "network of MAP's chosen δ)", flush=True)
            continue
        elif here:
            todo = lacking(workdir / run, evaluations(args.tier, notes003_images.own_gp(workdir / run), commit))
            if recorded and same_fit(workdir / run, to / subdir(delta)):  # its record's are of this posterior's bytes
                todo = lacking(to / subdir(delta), todo)
        else:
            if recorded and (missing := lacking(to / subdir(delta), evaluations(args.tier, notes003_images.own_gp(
                    to / subdir(delta)), commit))):
                print(f"notes004_campaign: {posterior} δ={delta:g}'s record lacks {len(missing)} of its "
                      f"re-evaluations (M = {', '.join(map(str, missing))}); only a machine with its posterior can "
                      "make them: train the run again here at the campaign's commit (a posterior byte for byte the "
                      "record's keeps the record's re-evaluations), or remove the record", file=sys.stderr, flush=True)
            continue
        for done, M in enumerate(todo):
            each = evaluation_estimate(args.records, args.set, posterior, M)
            evaluation = notes003_images.gp_overrides(M)
            if each > left():
                print(f"notes004_campaign: {len(todo) - done} re-evaluations of {posterior} δ={delta:g} passed over: "
                      f"about {each:.0f} s for the next, {max(left(), 0):.0f} s of the budget left", flush=True)
                break
            print(f"notes004_campaign: {time.strftime('%FT%T', time.gmtime())} {args.set} {posterior} δ={delta:g} "
                  f"re-evaluation {' '.join(evaluation)} (about {each:.0f} s) at {commit}", flush=True)
            if args.dry:
                clock += each
            elif status := bnnpred(worktree, workdir, "eval", f"run_dir={run}", *evaluation, f"threads={args.threads}"):
                return failed(posterior, delta, status, workdir / run)
            else:
                record(sweep, to)  # into the run's record as it ends
    return 0


def made_here(run: Path) -> bool:
    """Whether ``run`` is a run finished on this machine, its large files (the posterior a re-evaluation reads)
    with it, rather than a record copied in or nothing."""
    return (run / "metrics.json").is_file() and not (run / RECORD).is_file()


def main(argv: list[str] | None = None) -> int:
    try:
        return campaign(arguments(argv))
    except (Refused, BnnpredError, NotFinished) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
