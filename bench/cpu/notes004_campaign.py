"""notes004_table2's sweeps on the CPU, a few runs per session, continued on whatever machine comes next (issue 38).

A run (60k images, 30 epochs, a posterior and its predictives) takes one to three hours on 2 cores, and a set is 5 δ x
2-4 posteriors: many sessions. Each run is trained at the commit of its set's committed CPU records (their code
digest: a change to the computing code changes every run key), in a git worktree at that commit, and its record is
written into this checkout's ``outputs/`` as soon as it ends. One δ at a time, every posterior of the set in turn
(``POSTERIORS``; on notes-003's set its diagonal and last-layer ones too), so that the later posteriors take the δ's
MAP network from the fit cache instead of training it again (the cache, like the run folders, stays on the machine).
A run is started only when the records of its posterior say that it ends inside the budget, so a session's end kills
nothing half-done; a run killed anyway leaves no record (runs commit atomically) and, on the same machine, resumes
from its checkpoints first of all. Runs whose records exist are skipped.

    .venv/bin/python bench/cpu/notes004_campaign.py SET [--hours H] [--commit C]   # from the checkout's root

The first run of a set names its commit (``--commit``); later sessions read it from the records. Then commit the
records (``outputs/notes004_table2/runs/cpu/``) and rebuild the page with ``bnnpred reproduce notes004_table2
--report-only``. ``--dry`` prints the plan from the estimates and trains nothing. Work beside it at low priority needs
its autogroup lowered, not only ``nice``: a job started with ``setsid`` has an autogroup of its own, and Linux shares
the cores between autogroups whatever their processes' nice values (``echo 19 > /proc/PID/autogroup``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bnnpred.app.records import export_records
from bnnpred.app.run_index import INDEX, copy_relative
from bnnpred.app.runner import CHECKPOINTS
from bnnpred.errors import BnnpredError
from bnnpred.reproduce import notes004_table2 as study

RECORDS = Path("outputs/notes004_table2/runs/cpu/notes004_table2")
TIERS = {"cpu": study.CPU, "quick": study.QUICK}  # each with its δ list, which the campaign replaces by one δ
ORDER = (100.0, 1000.0, 10.0, 1.0, 0.1)  # the middle of the grid first: a set cut short still brackets its optimum
GUESS = {"training": 3600.0, "kron": 3600.0}  # seconds, until records exist; a posterior's stages otherwise 1200


def plan(name: str, deltas: tuple[float, ...]) -> list[tuple[float, str, tuple[str, ...]]]:
    """(δ, posterior, its overrides) for every run of set ``name``, one δ at a time."""
    posteriors = {**study.POSTERIORS, **(study.NOTES003_POSTERIORS if name == study.NOTES003_SET else {})}
    return [(delta, posterior, overrides) for delta in deltas for posterior, overrides in posteriors.items()]


def recorded_runs(records: Path) -> list[dict]:
    """The ``run`` blocks of the records under ``records`` (their re-evaluations left out; none if it is absent)."""
    return [json.loads(p.read_text())["run"] for p in sorted(records.glob("**/metrics.json"))
            if "evals" not in p.relative_to(records).parts]


def campaign_commit(records: Path) -> str | None:
    """The commit of the set's records; None without records; an error if they name several."""
    commits = {run["commit"] for run in recorded_runs(records)}
    if len(commits) > 1:
        raise BnnpredError(f"the records under {records} name several commits ({', '.join(sorted(commits))}); a set "
                           "is one campaign at one commit: move the others' records aside")
    return commits.pop() if commits else None


def estimate(records: Path, name: str, posterior: str, map_here: bool) -> float:
    """Seconds a run of ``posterior`` on set ``name`` takes: the longest of the set's CPU records of the posterior
    after its MAP network (the other sets' while the set has none; :data:`GUESS` while no set has one), and, unless
    the δ's network is in this machine's fit cache (``map_here``), the longest training of the set's records (the
    other sets', a guess)."""
    def training(run: dict) -> float:  # the seconds its own training took (none when its network was cached)
        trained = run["training"] or {}
        return 0.0 if trained.get("from_fit_cache") else trained.get("seconds", 0.0)

    def nearest(posteriors: str) -> list[dict]:  # the set's records, else every set's
        for sets in (name, "*"):
            runs = [run for folder in sorted(records.glob(f"{sets}/{posteriors}")) for run in recorded_runs(folder)]
            if runs:
                return runs
        return []

    after = max((run["seconds"] - training(run) for run in nearest(posterior)), default=GUESS.get(posterior, 1200.0))
    if map_here:
        return after
    return after + max((seconds for run in nearest("*") if (seconds := training(run))), default=GUESS["training"])


def subdir(delta: float) -> str:
    """The run folder Hydra names for δ (``delta${prior.delta}``: the config holds a float)."""
    return f"delta{float(delta)}"


