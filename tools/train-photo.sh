#!/usr/bin/env bash
# train-photo.sh - trains the photo model (docs/STUDY.md, data/models/README.md): the frozen
# EfficientNet-Lite0 stem, a cross_ffn SVE encoder with the change head, and a small decoder of
# its own, on the photo-edits task (a third of the samples with strong nuisances). The same
# command continues from the newest checkpoint in OUT. Needs set-up's pretrained folder
# (tools/fetch-pretrained.sh) and the photographs' Debian packages (run.sh).
#   OUT=runs/photo1 STEPS=3000 SEED=1 tools/train-photo.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
OUT=${OUT:-runs/photo1}
STEPS=${STEPS:-3000}
SEED=${SEED:-1}
VARIANT=${VARIANT:-cross_ffn}
args=(train --config tools/models/photo.json --variant "$VARIANT"
  --task photo-edits,photo-edits,photo-edits~2 --steps "$STEPS" --batch 8 --lr 1e-3 --warmup "${WARMUP:-100}"
  --aux-changed 2 --checkpoint-every 100 --keep-checkpoints 3 --seed "$SEED" --out "$OUT")
if compgen -G "$OUT/checkpoints/*.safetensors" >/dev/null; then
  args+=(--resume)
fi
exec build/app/changelens-cli "${args[@]}"
