#!/usr/bin/env bash
# Run a study's missing runs on a lent GPU machine inside a time budget, and return the study's records and page as
# one archive, $OUT/STUDY.tar.gz (issue 38). Run from the checkout's root on that machine:
#
#   BNNPRED_COMMIT=<commit of the clean tree sent> OUT=<folder> bench/gpu/campaign.sh STUDY [SECONDS] [JOBS]
#
# carrying .whl/ (hydra-core, omegaconf, antlr4-python3-runtime, hydra-joblib-launcher: that machine's PyTorch has no
# Hydra) and .data/ (the images, laid out as ../shared/data). Records already under outputs/STUDY/runs/cuda/ are
# copied into run folders first, so only missing runs train. At SECONDS (default 500) the study and every run it
# started are stopped; a run that had not finished leaves nothing (runs commit atomically), and the records of the
# finished ones are written by a rebuild that trains nothing. The archive holds outputs/STUDY/ (page, claims,
# figures when the page could be made, records) and the log; untar it over the checkout's outputs/.
#
# On CPU, at a tiny size (tests/reproduce/test_gpu_campaign.py):
#   DEVICE=cpu TIER=quick OUT=campaign-out bench/gpu/campaign.sh notes004_table2 600 1
# On CPU, a page made before run records were committed, rerun a few hours at a time in a worktree at one commit
# (copy the records committed so far into its outputs/STUDY/runs/ first, and untar the archive back after):
#   DEVICE=cpu FROM_RECORDS=1 OUT=../rerun-out bench/gpu/campaign.sh notes001 9000 2
#
# Exit status: the study's (0 when it finished), or 0 when stopped at the budget with its records written.
set -u
study=$1
budget=${2:-500}  # the stop, the export and the archive take about 30 s more
jobs=${3:-4}  # four runs share one H100: five GPs of M = 800 at once came near its 80 GB
device=${DEVICE:-cuda}
tier=${TIER:-cpu}
out=$(realpath -m "${OUT:?set OUT to the folder the archive goes to}")
python=${PYTHON:-python3}
[[ $python == */* ]] && python=$(cd "$(dirname "$python")" && pwd)/$(basename "$python")  # the study runs elsewhere

work=$(mktemp -d)
source "$(dirname "$0")/hydra_site.sh"
hydra_site "$work/site" || exit 2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export BNNPRED_DATA_DIR=${BNNPRED_DATA_DIR:-$PWD/.data}
export PYTHONUNBUFFERED=1
# beside the temporary folders, and the same on every call: a second call on a still-warm machine resumes its runs
runs=$(realpath -m "${RUNS:-$(dirname "$work")/campaign-runs-$study}")  # its own: all of it is exported at the budget
mkdir -p "$work/outputs" "$out"
[ -d "outputs/$study" ] && cp -r "outputs/$study" "$work/outputs/"  # its committed records: finished runs skipped
log=$out/campaign.log  # in $OUT from the start: it comes back even if the call is cut off
{ date -u; "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
torch.cuda.get_device_name() if torch.cuda.is_available() else '')"; } >>"$log" 2>&1
records=$work/outputs/$study/runs/$device
mkdir -p "$runs" && cd "$runs"  # the runs' relative paths (the fit cache) stay beside them, out of the checkout

# the study in a session of its own, so that the budget stops its sweeps' workers too (setsid does not fork here:
# a background job of a script without job control is no process group leader, so $! is the new group's leader)
# (FROM_RECORDS=1: a study whose page predates records, rerun from the records of earlier calls: issue 33's reruns)
# (a new session is a new autogroup at nice 0 on Linux: it takes the caller's, so a low-priority campaign stays low)
nice=$(awk '{print $NF}' /proc/self/autogroup 2>/dev/null)
setsid sh -c '[ -n "$0" ] && echo "$0" >/proc/self/autogroup 2>/dev/null; exec "$@"' "$nice" \
  "$python" -m bnnpred.cli reproduce "$study" --tier "$tier" --device "$device" --runs "$runs" \
  --out "$work/outputs" --jobs "$jobs" $([ "${FROM_RECORDS:-0}" = 1 ] && echo --from-records) >>"$log" 2>&1 &
group=$!
deadline=$((SECONDS + budget))
while kill -0 "$group" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 2; done
status=0
if kill -0 "$group" 2>/dev/null; then
  echo "campaign: budget of ${budget}s spent; stopping the study" >>"$log"
  kill -TERM -- "-$group" 2>/dev/null
  for _ in $(seq 20); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.5; done  # up to 10 s to stop
  kill -KILL -- "-$group" 2>/dev/null
  wait "$group" 2>/dev/null
  # the records of the runs that finished (a run cut off has none: runs commit atomically)
  timeout 60 "$python" -c "import sys; from pathlib import Path; from bnnpred.reproduce import STUDIES
from bnnpred.app.records import export_records, kept_files
keep = kept_files(STUDIES[sys.argv[4]].keeps_traces)
print(len(export_records(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], keep)), 'records written')" \
    "$runs" "$records" "$device" "$study" >>"$log" 2>&1 || status=1
else
  wait "$group"; status=$?; echo "campaign: the study exited with status $status" >>"$log"
fi
find "$work/outputs" -name '.*.partial' -prune -exec rm -rf {} + -o -name '.*.old' -prune -exec rm -rf {} +
tar czf "$out/$study.tar.gz" -C "$work" outputs/"$study"
gzip -f "$log"
zcat "$log.gz" | tail -n 30
ls -la "$out"
exit "$status"