def train(worktree: Path, runs: Path, name: str, posterior: str, overrides: tuple[str, ...], tier: str,
          delta: float, threads: int) -> int:
    """Train one run with the worktree's code into ``runs/notes004_table2/SET/POSTERIOR/deltaδ`` (the fit cache in
    ``runs/fit_cache``); returns its exit status. The worktree's own ``runs/`` is named relative to it: the overrides
    go into the sweep's index, which is committed and must name no machine's paths."""
    fixed = [o for o in TIERS[tier] if not o.startswith("prior.delta=")]
    runs = runs.relative_to(worktree) if runs.is_relative_to(worktree) else runs
    cache = [] if runs == Path("runs") else [f"fit_cache={runs}/fit_cache"]  # the config's default: runs/fit_cache
    command = [sys.executable, "-m", "bnnpred.cli", "train", "-m", "experiment=notes004_table2", f"dataset={name}",
               f"ood={study.PAIRS[name]}", *overrides, *fixed, f"prior.delta={float(delta)}", "device=cpu",
               f"threads={threads}", "hydra/launcher=joblib", "hydra.launcher.n_jobs=1", *cache,
               f"hydra.sweep.dir={runs}/notes004_table2/{name}/{posterior}", "hydra.sweep.subdir=delta${prior.delta}",
               "progress=true"]
    return subprocess.run(command, cwd=worktree, env={**os.environ, "PYTHONPATH": str(worktree)}).returncode


def record(sweep: Path, to: Path) -> int:
    """Write the records of the sweep's finished runs into ``to``, and its index merged into theirs (every
    machine's jobs); returns how many records were written."""
    written = export_records(sweep, to, "cpu")
    if (sweep / INDEX).is_file():
        copy_relative(sweep, to)
    return len(written)


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("set", choices=sorted(study.PAIRS))
    parser.add_argument("--hours", type=float, default=2.5, help="the budget (default 2.5)")
    parser.add_argument("--commit", help="the commit to run at (default: the set's records')")
    parser.add_argument("--worktree", type=Path, help="a checkout at that commit (default: ../campaign-COMMIT)")
    parser.add_argument("--runs", type=Path, help="the run folders and fit cache (default: the worktree's runs/)")
    parser.add_argument("--deltas", type=float, nargs="+", default=ORDER)
    parser.add_argument("--tier", choices=sorted(TIERS), default="cpu", help="quick: a tiny size, for tests")
    parser.add_argument("--records", type=Path, default=RECORDS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dry", action="store_true", help="print the plan from the estimates; train nothing")
    args = parser.parse_args(argv)
    try:
        recorded_commit = campaign_commit(args.records / args.set)
    except BnnpredError as e:
        return fail(str(e))
    commit = args.commit or recorded_commit
    if commit is None:
        return fail(f"no CPU records of {args.set} under {args.records}: name the commit its campaign runs at with "
                    "--commit")
    if recorded_commit not in (None, commit):
        return fail(f"{args.set}'s records were made at {recorded_commit}, not {commit}: one set, one commit "
                    f"(drop --commit)")
    worktree = (args.worktree or Path("..") / f"campaign-{commit}").resolve()
    if not args.dry and not worktree.is_dir():
        subprocess.run(["git", "worktree", "add", str(worktree), commit], check=True, capture_output=True)
    runs = (args.runs or worktree / "runs").resolve()
    deadline = clock = time.monotonic()
    deadline += args.hours * 3600
    networks = set()  # the δ whose MAP network this invocation has trained (or, dry, plans to)
    for delta, posterior, overrides in plan(args.set, tuple(args.deltas)):
        sweep, to = runs / "notes004_table2" / args.set / posterior, args.records / args.set / posterior
        if (to / subdir(delta) / "metrics.json").is_file():
            continue
        resumed = (sweep / subdir(delta) / CHECKPOINTS).is_dir()
        here = delta in networks or any(sweep.parent.glob(f"*/{subdir(delta)}/metrics.json"))
        need = 0.0 if resumed else estimate(args.records, args.set, posterior, here)  # a run cut short goes first
        clock = clock if args.dry else time.monotonic()
        if clock + need > deadline:
            print(f"notes004_campaign: {posterior} δ={delta:g} not started: about {need:.0f} s, "
                  f"{max(deadline - clock, 0):.0f} s of the budget left", flush=True)
            return 0
        print(f"notes004_campaign: {time.strftime('%FT%T', time.gmtime())} {args.set} {posterior} δ={delta:g} "
              f"({'resumed from its checkpoints' if resumed else f'about {need:.0f} s'}) at {commit}", flush=True)
        networks.add(delta)
        if args.dry:
            clock += need
            continue
        status = train(worktree, runs, args.set, posterior, overrides, args.tier, delta, args.threads)
        print(f"notes004_campaign: exit status {status}; {record(sweep, to)} records of {args.set} {posterior} "
              f"written to {to}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
