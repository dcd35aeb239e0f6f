#!/usr/bin/env bash
# train-photo.sh - trains the photo model (data/models/changelens-photo.md): the frozen
# EfficientNet-Lite0 stem, a cross_ffn SVE encoder with the change head, and a small decoder of
# its own, on the photo-edits task (a third of the samples with strong nuisances). The same
# command continues from the newest checkpoint in OUT. FROM=FILE starts from a model or a
# checkpoint's weights instead of a random init of tools/models/photo.json (the second stage:
# a fresh schedule that anneals). Needs set-up's pretrained folder (tools/fetch-pretrained.sh)
# and the photographs' Debian packages (run.sh).
#   OUT=runs/photo1 STEPS=1800 tools/train-photo.sh
#   OUT=runs/photo2 FROM=runs/photo1/checkpoints/step-00000500.safetensors STEPS=700 LR=5e-4 \
#     WARMUP=20 tools/train-photo.sh
# MARKER=1 adds --change-marker (the change head's probabilities marked on the visual tokens,
# docs/MODEL.md §3.12; a new tensor when FROM's model lacks it). AUX_OBJECTS=W weighs the
# per-patch objects loss (default 1). TASKS=LIST replaces the task mix (default two plain
# photo-edits entries and one with strong nuisances, `photo-edits~2`).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
OUT=${OUT:-runs/photo1}
STEPS=${STEPS:-1800}
SEED=${SEED:-1}
VARIANT=${VARIANT:-cross_ffn}
if [ -n "${FROM:-}" ]; then
  init=(--from "$FROM")
else
  init=(--config tools/models/photo.json --variant "$VARIANT")
fi
args=(train "${init[@]}" --task "${TASKS:-photo-edits,photo-edits,photo-edits~2}" --steps "$STEPS" --batch 8
  --lr "${LR:-1e-3}" --warmup "${WARMUP:-100}" --aux-objects "${AUX_OBJECTS:-1}" --aux-changed 2
  --checkpoint-every 100
  --keep-checkpoints 3 --seed "$SEED" --out "$OUT")
if [ -n "${MARKER:-}" ]; then
  args+=(--change-marker)
fi
if compgen -G "$OUT/checkpoints/*.safetensors" >/dev/null; then
  args+=(--resume)
fi
exec build/app/changelens-cli "${args[@]}"
