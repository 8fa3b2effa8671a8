#!/usr/bin/env bash
# Time every stage of the image path on the lent GPU (issue 35 item 4; bench/gpu/stages.py) and leave the table in
# $OUT/stages.md. Run from the checkout's root on that machine, carrying .whl/ (see hydra_site.sh):
#
#   OUT=<folder> bench/gpu/stages.sh [extra arguments of stages.py, e.g. --device cpu --tiny]
set -u
python=${PYTHON:-python3}
out=$(realpath -m "${OUT:?set OUT to the folder the table goes to}")
work=$(mktemp -d)
source "$(dirname "$0")/hydra_site.sh"
hydra_site "$work/site" || exit 2
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$out"
"$python" bench/gpu/stages.py --out "$out/stages.md" "$@"
