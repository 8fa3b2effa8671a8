"""``bnnpred train | eval | report | data``.

``train`` is a Hydra application (single runs and ``-m`` sweeps with any Hydra launcher). Before Hydra
starts, every run of the call is composed and checked, so a bad name, key, type or value is a one-line
error with exit status 2 and nothing is written.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import logging
import os
import pkgutil
import shutil
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from bnnpred.app.compose import (
    CONF_DIR,
    base_overrides,
    check_job,
    compose,
    expand_sweep,
    predictive_overrides,
)
from bnnpred.errors import BnnpredError

USAGE = """usage: bnnpred <command> [args]

commands:
  train [-m] [group=option ...] [key=value ...]   train and evaluate one run (or sweep with -m); train --help
  eval run_dir=PATH [predictive=KIND] [predictive.n_samples=S ...]   re-evaluate a saved run (into PATH/evals/)
  report [DIR ...] [--out DIR] [--select-by valid_nll] [--evals]  tables over run directories (none: every page)
  reproduce [STUDY ...] [--tier quick|cpu|full] [--report-only] [--hours H]   the papers' tables and figures
  data fetch|verify NAME [--root PATH] [--force]                    data files with checksums
  --version                                       the version, code digest and commit
  -sc install=bash                                shell completion: eval "$(bnnpred -sc install=bash)"
