#!/usr/bin/env bash
# tools/study-photo.sh - the SVE study on real photographs (docs/STUDY.md, "photo-edits"): one
# stateless stage-1 model of the photo model's configuration (tools/models/photo.json: the frozen
# EfficientNet-Lite0 stem, the change head), trained on photo-edits as tools/train-photo.sh trains
# the shipped model; then stage 2 from it with each variant — stateless (fine-tuned on, the
# baseline), cross and cross_ffn — at equal data, steps and learning rate, for every seed; each
# evaluated by `eval-change --describe` on the held-out photographs (opencv-doc, never trained
# on). Prints the table (tools/study_photo_table.py). Re-running skips what is done and
# continues an interrupted training from its checkpoint.
#
#   tools/study-photo.sh [OUT=runs/study-photo] [SEEDS="1 2"] [STAGE1_STEPS=400]
#                        [STAGE2_STEPS=200] [N_EVAL=100] [NUISANCE=1]
#                        [VARIANTS="stateless cross cross_ffn"]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/study-photo}
SEEDS=${SEEDS:-"1 2"}
STAGE1_STEPS=${STAGE1_STEPS:-400}
STAGE2_STEPS=${STAGE2_STEPS:-200}
N_EVAL=${N_EVAL:-100}
NUISANCE=${NUISANCE:-1}
VARIANTS=${VARIANTS:-"stateless cross cross_ffn"}
CLI=build/app/changelens-cli
[ -x "$CLI" ] || { echo "study-photo: build first (./run.sh test or ninja -C build)" >&2; exit 1; }
mkdir -p "$OUT"
resume() { compgen -G "$1/checkpoints/*.safetensors" >/dev/null && echo --resume || true; }
log() { printf '\033[1mstudy-photo:\033[0m %s\n' "$*" >&2; }
# the shipped model's data and losses (tools/train-photo.sh)
common=(--task photo-edits,photo-edits,photo-edits~2 --batch 8 --aux-changed 2
  --checkpoint-every 100 --keep-checkpoints 2)

s1="$OUT/stage1"
if [ ! -f "$s1/model.safetensors" ]; then
  log "stage 1 (stateless, random init), $STAGE1_STEPS steps"
  "$CLI" train --stage pretrain --config tools/models/photo.json --variant stateless \
    "${common[@]}" \
    --steps "$STAGE1_STEPS" --lr 1e-3 --warmup "$((STAGE1_STEPS < 50 ? 0 : 50))" --seed 1 \
    --out "$s1" $(resume "$s1")
fi
for seed in $SEEDS; do
  for v in $VARIANTS; do
    s2="$OUT/seed$seed/$v"
    if [ ! -f "$s2/model.safetensors" ]; then
      log "seed $seed: stage 2 ($v), $STAGE2_STEPS steps"
      if [ "$v" = stateless ]; then
        stage=(--stage pretrain)
      else
        stage=(--stage sve --variant "$v")
      fi
      "$CLI" train "${stage[@]}" --from "$s1/model.safetensors" "${common[@]}" \
        --steps "$STAGE2_STEPS" --lr 5e-4 --warmup "$((STAGE2_STEPS < 20 ? 0 : 20))" \
        --seed "$((seed + 100))" --out "$s2" $(resume "$s2")
    fi
    e="$s2/eval-change.json"
    if [ ! -f "$e" ]; then
      log "seed $seed: eval-change $v ($N_EVAL held-out pairs, nuisance $NUISANCE)"
      "$CLI" eval-change --model "$s2/model.safetensors" --task photo-edits --set heldout \
        --n "$N_EVAL" --nuisance "$NUISANCE" --describe --json "$e.tmp" > "$s2/eval-change.txt"
      mv "$e.tmp" "$e"
    fi
  done
done
python3 tools/study_photo_table.py "$OUT" --variants $VARIANTS --seeds $SEEDS \
  --command "OUT=$OUT SEEDS=\"$SEEDS\" STAGE1_STEPS=$STAGE1_STEPS STAGE2_STEPS=$STAGE2_STEPS \
N_EVAL=$N_EVAL NUISANCE=$NUISANCE tools/study-photo.sh"
