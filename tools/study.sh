#!/usr/bin/env bash
# tools/study.sh - the SVE study at our scale (docs/DESIGN.md §5): one stateless stage-1
# model, then stage 2 with each variant — stateless (the baseline, fine-tuned for the same
# steps), self_ffn (the capacity control: the same added FFN, no predecessor), cross and
# cross_ffn — at equal data, steps and seed, for every seed; each evaluated on held-out shapes
# and dots; the table (mean ± spread over seeds) written to docs/STUDY.md.
#
#   tools/study.sh [OUT=runs/study] [SEEDS="1 2"] [STAGE1_STEPS=2000] [STAGE2_STEPS=1000]
#                  [N_EVAL=200] [PRESET=tiny] [BATCH=8] [TASKS="shapes dots"]
#                  [STAGE1_TASKS=shapes,dots] [VARIANTS="stateless self_ffn cross cross_ffn"]
#                  [STAGE1_FROM=MODEL] [STAGE2_ARGS=]
#
# STAGE1_FROM: one converged stateless model shared by every seed (the paper fine-tunes every
# variant from the same stage-1 checkpoint); the seeds then vary stage 2 only (its data order
# and SVE init). STAGE2_ARGS: more `train` options for every stage-2 run (the same for all
# variants; the auxiliary losses are on unless it says --no-aux).
#
# Every setting is an environment variable with the default above; the whole run on the 2-core
# development machine takes hours (see the timing lines it prints). Re-running skips what is
# done (a stage whose model.safetensors exists, an eval whose JSON exists).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/study}
SEEDS=${SEEDS:-"1 2"}
STAGE1_STEPS=${STAGE1_STEPS:-2000}
STAGE2_STEPS=${STAGE2_STEPS:-1000}
N_EVAL=${N_EVAL:-200}
PRESET=${PRESET:-tiny}
BATCH=${BATCH:-8}
TASKS=${TASKS:-"shapes dots"}
VARIANTS=${VARIANTS:-"stateless self_ffn cross cross_ffn"}
STAGE1_FROM=${STAGE1_FROM:-}
STAGE2_ARGS=${STAGE2_ARGS:-}
CLI=build/app/changelens-cli
[ -x "$CLI" ] || { echo "study: build first (./run.sh test or ninja -C build)" >&2; exit 1; }
mkdir -p "$OUT"
# --resume when an interrupted run left a checkpoint
resume() { compgen -G "$1/checkpoints/*.safetensors" >/dev/null && echo --resume || true; }
log() { printf '\033[1mstudy:\033[0m %s\n' "$*" >&2; }
train_tasks=$(echo $TASKS | tr ' ' ',')
# stage 1 may add the grounded single-image tasks (docs/DESIGN.md §5)
STAGE1_TASKS=${STAGE1_TASKS:-$train_tasks}

for seed in $SEEDS; do
  s1="$OUT/seed$seed/stage1"
  if [ -n "$STAGE1_FROM" ]; then
    s1=$(dirname "$STAGE1_FROM")
    [ "$(basename "$STAGE1_FROM")" = model.safetensors ] ||
      { echo "study: STAGE1_FROM must be a run's model.safetensors" >&2; exit 1; }
  elif [ ! -f "$s1/model.safetensors" ]; then
    log "seed $seed: stage 1 (stateless) on $STAGE1_TASKS, $STAGE1_STEPS steps"
    "$CLI" train --stage pretrain --preset "$PRESET" --task "$STAGE1_TASKS" --steps "$STAGE1_STEPS" \
      --batch "$BATCH" --seed "$seed" --out "$s1" $(resume "$s1")
  fi
  for v in $VARIANTS; do
    s2="$OUT/seed$seed/$v"
    if [ ! -f "$s2/model.safetensors" ]; then
      log "seed $seed: stage 2 ($v), $STAGE2_STEPS steps"
      if [ "$v" = stateless ]; then
        # the baseline keeps training as it is, for the same steps and data
        "$CLI" train --stage pretrain --from "$s1/model.safetensors" --task "$train_tasks" \
          --steps "$STAGE2_STEPS" --batch "$BATCH" --seed "$((seed + 100))" $STAGE2_ARGS \
          --out "$s2" $(resume "$s2")
      else
        "$CLI" train --stage sve --from "$s1/model.safetensors" --variant "$v" --task "$train_tasks" \
          --steps "$STAGE2_STEPS" --batch "$BATCH" --seed "$((seed + 100))" $STAGE2_ARGS \
          --out "$s2" $(resume "$s2")
      fi
    fi
    for t in $TASKS; do
      e="$s2/eval-$t.json"
      if [ ! -f "$e" ]; then
        log "seed $seed: eval $v on $t ($N_EVAL held-out samples)"
        "$CLI" eval --model "$s2/model.safetensors" --task "$t" --n "$N_EVAL" --seed 900001 \
          --json > "$e.tmp" && mv "$e.tmp" "$e"
      fi
    done
  done
done

python3 tools/study_table.py "$OUT" $TASKS --variants $VARIANTS --seeds $SEEDS \
  --command "OUT=$OUT SEEDS=\"$SEEDS\" STAGE1_STEPS=$STAGE1_STEPS STAGE2_STEPS=$STAGE2_STEPS N_EVAL=$N_EVAL PRESET=$PRESET BATCH=$BATCH${STAGE1_FROM:+ STAGE1_FROM=$STAGE1_FROM} STAGE2_ARGS=\"$STAGE2_ARGS\" tools/study.sh" \
  > docs/STUDY.md
log "wrote docs/STUDY.md"