"""

log = logging.getLogger("bnnpred")
# Every job appends "status<TAB>seconds<TAB>one-line error" to this file (launcher workers inherit the variable;
# on a cluster whose nodes cannot see it, progress and failures are left to the launcher's own logs).
LEDGER_ENV = "BNNPRED_SWEEP_LEDGER"
SWEEP_ENV = "BNNPRED_SWEEP_ID"
STOPPED_FOR_TIME = 3  # the exit status of `reproduce --hours` when a study stopped before training that would not fit


COMPLETION_FLAGS = ("-sc", "--shell-completion")
HYDRA_INFO_FLAGS = ("--cfg", "-c", "--info", "-i", "--hydra-help", "--resolve", "--package", "-p")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        sys.exit(0 if argv else 2)
    command, args = argv[0], argv[1:]
    commands = {"train": train_command, "eval": eval_command, "report": report_command, "data": data_command,
                "reproduce": reproduce_command}
    try:
        if command in ("-V", "--version"):
            print(version_line())
        elif command in COMPLETION_FLAGS:
            completion_command(argv)
        elif command not in commands:
            raise BnnpredError(f"unknown command '{command}'; valid choices: {', '.join(commands)}")
        else:
            commands[command](args)
    except BnnpredError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_status)
    except KeyboardInterrupt:
        print("error: interrupted; finished runs are kept, the run in progress left nothing", file=sys.stderr)
        end_as_interrupted()
    except BrokenPipeError:  # the reader of stdout went away (| head): quiet, as other tools are
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except OSError as e:
        print(f"error: {environment_fault(e)}", file=sys.stderr)
        sys.exit(1)


def end_as_interrupted() -> None:
    """End the process by SIGINT at its default action, as CPython ends on a KeyboardInterrupt nobody caught: a
    shell shows exit status 130 and stops a loop that ran the command (a plain exit 130 reads as handled, and the
    loop goes on). Always, never some of the time: CPython also ends by SIGINT, whatever ``sys.exit`` said, when
    the interrupt passed through an ``exec`` of a string (a dataclass being made, a type hint evaluated) on its way
    here, and a run interrupted while it imported its modules did."""
    import signal

    logging.shutdown()  # what finalisation would flush: the run's log
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    sys.exit(130)  # SIGINT blocked by the parent: the status a shell would show


def version_line() -> str:
    from bnnpred._version import __version__
    from bnnpred.provenance import code_commit, code_digest

    commit = code_commit()
    return f"bnnpred {__version__} (code {code_digest()}{f', commit {commit}' if commit else ''})"


def completion_command(argv: list[str]) -> None:
    """Hydra's shell completion for ``bnnpred train``: ``eval "$(bnnpred -sc install=bash)"`` installs it. The
    shell asks ``bnnpred -sc query=bash`` with the line typed so far; the command word is completed here, the
    rest (groups, options, keys) by Hydra on the line without ``train``."""
    line = os.environ.get("COMP_LINE")
    if line is not None:
        words = line.split()
        commands = ["train", "eval", "report", "reproduce", "data"]
        if len(words) == 1 or (len(words) == 2 and not line.endswith(" ")):
            print(" ".join(c for c in commands if c.startswith(words[1] if len(words) == 2 else "")))
            return
        if words[1] != "train":
            return
        start = line.index("train")
        os.environ["COMP_LINE"] = line[:start] + line[start + len("train"):].lstrip()
        point = int(os.environ.get("COMP_POINT", len(line)))
        os.environ["COMP_POINT"] = str(max(0, point - (len(line) - len(os.environ["COMP_LINE"]))))
    _run_hydra(argv, multirun=False, total=0)


def environment_fault(e: OSError) -> str:
    """An operating-system error as one line with the file it concerns and what to check."""
    where = f": {e.filename}" if e.filename else ""
    return f"{e.strerror or e}{where}; check that the folder is writable and the disk has space"


# ---------------------------------------------------------------- composition and checks


def sweeper_of(overrides: list[str]) -> str:
    """The Hydra sweeper a ``-m`` call uses (``basic`` unless ``hydra/sweeper=NAME`` is given)."""
    chosen = [o.split("=", 1)[1] for o in overrides if o.startswith("hydra/sweeper=")]
    return chosen[-1] if chosen else "basic"


def check_sweeper(overrides: list[str]) -> None:
    """A sampling sweeper needs its plugin; say so in one line."""
    sweeper = sweeper_of(overrides)
    if sweeper != "basic" and importlib.util.find_spec(f"hydra_plugins.hydra_{sweeper}_sweeper") is None:
        raise BnnpredError(f"hydra/sweeper={sweeper} needs its plugin: pip install hydra-{sweeper}-sweeper "
                           "(Optuna: pip install 'bnnpred[optuna]')")


# an optimising sweeper's direction: its override key, and its value to maximise / to minimise
DIRECTIONS = {"optuna": ("hydra.sweeper.direction", "maximize", "minimize"),
              "nevergrad": ("hydra.sweeper.optim.maximize", "true", "false")}
SPELLINGS = {"1": "true", "0": "false", "yes": "true", "no": "false"}  # YAML's other booleans


def directed(args: list[str], overrides: list[str]) -> list[str]:
    """``args`` with an optimising sweeper's direction following ``objective`` (maximise the evidence, minimise an
    NLL) where it is not set; a direction set against the objective, or the evidence as the objective of a method
    without one, is refused in one line."""
    from bnnpred.app.config import SweepObjective
    from bnnpred.inference import EVIDENCE_METHODS

    sweeper = sweeper_of(overrides)
    if sweeper not in DIRECTIONS:
        return args
    key, up, down = DIRECTIONS[sweeper]
    cfg = compose(base_overrides(overrides))
    objective = SweepObjective(cfg.objective)
    if objective is SweepObjective.log_marglik and cfg.inference.name not in EVIDENCE_METHODS:
        raise BnnpredError(f"objective=log_marglik is the Laplace-GGN evidence, which inference={cfg.inference.name} "
                           "does not give (every trial would score NaN); set objective=valid_nll")
    wanted = up if objective.maximized else down
    given = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").split("=", 1)[0] == key]  # key=, +key=, ++key=
    if given and SPELLINGS.get(given[-1].lower(), given[-1].lower()) != wanted:
        way, against = ("maximised", "minimise") if objective.maximized else ("minimised", "maximise")
        raise BnnpredError(f"{key}={given[-1]} would {against} objective={objective.value}, which is {way}; drop it "
                           f"(the direction follows the objective) or set it to {wanted}")
    return args if given else [*args, f"{key}={wanted}"]


def check_launcher(overrides: list[str]) -> None:
    """A cluster launcher needs its plugin and its cluster; say so before anything is submitted."""
    launchers = [o.split("=", 1)[1] for o in overrides if o.startswith("hydra/launcher=")]
    if not launchers or "slurm" not in launchers[-1]:
        return
    try:
        import hydra_plugins.hydra_submitit_launcher  # noqa: F401
    except ImportError as e:
        raise BnnpredError("hydra/launcher=slurm needs the submitit plugin: pip install 'bnnpred[slurm]'") from e
    if shutil.which("sbatch") is None:
        raise BnnpredError("hydra/launcher=slurm needs a SLURM cluster, but sbatch is not on PATH here; "
                           "use hydra/launcher=local to run the sweep on this machine")


def check_sweep_base(overrides: list[str]) -> None:
    """Hydra composes a sweep's base config from its non-swept overrides first; that must compose too."""
    base = base_overrides(overrides)
    try:
        compose(base)
    except BnnpredError as e:
        raise BnnpredError(f"{e} (in a sweep, a key set for a swept group must exist in the group's default; "
                           "run one sweep per option instead)") from e


