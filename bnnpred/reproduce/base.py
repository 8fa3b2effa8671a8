"""What every reproduction study shares: the tier it runs at, training through the CLI (finished runs are
skipped by their run key), the claims it renders (:mod:`bnnpred.reproduce.claims`), and the provenance line."""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import pandas as pd

from bnnpred.app.compose import compose, expand_sweep, predictive_overrides
from bnnpred.app.config import run_key
from bnnpred.app.records import export_record, export_records, kept_files, seed_from_record, verify_record
from bnnpred.app.report.tables import UNRECORDED, check_code, find_runs
from bnnpred.app.run_files import MANIFEST, TRACE, stored
from bnnpred.app.run_index import INDEX, copy_relative, failed_keys, failed_runs
from bnnpred.app.run_record import EVAL_FILES, EVALS, RUN_FILES, FinishedRun, NotFinished, read_finished
from bnnpred.app.saved_runs import eval_config, eval_folder
from bnnpred.errors import BnnpredError
from bnnpred.io import read_json
from bnnpred.provenance import code_commit
from bnnpred.reproduce.budget import Budget, OutOfTime, held_keys, longest_evaluation, longest_seconds
from bnnpred.reproduce.claims import Claim, Item, claims_table
from bnnpred.reproduce.derived import FIGURE_DIGITS, FIGURE_GRID, compact, figure_data, kept, plain, training_points

T = TypeVar("T")


class Tier(str, Enum):
    quick = "quick"  # every study at smoke scale (minutes): checks that the pipeline runs, not the papers' claims
    cpu = "cpu"  # the CPU-scale study whose pages are committed under outputs/ (hours)
    full = "full"  # the papers' full scale, for a GPU


