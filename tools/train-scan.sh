#!/usr/bin/env bash
# train-scan.sh - trains the radiograph-and-aerial model (data/models/changelens-radiograph-aerial.md):
# the photo model's encoder (the frozen EfficientNet-Lite0 stem, its cross_ffn SVE blocks, the
# change head and the change marker) grafted onto the synthetic default model's decoder (which
# already speaks the radiograph and aerial tasks' phrasing), then the whole trained on the
# `radiograph` and `aerial` tasks (two radiograph samples to one aerial), with the objects and
# change-head losses. The same command continues from the newest checkpoint in OUT. Needs
# set-up's pretrained folder (tools/fetch-pretrained.sh).
#   OUT=runs/scan1 tools/train-scan.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
OUT=${OUT:-runs/scan1}
CLI=build/app/changelens-cli
mkdir -p "$OUT"
init="$OUT/init.safetensors"
if [ ! -f "$init" ]; then
  "$CLI" model graft data/models/changelens-photo.safetensors \
    data/models/changelens-default.safetensors "$init"
fi
args=(train --from "$init" --task "${TASKS:-radiograph,radiograph,aerial}" --steps "${STEPS:-2000}"
  --batch 8 --lr "${LR:-3e-4}" --warmup "${WARMUP:-50}" --aux-objects 1 --aux-changed 2
  --checkpoint-every 100 --keep-checkpoints 3 --seed "${SEED:-31}" --out "$OUT")
if compgen -G "$OUT/checkpoints/*.safetensors" >/dev/null; then
  args+=(--resume)
fi
exec "$CLI" "${args[@]}"