def check_output_folder(overrides: list[str], multirun: bool) -> None:
    """The run (or sweep) folder must be creatable: its nearest existing ancestor a writable folder."""
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    given = [o.split("=", 1)[1] for o in overrides if o.startswith(f"{key}=")]
    if given:
        folder = given[-1]
    else:
        node = compose(base_overrides(overrides), with_hydra=True).hydra
        folder = OmegaConf.to_container(node.sweep if multirun else node.run, resolve=False)["dir"]
    path = Path(folder.split("${", 1)[0] or ".")
    while not path.exists() and path != path.parent:
        path = path.parent
    if not path.is_dir():
        raise BnnpredError(f"cannot write runs into {path}: it is a file, not a folder; move it or set {key}=PATH",
                           exit_status=1)
    if not os.access(path, os.W_OK):
        raise BnnpredError(f"cannot write runs into {path}: permission denied; fix its permissions or set "
                           f"{key}=PATH", exit_status=1)


# ---------------------------------------------------------------- train


def overrides_of(args: list[str]) -> list[str]:
    """The overrides (``key=value``, ``~key``) among Hydra's command-line arguments, without its flags."""
    return [a for a in args if not a.startswith("-") and ("=" in a or a.startswith("~"))]


def _source_of(module: str) -> ast.Module:
    """The syntax tree of ``module``'s source, found without importing it or its package: the modules behind the
    help texts import torch, 3-4 s that a help text should not cost."""
    package, _, name = module.rpartition(".")
    folder = importlib.util.find_spec(package).submodule_search_locations[0]  # imports the package's parents only
    return ast.parse((Path(folder) / f"{name}.py").read_bytes())  # the source's own encoding, not the locale's


def config_keys() -> list[str]:
    """The root config's keys, the fields of :class:`~bnnpred.app.config.Config`, read from its source (a test holds
    them equal to the dataclass's)."""
    source = _source_of("bnnpred.app.config")
    config = next(n for n in source.body if isinstance(n, ast.ClassDef) and n.name == "Config")
    return [n.target.id for n in config.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]


def study_names() -> list[str]:
    """The studies ``bnnpred reproduce`` makes: the modules of :mod:`bnnpred.reproduce` that assign ``STUDY`` (each
    study is named as its module), read from their sources (a test holds them equal to ``STUDIES``)."""
    def assigns_study(module: str) -> bool:
        return any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "STUDY" for t in n.targets)
                   for n in _source_of(module).body)

    package = importlib.util.find_spec("bnnpred.reproduce")
    return sorted(info.name for info in pkgutil.iter_modules(package.submodule_search_locations)
                  if not info.ispkg and assigns_study(f"bnnpred.reproduce.{info.name}"))


