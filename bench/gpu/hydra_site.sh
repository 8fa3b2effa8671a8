# Sourced by the GPU scripts: make Hydra and OmegaConf importable for $python (the lent GPU machine's PyTorch has
# neither) from the wheels carried in .whl/ (hydra-core, omegaconf, antlr4-python3-runtime, hydra-joblib-launcher),
# installed into the folder $1; nothing to do where they import already. Returns 2 when they are missing and no
# wheels were carried.
hydra_site() {
  if ! "$python" -c "import hydra, omegaconf" 2>/dev/null; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$1" \
      .whl/*.whl || { echo "$(basename "$0"): no Hydra here and no wheels in .whl/ to install it from" >&2; return 2; }
    export PYTHONPATH=$1${PYTHONPATH:+:$PYTHONPATH}
  fi
}
