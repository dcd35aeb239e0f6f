#!/usr/bin/env bash
# gpu-check.sh - the GPU checks of the CUDA backend, prepared here and run on a GPU machine
# that has CUDA 13 and PyTorch but not this project's Debian libraries.
#
#   tools/gpu-check.sh bundle      (here, after ./run.sh's build) writes build/gpu-bundle/: the
#                                  cuda and devicepath tests, changelens-cli, every shared
#                                  library they need from Debian except glibc, libstdc++ and
#                                  CUDA's own (the GPU machine has those), as lib.tar.xz, and
#                                  set-up's pretrained EfficientNet-Lite0 (the model's stem)
#   tools/gpu-check.sh run [OUT]   (there, in a copy of this tree with build/gpu-bundle) runs
#                                  the cuda suite (the training ops and steps included), then
#                                  `bench --device cuda --preset base --vs-torch` in f32 (and
#                                  torch.compile), TF32 and BF16, `bench --train --device cuda
#                                  --vs-torch` in f32 and BF16, and last a GPU training run of
#                                  the radiograph-and-aerial model (train --device cuda) for
#                                  TRAIN_S seconds (default 240), stopped with SIGINT so that it
#                                  writes its checkpoint, brought back as an f16 model file
#                                  (OUT/train-f16.safetensors: a checkpoint with its moments is
#                                  larger than what comes back from the machine) with its log
#                                  (OUT/train.jsonl); the machine and the tests in OUT/tests.txt,
#                                  the benches in OUT/bench.txt (five files in all: what comes
#                                  back from the machine is at most eight); OUT defaults to $OUT,
#                                  else build/gpu-out
#
# Budget: about 8 minutes of GPU time for `run` with the default TRAIN_S (the torch.compile
# warm-up and the training run are most of it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUNDLE=build/gpu-bundle

bundle() {
    local bins=(build/tests/test-cuda build/tests/test-devicepath build/app/changelens-cli)
    for b in "${bins[@]}"; do
        [ -x "$b" ] || { echo "gpu-check: $b is missing: build first (./run.sh test)" >&2; exit 1; }
    done
    if ! grep -q "CL_HAVE_CUDA 1" build/cl-config.h 2>/dev/null; then
        echo "gpu-check: this build has no CUDA (nvcc was not found at configure time)" >&2
        exit 1
    fi
    rm -rf "$BUNDLE"
    mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
    cp "${bins[@]}" "$BUNDLE/bin/"
    # the Debian libraries they load, minus glibc's, the C++ runtime's and CUDA's
    for b in "${bins[@]}"; do ldd "$b"; done | awk '/=> \// { print $3 }' | sort -u |
        grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$BUNDLE/lib/"; done
    tar -C "$BUNDLE" -cJf "$BUNDLE/lib.tar.xz" lib
    rm -rf "$BUNDLE/lib"
    # the pretrained stem the model trains on (CHANGELENS_DATA there)
    local effnet=${CHANGELENS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/changelens}/pretrained/efficientnet-lite0.safetensors
    if [ -f "$effnet" ]; then
        mkdir -p "$BUNDLE/data/pretrained"
        cp "$effnet" "$BUNDLE/data/pretrained/"
    else
        echo "gpu-check: $effnet is missing (tools/fetch-pretrained.sh): no training run there" >&2
    fi
    du -sh "$BUNDLE"
    # what travels to the GPU machine: the tracked tree and the bundle, at most 64 MiB
    local tree bundle_bytes limit=$((64 * 1024 * 1024))
    tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f1)
    bundle_bytes=$(du -sb "$BUNDLE" | cut -f1)
    echo "gpu-check: the tree ($((tree / 1048576)) MiB) and the bundle ($((bundle_bytes / 1048576)) MiB) travel: $(((tree + bundle_bytes) / 1048576)) MiB of the device's 64 MiB"
    if [ $((tree + bundle_bytes)) -gt "$limit" ]; then
        echo "gpu-check: too large to travel to the device machine: the Debian libraries alone" \
            "are $(($(stat -c %s "$BUNDLE/lib.tar.xz") / 1048576)) MiB compressed" >&2
        exit 1
    fi
    echo "gpu-check: carry $BUNDLE and run: bash tools/gpu-check.sh run"
}