@dataclass
class Reproduction:
    """One study's run: where its runs and page go, at which tier, on which device, and whether to train or only
    read runs.

    A study whose page reads records alone (``from_records``) reads every run through its record under
    ``out/runs/<device>/`` (:mod:`bnnpred.app.run_record`), the path of its run folder under ``runs`` kept: its sweeps
    first copy the records into run folders that lack a finished run (so a campaign continued on another machine
    trains only what is missing), train, then write the records of the finished runs back. Its page can thus be
    rebuilt on a fresh clone from the committed records, and records of the CPU and of a GPU are kept apart: a run
    or sweep that this device's records lack but another device's hold is read from those and never trained here
    (a GPU campaign continued on the CPU trains only what neither made), and the page names each device it read."""

    runs: Path
    out: Path
    tier: Tier
    jobs: int
    report_only: bool = False
    device: str = "cpu"  # where the runs are trained (device=...), and whose records the page reads
    from_records: bool = False
    keeps_traces: bool = False  # whether its records keep the runs' training traces (trace.csv): its page reads them
    budget: Budget = field(default_factory=Budget)  # --hours: what its earlier runs say ends in time is started
    started: float = field(default_factory=time.time)
    claims: list[Claim] = field(default_factory=list)  # every claim the page shows, in order, for claims.json
    failures: list[dict[str, str]] = field(default_factory=list)  # failed runs of its sweeps, listed on the page
    made_by: dict[Path, Made] = field(default_factory=dict)  # what made each run it reads
    # the sweeps a rebuild passed over for another device's whole one: (records, runs held, jobs)
    passed_over: list[tuple[Path, int, int]] = field(default_factory=list)

    def pick(self, *, quick: T, cpu: T, full: T | None = None) -> T:
        """The setting for this tier, the one way a study chooses by tier; the full tier takes the CPU tier's
        unless ``full`` is given."""
        return {Tier.quick: quick, Tier.cpu: cpu, Tier.full: cpu if full is None else full}[self.tier]

    @property
    def recorded(self) -> tuple[str, ...]:
        """The small files its records keep (:func:`~bnnpred.app.records.export_record`)."""
        return kept_files(self.keeps_traces)

    @property
    def records(self) -> Path:
        """Where the records of this device's runs are kept: ``out/runs/<device>``."""
        return self.out / "runs" / self.device

    def record_of(self, run_dir: Path, overrides: Sequence[str] = (), multirun: bool = False) -> Path:
        """The record folder the page reads the run (or sweep) folder ``run_dir`` under ``runs`` from: this
        device's when it holds any finished run of it (a sweep is one device's: this device's records of older code
        are trained again here, not mixed with another's); else, when training, another device's that holds every
        run ``bnnpred train [-m] OVERRIDES`` would make on that device (each job's run key there, finished or failed
        for good); else this device's. A rebuild reads the records as they are (a rebuild at newer code shows the
        runs' own commit and code): this device's sweep when it holds every job's run (finished or failed), else
        the first other device's that does; the devices' sweeps it passed over that hold fewer (campaigns under
        way) are named in the Runs section (:attr:`passed_over`). With no whole sweep, this device's as far as it
        goes, else the first other device's with any."""
        relative = Path(run_dir).relative_to(self.runs)
        own = self.records / relative
        if not self.from_records:
            return own
        others = [records / relative for records in sorted(self.out.joinpath("runs").glob("*"))
                  if records.is_dir() and records != self.records]
        if not self.report_only:
            if _sweep_made_by(own):
                return own
            return next((other for other in others if (made := _sweep_made_by(other))
                         and self._made_there(other, made, overrides, multirun)), own)
        folders = [folder for folder in (own, *others) if _recorded(folder)]
        # one device's records are read however many runs they hold: its jobs are counted (composed) only to choose
        jobs = len(expand_sweep(list(overrides))) if multirun and len(folders) > 1 else 1
        short = [folder for folder in folders if _short(folder, jobs)]
        whole = next((folder for folder in folders if folder not in short), None)
        if whole is None:
            return folders[0] if folders else own
        self.passed_over.extend((folder, _recorded(folder), jobs) for folder in short)
        return whole

    def _made_there(self, record: Path, made: dict[Path, Made], overrides: Sequence[str],
                    multirun: bool) -> bool:
        """Whether another device's ``record`` folder holds (``made``) every run that the overrides make on that
        device, so that a campaign continued here reads them; if not (other code or config, or a campaign cut
        short) the folder is trained here whole, saying so."""
        device = record.relative_to(self.out / "runs").parts[0]
        jobs = expand_sweep(list(overrides)) if multirun else [list(overrides)]
        wanted = {run_key(compose([*job, f"device={device}"])) for job in jobs}
        held = {read_json(run / "metrics.json")["run"].get("key") for run in made} | failed_keys(record)
        missing = wanted - held
        if missing:
            print(f"+ the {device} records of {record} lack {len(missing)} of its {len(wanted)} runs at this code "
                  f"and config: trained on {self.device}", flush=True)
        return not missing

    def run_of(self, record_dir: Path) -> Path:
        """The run folder under ``runs`` of a record folder (of any device)."""
        return self.runs.joinpath(*Path(record_dir).relative_to(self.out / "runs").parts[1:])

    def folder(self, read: Path) -> Path:
        """The run folder (with the run's large files, where they are) of what the page reads as ``read``: the run
        itself, or the run of a record."""
        return self.run_of(read) if self.from_records else Path(read)

    def made_elsewhere(self, record_dir: Path) -> bool:
        """Whether a record folder is another device's: read as it is, never trained or re-evaluated here."""
        return self.from_records and not Path(record_dir).is_relative_to(self.records)

    def _read(self, record_dir: Path) -> None:
        """Say so when the page reads another device's records while training on this one."""
        if self.made_elsewhere(record_dir) and not self.report_only:
            device = Path(record_dir).relative_to(self.out / "runs").parts[0]
            print(f"+ read from the {device} records, not trained on {self.device}: {record_dir} (runs another "
                  "device made; remove its records to train them here)", flush=True)

    def read_from(self) -> list[str]:
        """The devices whose records hold the runs the page reads."""
        runs = self.out / "runs"
        return sorted({Path(read).relative_to(runs).parts[0] for read in self.made_by
                       if Path(read).is_relative_to(runs)})

    def forget(self, folder: Path) -> None:
        """Leave a sweep the page does not show (its runs, failures and devices) out of its Runs and Failed runs
        sections and its provenance."""
        self.made_by = {read: made for read, made in self.made_by.items() if Path(folder) not in Path(read).parents}
        self.failures = [failure for failure in self.failures if failure.get("sweep") != str(folder)]

    def train_once(self, run_dir: Path, *overrides: str, quick: tuple[str, ...] = ()) -> Path:
        """``bnnpred train OVERRIDES`` into ``run_dir`` (the quick tier appends ``quick``); returns the folder the
        page reads: the run's record for a study built from records."""
        record = self.record_of(run_dir, (*overrides, *self._quick(quick)))
        train = not self.report_only and not self.made_elsewhere(record)
        if self.from_records and train and (record / MANIFEST).is_file():
            seed_from_record(record, run_dir)
        if train:
            job = [*overrides, *self._quick(quick), *self._device()]
            if _held(run_dir, [job]):
                print(f"+ finished already: {run_dir}", flush=True)
            else:
                self._within_budget(run_dir, [job], [run_dir, record], 1)
                _bnnpred("train", *job, f"hydra.run.dir={run_dir}")
            if self.from_records:
                export_record(run_dir, record, self.recorded)
        if self.from_records:
            verify_record(record)
            self._read(record)
        read = record if self.from_records else run_dir
        self.made_by[read] = _made_by(document(read))
        return read

    def sweep(self, sweep_dir: Path, subdir: str, *overrides: str, quick: tuple[str, ...] = (),
              missing_ok: bool = False) -> Path | None:
        """``bnnpred train -m OVERRIDES`` with ``self.jobs`` joblib workers into ``sweep_dir/<subdir>``; returns
        the folder the page reads (its records for a study built from records, :meth:`mirror`). A run that fails
        (a broken fit, the health checks) fails alone: it is left out of the page's tables, which lists it with
        its reason (:meth:`failures_section`); a sweep with no finished run is an error, or with ``missing_ok``
        when only rebuilding the page or when the budget does not start it, None (a campaign that has not reached
        it yet: the study lists it); a sweep the budget does not start is read as far as its records go."""
        records = self.record_of(sweep_dir, (*overrides, *self._quick(quick)), multirun=True)
        train = not self.report_only and not self.made_elsewhere(records)
        if self.from_records and train and records.is_dir():
            for record in _sweep_made_by(records):
                seed_from_record(record, self.run_of(record))
        skipped, launch = False, train
        if train:
            jobs = expand_sweep([*overrides, *self._quick(quick), *self._device()])
            launch = not _held(sweep_dir, jobs)
            if not launch:
                print(f"+ finished already: {sweep_dir} ({len(jobs)} run{'s' * (len(jobs) != 1)})", flush=True)
            try:
                if launch:
                    self._within_budget(sweep_dir, jobs, [sweep_dir, records], self.jobs)
            except OutOfTime as e:
                if not missing_ok:
                    raise
                print(f"+ not started, the page lists what it lacks: {e}", flush=True)  # a campaign's later sweep
                train, skipped, launch = False, True, False
        if launch:
            _bnnpred("train", "-m", *overrides, *self._quick(quick), *self._device(), "hydra/launcher=joblib",
                     f"hydra.launcher.n_jobs={self.jobs}", f"hydra.sweep.dir={sweep_dir}",
                     f"hydra.sweep.subdir={subdir}", failures_allowed=True)
        read = sweep_dir
        if self.from_records:  # a rebuild reads the records and never writes them
            read = self.mirror(sweep_dir) if train else records
            for record in find_runs([read]) if read.is_dir() else []:
                verify_record(record)
        made_by = _sweep_made_by(read)
        if made_by and self.from_records:
            self._read(read)
        if not made_by and missing_ok and (self.report_only or skipped):
            return None
        if not made_by:
            raise BnnpredError(f"no finished runs in {read}; run the study without --report-only first")
        self.made_by.update(made_by)
        self.failures.extend({**failure, "sweep": str(read)} for failure in failed_runs(read))
        return read

    def mirror(self, sweep_dir: Path) -> Path:
        """Make the sweep's records hold exactly the records of its finished runs of this device (of the code the
        page reads) and its index of jobs (for the failed ones); returns the records' folder."""
        records = self.records / Path(sweep_dir).relative_to(self.runs)
        if not sweep_dir.is_dir():  # the sweep never started (a refused override): its records stay as they are
            return records
        newest = {self.records / run_dir.relative_to(self.runs) for run_dir in _sweep_made_by(sweep_dir)}
        kept = {record for record in export_records(sweep_dir, records, self.device, self.recorded)
                if record in newest}
        for stale in set(find_runs([records]) if records.is_dir() else ()) - kept:
            shutil.rmtree(stale)
        if (sweep_dir / INDEX).is_file():
            copy_relative(sweep_dir, records)
        return records

    def runs_of(self, sweep_dir: Path) -> list[Path]:
        """The finished runs of a sweep that the page reads: of its newest code, as
        :func:`~bnnpred.app.report.tables.collect` keeps them."""
        return sorted(run_dir for run_dir in self.made_by if sweep_dir in run_dir.parents)

    def evaluate(self, run_dir: Path, *overrides: str) -> Path:
        """``bnnpred eval run_dir=RUN_DIR OVERRIDES`` (skipped when only rebuilding the page); returns the
        re-evaluation's folder ``RUN_DIR/evals/<key>``. For a study built from records ``run_dir`` is a record: the
        run's own folder is evaluated (a re-evaluation its record holds already is found there and kept) and its
        record written again with the re-evaluation's."""

        if not self.report_only and not self.made_elsewhere(run_dir):
            target = self.folder(run_dir)
            if _evaluation_held(target, [*overrides, *self._device()]):
                print(f"+ finished already: {target} ({' '.join(overrides)})", flush=True)
            else:
                if self.budget.bounded and not _evaluated(target, overrides):
                    others = [folder for sweep in (target.parent, Path(run_dir).parent)
                              for folder in sweep.glob(f"*/{EVALS}/*")]  # its sweep's runs' re-evaluations
                    self.budget.allow(f"{target} ({' '.join(overrides)})", 1, longest_evaluation(others), 1,
                                      unit="re-evaluation")
                _bnnpred("eval", f"run_dir={target}", *overrides, *self._device())
            if self.from_records:
                export_record(target, run_dir, self.recorded)
        folder = eval_folder(run_dir, predictive_overrides(list(overrides)))
        self.made_by[folder] = _made_by(document(folder, EVAL_FILES))
        return folder

    def evaluate_where_possible(self, run_dir: Path, *overrides: str) -> Path | None:
        """:meth:`evaluate`, or None where the re-evaluation can be neither made (only the page is rebuilt, or the
        run's posterior is on another device) nor read from the run's record: a point of a grid that the page lists
        as not run instead of failing."""
        if (self.report_only or self.made_elsewhere(run_dir)) and not _evaluated(run_dir, overrides):
            return None
        return self.evaluate(run_dir, *overrides)

    def _within_budget(self, folder: Path, jobs: list[list[str]], holding: list[Path], workers: int) -> None:
        """Return if the ``jobs`` (override lists) of the run or sweep ``folder`` that the ``holding`` folders (its
        run folders and records) lack end inside the budget, from the longest earlier run there; else raise
        :class:`~bnnpred.reproduce.budget.OutOfTime`."""
        if not self.budget.bounded:
            return
        missing = {run_key(compose(job)) for job in jobs} - held_keys(holding)
        self.budget.allow(str(folder), len(missing), longest_seconds(holding), workers)

    def derived(self, read: Path, name: str, compute: Callable[[Path], Mapping[str, Any]],
                inputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The numbers ``compute(run folder)`` takes from the large files (posterior, predictions) of the run the page
        reads as ``read`` (what :meth:`train_once` or :meth:`sweep` gave), as JSON data; ``inputs`` is what
        ``compute`` depends on beyond the run (a grid, a margin). For a study built from records they are kept in
        ``out/derived/<device>/<run path>/NAME.json``, so that its page, figures included, rebuilds where only the
        records are (:mod:`bnnpred.reproduce.derived`)."""
        if not self.from_records:
            return json.loads(compact(plain(compute(read))))
        relative = Path(read).relative_to(self.out / "runs")
        return kept(read, self.folder(read), self.out / "derived" / relative / f"{name}.json", compute, inputs or {})

    def figure_numbers(self, read: Path, *figures: str) -> dict[str, Any]:
        """The numbers of the predictive ``figures`` (``predictive_glm``, ...) of the run the page reads as ``read``,
        on the pages' grid (:func:`~bnnpred.reproduce.derived.figure_data`), kept as :meth:`derived` keeps numbers;
        drawn by :func:`~bnnpred.app.report.run_figures.predictive_drawings`."""
        numbers = self.derived(read, "figures", figure_data(FIGURE_GRID, figures),
                               {"grid_points": FIGURE_GRID, "digits": FIGURE_DIGITS, "figures": sorted(figures)})
        points = training_points(read)
        return {**numbers, "X": points["x"], "y": points["y"]}

    def _device(self) -> tuple[str, ...]:
        """The device override of every run a study built from records trains (its run keys name the device)."""
        return (f"device={self.device}",) if self.from_records else ()

    def _quick(self, overrides: tuple[str, ...]) -> tuple[str, ...]:
        """The quick tier's overrides; its smoke-scale fits are kept when their numbers are broken (flagged), since
        it checks that the pipeline runs, not the papers' claims."""
        return (*overrides, "keep_unhealthy=true") if self.tier is Tier.quick else ()

    def table(self, claims: Sequence[Claim]) -> str:
        """The claims' Markdown table (:func:`~bnnpred.reproduce.claims.claims_table`), recorded for the page's
        ``claims.json``: the one way a page shows claims."""
        self.claims.extend(claims)
        return claims_table(claims)

    def failures_section(self) -> str:
        """``## Failed runs``: each failed run of the page's sweeps with its overrides and reason; empty if none."""
        if not self.failures:
            return ""
        rows = [f"| {Path(f['run_dir']).name} | `{f['overrides']}` | {f['message'].replace('|', '/')} |"
                for f in self.failures]
        return "\n".join(["## Failed runs", "", "Left out of every table and claim above:", "",
                          "| run | overrides | why it failed |", "|---|---|---|", *rows, ""])

    def runs_section(self) -> str:
        """``## Runs``: the finished runs the page reads (its single runs and re-evaluations, and the runs of its
        sweeps of the code its tables keep: :func:`~bnnpred.app.report.tables.check_code`), counted by the commit and
        code digest that made them; the provenance line names the commit that built the page, which a page rebuilt
        with ``--report-only`` need not share with its runs. Empty if the page read no run."""
        if not self.made_by:
            return ""
        counts = Counter((made.commit, made.code) for made in self._spelled()).most_common()
        by_code = ", ".join(f"{n} at commit {commit} (code {code})" if commit != UNRECORDED else
                            f"{n} with no recorded commit (code {code})" for (commit, code), n in counts)
        machines = Counter(made.machine for made in self.made_by.values()).most_common()
        on = ", ".join(f"{n} on {name}" if name else f"{n} with no recorded machine" for name, n in machines)
        total = len(self.made_by)
        return "\n".join(["## Runs", "", f"The page reads {total} finished run{'s' * (total != 1)}: {by_code}. Made "
                          f"on (each run records its machine; the same run may round differently on another "
                          f"processor): {on}.{self._passed_over()}", ""])

    def _passed_over(self) -> str:
        """A sentence on the sweeps the page passed over, each for another device's whole one (a campaign under way:
        its records are committed as its runs end); empty if none."""
        if not self.passed_over:
            return ""
        runs = self.out / "runs"
        sweeps = "; ".join(f"`{records.relative_to(runs).as_posix()}` ({held} of its {jobs} runs)"
                           for records, held, jobs in self.passed_over)
        return (f" Not read: the records of sweeps that are not whole yet (campaigns under way), each shown from "
                f"another device's whole sweep until they are: {sweeps}.")

    def provenance(self, command: str) -> str:
        """``Made by COMMAND at commit C on DATE, machine, wall time``, and what of the page's runs (read so far) was
        made by uncommitted code (:meth:`uncommitted`)."""
        return self._made(command) + self.uncommitted()

    def uncommitted(self) -> str:
        """A sentence on the runs the page reads that a working tree with uncommitted changes made (commit
        ``…+dirty``), naming their code digests and, where one of the page's runs at a clean commit has the same
        digest (the package's code was committed; the changes lay elsewhere), that commit; empty if none."""
        dirty = [made for made in self.made_by.values() if made.commit.endswith(DIRTY)]
        if not dirty:
            return ""
        clean = {made.code: made.commit for made in self._spelled()
                 if made.commit != UNRECORDED and not made.commit.endswith(DIRTY)}
        codes = "; ".join(f"code {code}, " + (f"the code of commit {clean[code]}" if code in clean else
                                              "which no run of a clean commit here has")
                          for code in sorted({made.code for made in dirty}))
        return (f" {len(dirty)} of the {len(self.made_by)} runs it reads were made by a working tree with uncommitted "
                f"changes (commit …+dirty: {codes}); rerunning them at a clean commit replaces them.")

    def _spelled(self) -> list[Made]:
        """What made each run the page reads, each commit in one spelling (:func:`one_spelling`)."""
        spelled = one_spelling(made.commit for made in self.made_by.values())
        return [made._replace(commit=spelled[made.commit]) for made in self.made_by.values()]

    def _unread(self, read: list[str]) -> str:
        """A sentence on the records of other devices kept beside the page and not read (a table shows one device's
        sweep where that sweep is whole, never an average of two devices' runs); empty if none. The page's own
        device and a campaign's sweeps passed over are left to the Runs section (:meth:`_passed_over`)."""
        runs = self.out / "runs"
        named = {*read, self.device, *(records.relative_to(runs).parts[0] for records, _, _ in self.passed_over)}
        unread = sorted(p.name for p in runs.iterdir() if p.is_dir() and p.name not in named) if runs.is_dir() else []
        if not unread:
            return ""
        return "".join(f" The records in `runs/{device}/` are kept and not read here: each table shows one device's "
                       f"whole sweeps, and `--device {device}` builds the page from that device's first."
                       for device in unread)

    def _made(self, command: str) -> str:
        if self.from_records:  # the same text wherever and whenever the page is rebuilt from its records
            read = self.read_from() or [self.device]
            folders = " and ".join(f"`runs/{device}/`" for device in read)
            return (f"Made by `{command}` (tier {self.tier.value}, device {self.device}) from the records of its "
                    f"runs, {folders} beside this page (the Runs section names the commits that made "
                    f"them; `--report-only` rebuilds this page from them on any machine).{self._unread(read)}")
        commit = code_commit() or UNRECORDED  # ``…+dirty`` where the page was made by uncommitted code
        minutes = (time.time() - self.started) / 60
        took = (f"measured in {minutes:.1f} min (it reads no runs: every number is measured when the page is made)"
                if not self.made_by else
                "page rebuilt from the runs (the commits that made them: the Runs section)" if self.report_only
                else f"{minutes:.1f} min including cached runs")
        return (f"Made by `{command}` (tier {self.tier.value}) at commit {commit} on "
                f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()} {platform.system()} "
                f"({os.cpu_count()} cores), {took}.")