def train_help() -> str:
    """``bnnpred train --help``: usage, every config group with its options, the root keys."""
    groups = sorted(p for p in CONF_DIR.iterdir() if p.is_dir() and p.name != "hydra")
    groups += sorted(p for p in (CONF_DIR / "hydra").iterdir() if p.is_dir())
    lines = [textwrap.fill(", ".join(sorted(y.stem for y in p.glob("*.yaml"))), width=116,
                           initial_indent=f"  {p.relative_to(CONF_DIR).as_posix()}: ", subsequent_indent="    ")
             for p in groups]
    nodes = {p.name for p in groups} | {"prior", "likelihood", "plot"}
    roots = [key for key in config_keys() if key not in nodes]
    return "\n".join([
        "usage: bnnpred train [-m] [group=option ...] [key=value ...]", "",
        "Fit the configured method, select its hyperparameters, evaluate its predictives and write one run folder",
        "(runs/<task_name>/<run key>); with -m, one run per point of the sweep (any Hydra launcher or sweeper).", "",
        "config groups (group=option):", *lines, "",
        f"root keys: {', '.join(roots)}; and prior.*, likelihood.*, predictive.*, selection.*, plot.*", "",
        "bnnpred train --cfg job [overrides]   the composed config, without touching data",
        "bnnpred train --info | --hydra-help   Hydra's own information", "",
        "Every key and its default: bnnpred train --cfg job; a tour of the groups: the README.",
    ])


def train_command(args: list[str]) -> None:
    if any(a in ("-h", "--help") for a in args):
        print(train_help())
        return
    from bnnpred.app.process import prepare_process

    prepare_process()  # before the checks load the data: the intra-op threads they start keep the flags
    multirun = any(a in ("-m", "--multirun") for a in args)
    overrides = overrides_of(args)
    if any(a.split("=", 1)[0] in HYDRA_INFO_FLAGS for a in args):  # Hydra shows the config: no checks of data
        compose(overrides)
        _run_hydra(args, multirun, 0)
        return
    check_launcher(overrides)
    if multirun:
        check_sweeper(overrides)
        check_sweep_base(overrides)
        args = directed(args, overrides)
    if not multirun:
        jobs = [overrides]
    elif sweeper_of(overrides) == "basic":
        jobs = expand_sweep(overrides)
    else:  # a sampling sweeper draws its jobs as it goes: check the base config, count its trials
        jobs = [base_overrides(overrides)]
    for job in jobs:
        check_job(job)
    check_output_folder(overrides, multirun)
    trials = [o.split("=", 1)[1] for o in overrides if o.startswith("hydra.sweeper.n_trials=")]
    total = len(jobs) if sweeper_of(overrides) == "basic" else int(trials[-1]) if trials else 0  # 0: not known
    ledger = _run_hydra(args, multirun, total)
    failed = [entry for entry in ledger if entry.status in ("failed", "crashed")]
    # bad input or a broken fit: 2; an environmental fault or a bug in a job: 1
    status = 1 if any(entry.status == "crashed" for entry in failed) else 2
    if len(failed) == 1 and not multirun:
        raise BnnpredError(failed[0].message, exit_status=status)
    if failed:
        raise BnnpredError(f"{len(failed)} run(s) failed: {' | '.join(e.message for e in failed)}",
                           exit_status=status)


@dataclass(frozen=True)
class LedgerEntry:
    status: str  # trained | skipped | failed (a BnnpredError) | crashed (any other exception)
    seconds: float
    message: str


def _new_ledger() -> Path:
    """An empty ledger for this command's jobs in the temporary folder, named by its process id
    (``bnnpred-sweep-PID-*.tsv``); first the ledgers of commands that are gone (killed before they could remove
    theirs) are removed."""
    from bnnpred.app.run_files import process_alive

    for stale in Path(tempfile.gettempdir()).glob("bnnpred-sweep-*-*.tsv"):
        pid = stale.name.split("-")[2]
        if pid.isdigit() and not process_alive(int(pid)):
            stale.unlink(missing_ok=True)
    fd, path = tempfile.mkstemp(prefix=f"bnnpred-sweep-{os.getpid()}-", suffix=".tsv")
    os.close(fd)
    return Path(path)


def read_ledger(path: Path) -> list[LedgerEntry]:
    entries = []
    for line in path.read_text().splitlines():
        status, seconds, message = line.split("\t", 2)
        entries.append(LedgerEntry(status, float(seconds), message))
    return entries


