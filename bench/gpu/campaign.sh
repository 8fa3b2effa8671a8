#!/usr/bin/env bash
# Run a study's missing runs on a lent GPU machine inside a time budget, and return the study's records and page as
# one archive, $OUT/STUDY.tar.gz (issue 38). Run from the checkout's root on that machine:
#
#   BNNPRED_COMMIT=<commit of the clean tree sent> bench/gpu/campaign.sh STUDY [SECONDS] [JOBS]
#
# carrying .whl/ (hydra-core, omegaconf, antlr4-python3-runtime, hydra-joblib-launcher: that machine's PyTorch has no
# Hydra) and .data/ (the images, laid out as ../shared/data). Records already under outputs/STUDY/runs/cuda/ are
# copied into run folders first, so only missing runs train. At SECONDS (default 540) the study and every run it
# started are stopped; a run that had not finished leaves nothing (runs commit atomically), and the records of the
# finished ones are written by a rebuild that trains nothing. The archive holds outputs/STUDY/ (page, claims,
# figures when the page could be made, records) and the log; untar it over the checkout's outputs/.
#
# On CPU, at a tiny size (tests/reproduce/test_gpu_campaign.py):
#   DEVICE=cpu TIER=quick OUT=/tmp/out bench/gpu/campaign.sh notes004_table2 600 1
set -u
study=$1
budget=${2:-540}
jobs=${3:-5}
device=${DEVICE:-cuda}
tier=${TIER:-cpu}
out=${OUT:?set OUT to the folder the archive goes to}
python=${PYTHON:-python3}

if ! "$python" -c "import hydra, omegaconf" 2>/dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "campaign: no Hydra here and no wheels in .whl/ to install it from" >&2; exit 2; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export BNNPRED_DATA_DIR=${BNNPRED_DATA_DIR:-$PWD/.data}
export PYTHONUNBUFFERED=1
runs=${RUNS:-/tmp/campaign-runs}
work=$(mktemp -d)
mkdir -p "$work/outputs" "$out"
[ -d "outputs/$study" ] && cp -r "outputs/$study" "$work/outputs/"  # its committed records: finished runs skipped
log=$work/campaign.log
{ date -u; "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
torch.cuda.get_device_name() if torch.cuda.is_available() else '')"; } >>"$log" 2>&1
reproduce=("$python" -m bnnpred.cli reproduce "$study" --tier "$tier" --device "$device" --runs "$runs"
           --out "$work/outputs")

# the study in a session of its own, so that the budget stops its sweeps' workers too
setsid "${reproduce[@]}" --jobs "$jobs" >>"$log" 2>&1 &
group=$!
deadline=$((SECONDS + budget))
while kill -0 "$group" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 2; done
if kill -0 "$group" 2>/dev/null; then
  echo "campaign: budget of ${budget}s spent; stopping the study" >>"$log"
  kill -TERM -- "-$group" 2>/dev/null; sleep 10; kill -KILL -- "-$group" 2>/dev/null
  wait "$group" 2>/dev/null
  # the finished runs' records (and the page if every sweep has runs), training nothing
  "${reproduce[@]}" --report-only >>"$log" 2>&1 || echo "campaign: the page needs runs not yet made; records kept" >>"$log"
else
  wait "$group"; echo "campaign: the study exited with status $?" >>"$log"
fi
find "$work/outputs" -name '.*.partial' -prune -exec rm -rf {} +  # an export cut short by the stop
tar czf "$out/$study.tar.gz" -C "$work" outputs/"$study"
gzip -c "$log" >"$out/campaign.log.gz"
tail -n 30 "$log"
ls -la "$out"