@dataclass(frozen=True)
class Study:
    """A page under ``outputs/<name>/``: ``make(r)`` trains what is missing (unless ``r.report_only``) and
    returns the page's Markdown. A module of :mod:`bnnpred.reproduce` defining ``STUDY`` registers it."""

    name: str
    title: str
    make: Callable[[Reproduction], str]
    cpu_cost: str  # wall time of the CPU tier on 2 cores, for the README
    items: tuple[Item, ...]  # the checklist items its claims answer (the index lists them before claims.json exists)
    full_scale: bool = False  # whether the full tier differs from the CPU tier (GPU presets)
    # whether its page is built from its runs' records alone (outputs/<name>/runs/<device>/, committed), so that a
    # fresh clone rebuilds it and a campaign continues on another machine
    from_records: bool = False
    keeps_traces: bool = False  # whether its records keep the runs' training traces: only where its page reads them


def _bnnpred(*args: str, failures_allowed: bool = False) -> None:
    """``bnnpred ARGS``; a failure is an error, except a sweep's failed runs (exit 2) with ``failures_allowed``."""
    command = [sys.executable, "-m", "bnnpred.cli", *args]
    print("+ bnnpred", " ".join(shlex.quote(arg) for arg in args), flush=True)  # pasteable into a shell
    result = subprocess.run(command, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if result.returncode != 0 and not (failures_allowed and result.returncode == 2):
        raise BnnpredError(f"'bnnpred {' '.join(args[:3])} ...' failed (exit {result.returncode}); see above")


def _recorded(records: Path) -> int:
    """How many runs a record folder (a run's or a sweep's) holds, readable or not: a broken one is refused when it
    is read, never passed over."""
    return len(find_runs([records])) if records.is_dir() else 0


def _short(records: Path, jobs: int) -> bool:
    """Whether a run's or a sweep's records hold fewer runs, finished or failed for good, than its ``jobs``."""
    return _recorded(records) + len(failed_keys(records)) < jobs


def _held(folder: Path, jobs: list[list[str]]) -> bool:
    """Whether each of ``jobs`` (override lists) is a finished run under ``folder`` (a run's or a sweep's) as
    ``bnnpred train`` finds one (its run key, its files verified): it would skip them all, so nothing is started
    (about 6 s of Python and imports per call saved). Composed only when there are as many runs as jobs."""
    runs = find_runs([folder]) if Path(folder).is_dir() else []
    if len(runs) < len(jobs):
        return False
    finished = set()
    for run in runs:
        try:
            finished.add(read_finished(run).document["run"].get("key"))
        except NotFinished:
            continue
    return {run_key(compose(job)) for job in jobs} <= finished


def _evaluation_held(run_dir: Path, overrides: Sequence[str]) -> bool:
    """Whether ``bnnpred eval run_dir=RUN_DIR OVERRIDES`` would keep a re-evaluation it finds (this code's key for
    it, its files verified) instead of making one."""
    try:
        merged = eval_config(read_finished(run_dir), predictive_overrides(list(overrides)))
        read_finished(Path(run_dir) / EVALS / run_key(merged), EVAL_FILES)
    except (NotFinished, OSError):
        return False
    return True


def _evaluated(run_dir: Path, overrides: Sequence[str]) -> bool:
    """Whether the run in ``run_dir`` holds a finished re-evaluation with ``overrides``."""
    try:
        return (eval_folder(run_dir, predictive_overrides(list(overrides))) / MANIFEST).is_file()
    except (NotFinished, OSError):
        return False


def read_trace(run_dir: Path) -> pd.DataFrame:
    """A run's training trace (``trace.csv``), as the run wrote it or gzipped in its record; a run or record that
    holds none is one error naming it."""
    path = stored(Path(run_dir), TRACE)
    if not path.is_file():
        raise BnnpredError(f"{run_dir} holds no training trace ({TRACE}); a record keeps it only for a study whose "
                           "page reads traces (keeps_traces): train the run again with that study")
    return pd.read_csv(path)


DIRTY = "+dirty"  # the mark of a commit whose working tree had uncommitted changes (provenance.code_commit)


class Made(NamedTuple):
    """What made a run (or re-evaluation), as its ``metrics.json`` records it."""

    commit: str  # ``unrecorded`` if none
    code: str  # the code digest, ``unrecorded`` if none
    machine: str | None  # ``device_name``: the processor's model where Linux gives it, the GPU's name


def one_spelling(commits: Iterable[str]) -> dict[str, str]:
    """Each recorded commit mapped to the longest spelling of the same commit among ``commits``: git abbreviates a
    hash to as many hex digits as its clone needs, so two clones record one commit as ``1a82357`` and ``1a823577``.
    A spelling that two longer ones extend differently (two commits) stays as it is; ``+dirty`` ones keep apart."""
    commits = set(commits)

    def extends(longer: str, shorter: str) -> bool:
        return (longer.endswith(DIRTY) == shorter.endswith(DIRTY)
                and longer.removesuffix(DIRTY).startswith(shorter.removesuffix(DIRTY)))

    spelled = {}
    for commit in commits:
        longer = [other for other in commits if extends(other, commit)]
        longest = max(longer, key=len)
        spelled[commit] = longest if all(extends(longest, other) for other in longer) else commit
    return spelled


def _made_by(document: dict) -> Made:
    """What a run's (or re-evaluation's) ``metrics.json`` records made it."""
    run = document["run"]
    return Made(run.get("commit") or UNRECORDED, run.get("code") or UNRECORDED, run.get("device_name"))


def _sweep_made_by(sweep_dir: Path) -> dict[Path, Made]:
    """The commit and code of each finished run under ``sweep_dir`` that :func:`~bnnpred.app.report.tables.collect`
    reads from it: runs without a manifest or a readable record left out, and of several code versions only the
    newest's. Only ``metrics.json`` is read: ``collect`` verifies every file against its checksum, and hashing the
    full posteriors twice doubled a page's rebuild (525 runs of notes004_table1 on 2 cores: 43 s against collect's
    23 s; reading the records takes 0.15 s)."""
    made_by, finished = {}, {}
    for run_dir in find_runs([sweep_dir]) if sweep_dir.is_dir() else []:
        try:
            if (run_dir / MANIFEST).is_file():
                summary = read_json(run_dir / "metrics.json")
                made_by[run_dir], finished[run_dir] = _made_by(summary), summary["run"].get("finished")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # not a run's record: collect skips it
            continue
    if not made_by:
        return {}
    frame = pd.DataFrame({"run_dir": list(map(str, made_by)), "code": [made.code for made in made_by.values()],
                          "finished": list(finished.values())})
    kept = set(check_code(frame, "newest")["run_dir"])
    return {run_dir: made for run_dir, made in made_by.items() if str(run_dir) in kept}


def finished(run_dir: Path, required: tuple[str, ...] = RUN_FILES) -> FinishedRun:
    """A finished run (or re-evaluation) read back verified: its config and metrics document, else an error naming
    why."""
    try:
        return read_finished(run_dir, required)
    except NotFinished as e:
        raise BnnpredError(f"{run_dir} is not a finished run ({e}); run the study without --report-only "
                           "first") from e


def document(run_dir: Path, required: tuple[str, ...] = RUN_FILES) -> dict:
    """The verified ``metrics.json`` of a finished run (or re-evaluation), else an error naming why."""
    return finished(run_dir, required).document
