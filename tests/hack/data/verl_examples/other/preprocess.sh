#!/usr/bin/env bash
# No trainer call: a data preparation step (written for kuberl's tests).
set -euo pipefail
mkdir -p "$HOME/data"
python3 -m examples.data_preprocess.gsm8k --local_save_dir "$HOME/data" || true