def progress_line(ledger: list[LedgerEntry], total: int, elapsed: float) -> str:
    """``sweep: 5/8 runs (3 trained, 1 skipped, 1 failed), 3 left, about 2 min left``."""
    counts = {status: sum(e.status == status for e in ledger) for status in ("trained", "skipped")}
    counts["failed"] = len(ledger) - counts["trained"] - counts["skipped"]
    left = max(0, total - len(ledger))
    line = (f"sweep: {len(ledger)}{f'/{total}' if total else ''} runs ({counts['trained']} trained, "
            f"{counts['skipped']} skipped, {counts['failed']} failed)" + (f", {left} left" if total else ""))
    worked = counts["trained"] + counts["failed"]
    if left and worked:
        line += f", about {elapsed / worked * left / 60:.1f} min left"
    return line


def sweep_objective(cfg: DictConfig, document: dict | None) -> float:
    """The run's ``objective`` for an optimising sweeper; NaN (a failed trial) when the run failed or lacks it."""
    if document is None:
        return float("nan")
    if cfg.objective == "valid_nll":
        first = cfg.predictive.kinds[0]
        value = document["metrics"].get("valid", {}).get(first, {}).get("nll")
    else:
        value = document["info"].get(getattr(cfg.objective, "value", cfg.objective))
    return float("nan") if value is None else float(value)


def _index(run_dir: Path, cfg: DictConfig, status: str, seconds: float, message: str, hydra_cfg: Any) -> None:
    """A row in the task folder's index (best effort: an index that cannot be written costs a warning), and in a
    sweep, the sweep's own copy of Hydra's ``multirun.yaml`` (which the next sweep of the task overwrites)."""
    from bnnpred.app import run_index
    from bnnpred.app.config import run_key
    from bnnpred.provenance import code_commit, code_digest

    sweep = os.environ.get(SWEEP_ENV, "")
    try:
        run_index.append(run_dir.parent, key=run_key(cfg), status=status, seconds=f"{seconds:.1f}",
                         overrides=" ".join(hydra_cfg.overrides.task), code=code_digest(), commit=code_commit() or "",
                         sweep=sweep, run_dir=str(run_dir), message=" ".join(message.split()))
        record = Path(hydra_cfg.sweep.dir) / f"multirun-{sweep}.yaml"
        if sweep and (Path(hydra_cfg.sweep.dir) / "multirun.yaml").is_file() and not record.exists():
            shutil.copyfile(Path(hydra_cfg.sweep.dir) / "multirun.yaml", record)
    except OSError as e:
        log.warning("the run index in %s could not be written (%s)", run_dir.parent, e.strerror or e)


def _write_traceback(run_dir: Path) -> None:
    """The traceback of the exception being handled, into ``<run>/error.log`` (best effort), not the console."""
    import traceback

    try:
        with open(run_dir / "error.log", "a") as f:
            f.write(traceback.format_exc())
    except OSError:
        pass


def _record(status: str, seconds: float, message: str = "") -> None:
    with open(os.environ[LEDGER_ENV], "a") as ledger:
        ledger.write(f"{status}\t{seconds:.3f}\t{' '.join(message.split())}\n")