run() {
    local out=${1:-${OUT:-build/gpu-out}}
    mkdir -p "$out"
    [ -f "$BUNDLE/lib.tar.xz" ] || { echo "gpu-check: no $BUNDLE (run 'bundle' first)" >&2; exit 1; }
    local libs=/tmp/cl-gpu-libs
    rm -rf "$libs" && mkdir -p "$libs" && tar -C "$libs" --strip-components=1 -xJf "$BUNDLE/lib.tar.xz"
    # CUDA's own libraries: the toolkit's, else the ones PyTorch's wheels carry
    local cuda_dirs=""
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib; do
        [ -e "$d/libcublas.so.13" ] && cuda_dirs="$cuda_dirs:$d"
    done
    local py
    py=$(command -v python3)
    for d in $("$py" -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in os.listdir(p)))' 2>/dev/null); do
        [ -e "$d/libcublas.so.13" ] || [ -e "$d/libcudart.so.13" ] && cuda_dirs="$cuda_dirs:$d"
    done
    export LD_LIBRARY_PATH="$libs$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # the PyTorch peer runs with the machine's own libraries, not the bundle's
    printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexec %s "$@"\n' "$py" > /tmp/cl-gpu-python
    chmod +x /tmp/cl-gpu-python
    export CL_TORCH_PYTHON=/tmp/cl-gpu-python CL_SOURCE_ROOT=$ROOT
    local bin=$BUNDLE/bin
    {
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
        ldd "$bin/changelens-cli" | grep -E "not found|cublas|cudart" || true
    } 2>&1 | tee "$out/tests.txt"
    rm -f "$out/bench.txt"
    local rc=0
    echo "== cuda suite" | tee -a "$out/tests.txt"
    "$bin/test-cuda" --verbose 2>&1 | tee -a "$out/tests.txt" || rc=1
    echo "== devicepath suite" | tee -a "$out/tests.txt"
    "$bin/test-devicepath" 2>&1 | grep -E "^(ok|not ok)" | tee -a "$out/tests.txt" || rc=1
    for math in f32 tf32 bf16; do
        local compile=""
        [ "$math" = f32 ] && compile=--torch-compile
        echo "== bench base, $math" | tee -a "$out/bench.txt"
        CHANGELENS_CUDA_MATH=$math timeout 200 "$bin/changelens-cli" bench --device cuda \
            --preset base --vs-torch $compile --repeat 5 --tokens 32 2>&1 |
            tee -a "$out/bench.txt" || rc=1
    done
    for math in f32 bf16; do
        echo "== bench --train base, $math" | tee -a "$out/bench.txt"
        CHANGELENS_CUDA_MATH=$math timeout 120 "$bin/changelens-cli" bench --train --device cuda \
            --preset base --vs-torch --batch 8 --warmup 1 --repeat 3 2>&1 |
            tee -a "$out/bench.txt" || rc=1
    done
    train_model "$out" "$bin" || rc=1
    return $rc
}

# The model issue's model trained on the GPU from the shipped radiograph-and-aerial model for
# TRAIN_S seconds; the f16 model file and the log come back.
train_model() {
    local out=$1 bin=$2 run=/tmp/cl-gpu-train
    if [ ! -f "$BUNDLE/data/pretrained/efficientnet-lite0.safetensors" ]; then
        echo "== train: no pretrained stem in the bundle: skipped" | tee "$out/train.txt"
        return 0
    fi
    export CHANGELENS_DATA=$ROOT/$BUNDLE/data
    rm -rf "$run"
    echo "== train --device cuda, ${TRAIN_S:-240} s" | tee "$out/train.txt"
    local rc=0
    CHANGELENS_CUDA_MATH=${TRAIN_MATH:-bf16} timeout -s INT "${TRAIN_S:-240}" \
        "$bin/changelens-cli" train --device cuda \
        --from data/models/changelens-radiograph-aerial.safetensors \
        --task radiograph,radiograph+changed,aerial,aerial+changed,aerial+changed \
        --steps 100000 --batch 16 --lr 1e-4 --warmup 50 --aux-objects 1 --aux-changed 2 \
        --checkpoint-every 200 --keep-checkpoints 1 --seed 41 --out "$run" 2>&1 |
        tail -n 40 | tee -a "$out/train.txt" || rc=$?
    # 130: interrupted at the time limit, its checkpoint written
    [ "$rc" = 0 ] || [ "$rc" = 130 ] || echo "train: exit status $rc" | tee -a "$out/train.txt"
    local ck
    ck=$(ls "$run"/checkpoints/step-*.safetensors 2>/dev/null | tail -n 1)
    if [ -z "$ck" ]; then
        echo "train: no checkpoint written" | tee -a "$out/train.txt"
        return 1
    fi
    "$bin/changelens-cli" model convert --dtype f16 "$ck" "$out/train-f16.safetensors" 2>&1 |
        tee -a "$out/train.txt"
    cp "$run/train.jsonl" "$out/train.jsonl"
    echo "train: $ck -> train-f16.safetensors" | tee -a "$out/train.txt"
}

case "${1:-}" in
bundle) bundle ;;
run) shift; run "$@" ;;
*) echo "usage: tools/gpu-check.sh bundle | run [OUT]" >&2; exit 2 ;;
esac
