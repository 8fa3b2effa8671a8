#!/usr/bin/env bash
# notes004_table2's MNIST pair on the CPU, a few δ per session (issue 38): each run (60k images, 30 epochs, the
# Kronecker fit and four predictives: about 2 hours on 2 cores) is trained at the commit of the page's other
# records, in a git worktree, and its record written into outputs/ by this checkout's code as soon as it ends.
#
#   bench/cpu/notes004_mnist.sh [HOURS]        # from the checkout's root; HOURS (default 2.5) is the budget
#
# A run is started only when the records of runs of its kind say it ends inside the budget (the first of each kind:
# the estimates below), so a session's end kills nothing half-done; a run killed anyway leaves no record (runs
# commit atomically) and is trained again next time, first of all and whatever the budget, from its checkpoints
# (the MAP, the Kronecker factors and each finished predictive). Runs whose records exist are skipped. Per δ the
# undampened sweep's run comes first, then the dampened one, whose MAP the fit cache hands over (same worktree, same machine).
# Commit the records (outputs/notes004_table2/runs/cpu/) and rebuild the page with
# `bnnpred reproduce notes004_table2 --report-only` after each session. DRY=1 prints the plan and trains nothing.
# Work beside it at low priority needs its autogroup lowered, not only `nice`: a job started with setsid has an
# autogroup of its own, and Linux shares the cores between autogroups whatever their processes' nice values
# (`echo 19 > /proc/PID/autogroup` for the other job; with `nice -n 19` alone it took half the run's throughput).
set -u
hours=${1:-2.5}
commit=${COMMIT:-0d5ceb8}  # the code of the page's committed records (their code digest 4e2a6260aea30537)
repo=$(pwd)
worktree=${WORKTREE:-$repo/../campaign-$commit}
python=${PYTHON:-$repo/.venv/bin/python}
records=outputs/notes004_table2/runs/cpu/notes004_table2/mnist
export BNNPRED_DATA_DIR=${BNNPRED_DATA_DIR:-$repo/../shared/data} PYTHONUNBUFFERED=1
clock=$SECONDS
deadline=$(python3 -c "print(int($SECONDS + float('$hours') * 3600))")
[ -d "$worktree" ] || git worktree add "$worktree" "$commit" >/dev/null

estimate() {  # seconds a run of this posterior takes, from its records (the longest), else a first guess
  "$python" - "$records/$1" "$2" <<'PY'
import json, sys
from pathlib import Path
seconds = [json.loads(p.read_text())["run"]["seconds"] for p in Path(sys.argv[1]).glob("*/metrics.json")]
print(int(max(seconds)) if seconds else int(sys.argv[2]))
PY
}

for delta in ${DELTAS:-100.0 1000.0 10.0 1.0 0.1}; do
  for posterior in kron kron_dampened; do
    if [ -f "$records/$posterior/delta$delta/metrics.json" ]; then continue; fi
    guess=$([ $posterior = kron ] && echo 7200 || echo 2400)
    need=$(estimate $posterior $guess)
    if [ -d "$worktree/runs/notes004_table2/mnist/$posterior/delta$delta/.checkpoints" ]; then
      need=0  # a run a session's end cut short resumes from its checkpoints (MAP, Kronecker factors, predictions)
    fi
    [ "${DRY:-0}" = 1 ] || clock=$SECONDS  # a dry run adds the estimates instead
    if [ $((clock + need)) -gt "$deadline" ]; then
      echo "notes004_mnist: $posterior δ=$delta not started: about ${need}s, $((deadline - clock))s of the budget left"
      exit 0
    fi
    echo "notes004_mnist: $(date -u +%FT%T) $posterior δ=$delta ($([ "$need" = 0 ] && echo "resumed from its checkpoints" || echo "about ${need}s"))"
    if [ "${DRY:-0}" = 1 ]; then clock=$((clock + need)); continue; fi
    extra=(); [ $posterior = kron_dampened ] && extra=(inference.dampen=true "predictive.kinds=[nn]")
    (cd "$worktree" && PYTHONPATH=$worktree "$python" -m bnnpred.cli train -m experiment=notes004_table2 \
      dataset=mnist ood=fashion_mnist "${extra[@]}" inference.map.epochs=30 predictive.gp_subset_size=800 \
      prior.delta=$delta seed=117 device=cpu threads=${THREADS:-2} hydra/launcher=joblib hydra.launcher.n_jobs=1 \
      hydra.sweep.dir=runs/notes004_table2/mnist/$posterior 'hydra.sweep.subdir=delta${prior.delta}' progress=true)
    PYTHONPATH=$repo "$python" - "$worktree/runs/notes004_table2/mnist/$posterior" "$records/$posterior" <<'PY'
import sys
from pathlib import Path
from bnnpred.app.records import export_records
from bnnpred.app.run_index import INDEX, copy_relative
runs, records = Path(sys.argv[1]), Path(sys.argv[2])
print(f"notes004_mnist: {len(export_records(runs, records, 'cpu'))} records written to {records}")
if (runs / INDEX).is_file():
    copy_relative(runs, records)
PY
  done
done