def _run_hydra(args: list[str], multirun: bool, total: int) -> list[LedgerEntry]:
    """Run Hydra on ``args``; returns every job's ledger entry (status, seconds, one-line error)."""
    import hydra

    from bnnpred.app.config import register_configs

    register_configs()
    started = time.time()

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base=None)
    def task(cfg: DictConfig) -> float | None:
        from hydra.core.hydra_config import HydraConfig

        from bnnpred import progress
        from bnnpred.app.runner import train

        hydra_cfg = HydraConfig.get()
        run_dir = Path(hydra_cfg.runtime.output_dir)
        progress.BARS = not multirun
        start = time.perf_counter()
        try:
            outcome = train(cfg, run_dir)
            status, message, document = "trained" if outcome.trained else "skipped", "", outcome.document
        except BnnpredError as e:
            status, message, document = "failed", str(e), None
        except Exception as e:  # any other failure of one job is a failed run; the sweep goes on
            message = environment_fault(e) if isinstance(e, OSError) else f"{type(e).__name__}: {e}"
            _write_traceback(run_dir)
            status, document = "crashed", None
        seconds = time.perf_counter() - start
        if message:
            log.error("error: %s", message)
            if multirun:
                print(f"error: {' '.join(message.split())} ({run_dir})", file=sys.stderr)
        _record(status, seconds, message)
        _index(run_dir, cfg, status, seconds, message, hydra_cfg)
        if multirun:
            ledger = read_ledger(Path(os.environ[LEDGER_ENV]))
            print(progress_line(ledger, total, time.time() - started), file=sys.stderr, flush=True)
        elif document is not None:  # where the run is, trained now or found finished
            print(f"{status}: {run_dir} ({seconds:.1f} s)", file=sys.stderr, flush=True)
        return sweep_objective(cfg, document)

    ledger_path = _new_ledger()
    saved = sys.argv
    multirun_flags = [a for a in args if a in ("-m", "--multirun")]  # Hydra's parser wants flags before overrides
    sys.argv = ["bnnpred", *multirun_flags, *(a for a in args if a not in multirun_flags)]
    os.environ[LEDGER_ENV] = str(ledger_path)
    if multirun:  # the sweep's id in the run index (launcher workers inherit it)
        os.environ[SWEEP_ENV] = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"
    try:
        task()
        return read_ledger(ledger_path)
    finally:
        sys.argv = saved
        os.environ.pop(LEDGER_ENV, None)
        os.environ.pop(SWEEP_ENV, None)
        ledger_path.unlink(missing_ok=True)


# ---------------------------------------------------------------- eval


EVAL_HELP = """usage: bnnpred eval run_dir=PATH [predictive=KIND] [predictive.KEY=VALUE ...] [plot.KEY=VALUE ...]
                    [device=...] [threads=N] [force=true]

Evaluate a finished run with other predictive settings, without training again. The results go to
PATH/evals/<key>/ (the merged config, metrics.json, figures); the run's own files never change, and the same
re-evaluation is found again and kept (force=true redoes it). bnnpred report PATH --evals tables them."""


def eval_command(args: list[str]) -> None:
    if any(a in ("-h", "--help") for a in args):
        print(EVAL_HELP)
        return
    from bnnpred.app.process import prepare_process
    from bnnpred.app.saved_runs import evaluate_run  # torch's import: after the help, which needs none

    prepare_process()
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # the predictives' progress

    run_dirs = [a.split("=", 1)[1] for a in args if a.startswith("run_dir=")]
    if len(run_dirs) != 1:
        raise BnnpredError("eval needs exactly one run_dir=PATH (a finished bnnpred train run)")
    force = [a.split("=", 1)[1] for a in args if a.startswith("force=")]
    if force and force[-1] not in ("true", "false"):
        raise BnnpredError(f"force must be true or false, got {force[-1]}")
    overrides = [a for a in args if not a.startswith(("run_dir=", "force="))]
    evaluate_run(Path(run_dirs[0]), predictive_overrides(overrides), force=bool(force) and force[-1] == "true")


# ---------------------------------------------------------------- report and data


def report_command(args: list[str]) -> None:
    parser = _parser("report")
    parser.add_argument("dirs", nargs="*",
                        help="run directories or folders containing them; none: rebuild every study page under "
                             "outputs/ from runs/reproduce (bnnpred reproduce --report-only)")
    parser.add_argument("--out", default="outputs/report", help="folder for the tables")
    parser.add_argument("--split", default="test")
    parser.add_argument("--select-by", choices=["none", "valid_nll"], default="none",
                        help="pick δ per (group, seed, predictive) by validation NLL before averaging")
    parser.add_argument("--evals", action="store_true",
                        help="add the runs' re-evaluations (bnnpred eval) as predictives 'kind [changed settings]'")
    parser.add_argument("--mixed-code", choices=["refuse", "mark"], default="refuse",
                        help="runs of several code versions: refuse the table, or keep them apart in a code column")
    ns = parser.parse_args(args)
    if not ns.dirs:
        return reproduce_command(["--report-only"])
    from bnnpred.app.report.tables import write_report  # torch's import: after the arguments, --help needs none

    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")  # every run skipped, and why
    written = write_report([Path(d) for d in ns.dirs], Path(ns.out), split=ns.split, select_by=ns.select_by,
                           evals=ns.evals, mixed_code=ns.mixed_code)
    print(next(p for p in written if p.suffix == ".md").read_text())
    print("written:", ", ".join(map(str, written)))


