#!/usr/bin/env bash
# The GPU checks of one device lease, in order of value; each bounded, logs under $OUT.
#   bash bench/gpu_session.sh      (on the lent GPU machine, from the repo root; wheels in
#   $WHEELS, default .whl/: pydantic, omegaconf, transformers 5.19, tokenizers, trl, datasets)
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "${WHEELS:-.whl}"/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/api:$PWD/runtime:$PWD/cli:$PWD/tests:$PWD/hack
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c "import torch, transformers, sys; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
python3 -m pip list 2>/dev/null | grep -i -E "^(pyarrow|accelerate|peft|datasets|trl|numpy|pandas) " 
step() { local name=$1 limit=$2; shift 2; echo "=== $name (limit ${limit}s)"; local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  tail -n 25 "$OUT/$name.log"; echo "=== $name rc=$rc in $((SECONDS - t0)) s"; }
step pytest 150 python3 -m pytest tests/gpu -o addopts="" --import-mode=importlib -p no:cacheprovider -q -s
step plan_check ${PLAN_LIMIT:-240} python3 bench/gpu_plan_check.py --out "$OUT"
step gpu_step ${STEP_LIMIT:-300} python3 bench/gpu_step.py --steps 3 --prompts 32 --out "$OUT"