TIERS = ("quick", "cpu", "full")  # bnnpred.reproduce.Tier's values, named here for the help (a test holds them equal)


def reproduce_command(args: list[str]) -> None:
    parser = _parser("reproduce")
    parser.add_argument("studies", nargs="*", help=f"studies to make (default: all): {', '.join(study_names())}")
    parser.add_argument("--tier", choices=TIERS, default="cpu",
                        help="quick: smoke scale into runs/reproduce-quick; cpu: the committed pages; full: GPU scale")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel runs (joblib workers)")
    parser.add_argument("--runs", help="run folder (default runs/reproduce, or runs/reproduce-quick)")
    parser.add_argument("--out", help="page folder (default outputs/, or runs/reproduce-quick/outputs)")
    parser.add_argument("--report-only", action="store_true", help="rebuild the pages from the runs, train nothing")
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        help="where studies built from records train, and whose records their pages read (default: "
                             "cpu; with --report-only, the device of the committed page)")
    parser.add_argument("--pdf", action="store_true",
                        help="also write each page figure as a PDF beside its PNG (vector copies for a paper; git "
                             "ignores them)")
    parser.add_argument("--hours", type=float,
                        help="a time budget: start a sweep, run or re-evaluation only when its earlier runs (its "
                             "records and run folders) say that what it lacks ends within this many hours; a study "
                             "stops before the first that does not (run it again to go on), and the command then "
                             "exits with status 3")
    parser.add_argument("--from-records", action="store_true",
                        help="build every page from its runs' records (written as each sweep ends, read back on "
                             "any machine), as the studies marked so are: a study whose committed page predates "
                             "records is rerun across machines with it")
    ns = parser.parse_args(args)
    from bnnpred.reproduce import Tier, reproduce  # torch's import: after the arguments, --help needs none

    if ns.pdf:
        from bnnpred.app.report import figures

        figures.ALSO = ("pdf",)
    tier = Tier(ns.tier)
    quick = tier is Tier.quick
    device_runs = "" if ns.device in (None, "cpu") else f"-{ns.device}"
    runs = Path(ns.runs or ("runs/reproduce-quick" if quick else "runs/reproduce") + device_runs)
    out = Path(ns.out or (runs / "outputs" if quick else "outputs/full" if tier is Tier.full else "outputs"))
    made = reproduce(ns.studies, tier, runs, out, ns.jobs, ns.report_only, ns.device, ns.hours, ns.from_records)
    for page in made.pages:
        print(page)
    if made.stopped:
        print(f"stopped for time: {', '.join(made.stopped)} (exit status 3)")
        sys.exit(STOPPED_FOR_TIME)


def data_command(args: list[str]) -> None:
    from bnnpred.data.root import FILES, data_root, fetch, verify

    logging.basicConfig(level=logging.INFO, format="%(message)s")  # download progress off a terminal

    parser = _parser("data")
    parser.add_argument("action", choices=["fetch", "verify"])
    parser.add_argument("name", help=f"one of: {', '.join(FILES)}")
    parser.add_argument("--root", default=None, help="data root (default: $BNNPRED_DATA_DIR)")
    parser.add_argument("--force", action="store_true", help="download again even if the file is valid")
    ns = parser.parse_args(args)
    if ns.name not in FILES:
        raise BnnpredError(f"unknown dataset '{ns.name}'; valid choices: {', '.join(sorted(FILES))}")
    root = data_root(ns.root)
    if ns.action == "fetch":
        for path in fetch(ns.name, root, force=ns.force):
            print(path)
        return
    results = verify(ns.name, root)
    for path, status in results:
        print(f"{status:8s} {path}")
    if any(status != "ok" for _, status in results):
        raise BnnpredError(f"{ns.name}: some files are missing or corrupt; run: bnnpred data fetch {ns.name}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        raise BnnpredError(f"{self.prog}: {message}")


def _parser(command: str) -> argparse.ArgumentParser:
    return _Parser(prog=f"bnnpred {command}")


if __name__ == "__main__":
    main()
