#!/usr/bin/env bash
# gpu-check.sh - the GPU checks of the CUDA backend, prepared here and run on a GPU machine
# that has CUDA 13 and PyTorch but not this project's Debian libraries.
#
#   tools/gpu-check.sh bundle      (here, after ./run.sh's build) writes build/gpu-bundle/
#                                  bundle.tar.xz: the engine-only programs (test-cuda and
#                                  changelens-engine: no image, case-database, PACS or report
#                                  libraries), every shared library they load from Debian except
#                                  glibc's, the C++ runtime's and CUDA's (the GPU machine has
#                                  those), and set-up's pretrained EfficientNet-Lite0 (the model's
#                                  stem; the tensors past its stride-16 map as zeros); it fails
#                                  when the tree and the bundle would not travel (64 MiB)
#   tools/gpu-check.sh run [OUT]   (there, in a copy of this tree with build/gpu-bundle carried:
#                                  the device tool's `carry`) unpacks it in /tmp/cl-gpu and runs
#                                  the cuda suite (the training ops and steps included), then
#                                  `bench --device cuda --preset base --vs-torch` in f32 (and
#                                  torch.compile), TF32 and BF16, the radiograph-and-aerial
#                                  model's describe (`bench --model`) in f32 and BF16, `bench
#                                  --train --device cuda
#                                  --vs-torch` in f32 and BF16, and last a GPU training run of
#                                  the radiograph-and-aerial model (train --device cuda) for
#                                  TRAIN_S seconds (default 200), stopped with SIGINT so that it
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
BUILD=${CL_BUILD_ROOT:-build}        # the meson build the programs come from
BUNDLE=${CL_GPU_BUNDLE:-build/gpu-bundle}
UNPACKED=/tmp/cl-gpu # where `run` unpacks the bundle

bundle() {
    # the engine-only programs (core/meson.build's engine_dep): no image, case-database, PACS or
    # report libraries, so that they and what they load fit beside the tree
    local bins=("$BUILD/tests/test-cuda" "$BUILD/app/changelens-engine")
    for b in "${bins[@]}"; do
        [ -x "$b" ] || { echo "gpu-check: $b is missing: build first (./run.sh test)" >&2; exit 1; }
    done
    if ! grep -q "CL_HAVE_CUDA 1" "$BUILD/cl-config.h" 2>/dev/null; then
        echo "gpu-check: this build has no CUDA (nvcc was not found at configure time)" >&2
        exit 1
    fi
    local stage=$BUNDLE.stage
    rm -rf "$BUNDLE" "$stage"
    mkdir -p "$BUNDLE" "$stage/bin" "$stage/lib"
    # symbols kept (a crash there names its function), debugging sections dropped
    for b in "${bins[@]}"; do strip --strip-debug -o "$stage/bin/$(basename "$b")" "$b"; done
    # the Debian libraries they load, minus glibc's, the C++ runtime's and CUDA's
    for b in "${bins[@]}"; do ldd "$b"; done | awk '/=> \// { print $3 }' | sort -u |
        grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$stage/lib/"; done
    # the pretrained stem the model trains on (CHANGELENS_DATA there): the model reads its
    # stride-16 map (config stem "efficientnet_lite0:16"), so the tensors after the last
    # 112-channel block (_blocks.10) travel as zeros, which compress to nothing; the others are
    # set-up's values, unchanged
    local effnet=${CHANGELENS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/changelens}/pretrained/efficientnet-lite0.safetensors
    if [ -f "$effnet" ]; then
        mkdir -p "$stage/data/pretrained"
        python3 - "$effnet" "$stage/data/pretrained/efficientnet-lite0.safetensors" <<'PY'
import json, re, struct, sys
src, dst = sys.argv[1], sys.argv[2]
data = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
keep = re.compile(r"^(_conv_stem\.|_bn0\.|_blocks\.([0-9]|10)\.)")
for name, t in header.items():
    if name != "__metadata__" and not keep.match(name):
        a, b = t["data_offsets"]
        data[8 + n + a:8 + n + b] = bytes(b - a)
open(dst, "wb").write(data)
PY
    else
        echo "gpu-check: $effnet is missing (tools/fetch-pretrained.sh): no training run there" >&2
    fi
    tar -C "$stage" -cf - . | xz -9 -T0 > "$BUNDLE/bundle.tar.xz"
    # unpacked again, each program finds every library it needs in it (or among the excluded)
    rm -rf "$stage" && mkdir -p "$stage" && tar -C "$stage" -xJf "$BUNDLE/bundle.tar.xz"
    local missing
    missing=$(for b in "$stage"/bin/*; do LD_LIBRARY_PATH=$stage/lib ldd "$b"; done |
        awk '/=> / { print $1, $3 }' | grep -v -E "$stage/lib/|^(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas[^ ]*)\.so" || true)
    rm -rf "$stage"
    if [ -n "$missing" ]; then
        echo "gpu-check: libraries the bundle lacks:" $missing >&2
        exit 1
    fi
    # what travels to the GPU machine: the tracked tree and the bundle, at most 64 MiB
    local tree bundle_bytes limit=$((64 * 1024 * 1024))
    tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f1)
    bundle_bytes=$(du -sb "$BUNDLE" | cut -f1)
    awk -v t="$tree" -v b="$bundle_bytes" 'BEGIN { m = 1048576
        printf "gpu-check: the tree (%.1f MiB) and the bundle (%.1f MiB) travel: %.1f MiB of the device'"'"'s 64 MiB\n", t / m, b / m, (t + b) / m }'
    if [ $((tree + bundle_bytes)) -gt "$limit" ]; then
        echo "gpu-check: too large to travel to the device machine" \
            "($(((tree + bundle_bytes - limit) / 1024)) KiB over)" >&2
        exit 1
    fi
    echo "gpu-check: carry $BUNDLE and run: bash tools/gpu-check.sh run"
}

run() {
    local out=${1:-${OUT:-build/gpu-out}}
    mkdir -p "$out"
    [ -f "$BUNDLE/bundle.tar.xz" ] || { echo "gpu-check: no $BUNDLE (run 'bundle' first)" >&2; exit 1; }
    rm -rf "$UNPACKED" && mkdir -p "$UNPACKED" && tar -C "$UNPACKED" -xJf "$BUNDLE/bundle.tar.xz"
    local libs=$UNPACKED/lib
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
    # the pretrained stem the bundle carries (the model's bench and training run)
    [ -f "$UNPACKED/data/pretrained/efficientnet-lite0.safetensors" ] &&
        export CHANGELENS_DATA=$UNPACKED/data
    local bin=$UNPACKED/bin
    {
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
        ldd "$bin/changelens-engine" | grep -E "not found|cublas|cudart" || true
    } 2>&1 | tee "$out/tests.txt"
    rm -f "$out/bench.txt"
    local rc=0
    echo "== cuda suite" | tee -a "$out/tests.txt"
    "$bin/test-cuda" --verbose 2>&1 | tee -a "$out/tests.txt" || rc=1
    for math in f32 tf32 bf16; do
        local compile=""
        [ "$math" = f32 ] && compile=--torch-compile
        echo "== bench base, $math" | tee -a "$out/bench.txt"
        CHANGELENS_CUDA_MATH=$math timeout 200 "$bin/changelens-engine" bench --device cuda \
            --preset base --vs-torch $compile --repeat 5 --tokens 32 2>&1 |
            tee -a "$out/bench.txt" || rc=1
    done
    # the model issue's model (its stem on the host, no PyTorch peer for it): describe's parts
    if [ -n "${CHANGELENS_DATA:-}" ]; then
        for math in f32 bf16; do
            echo "== bench radiograph-and-aerial model, $math" | tee -a "$out/bench.txt"
            CHANGELENS_CUDA_MATH=$math timeout 100 "$bin/changelens-engine" bench --device cuda \
                --model data/models/changelens-radiograph-aerial.safetensors --repeat 5 \
                --tokens 32 2>&1 | tee -a "$out/bench.txt" || rc=1
        done
    fi
    for math in f32 bf16; do
        echo "== bench --train base, $math" | tee -a "$out/bench.txt"
        CHANGELENS_CUDA_MATH=$math timeout 120 "$bin/changelens-engine" bench --train --device cuda \
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
    if [ ! -f "$UNPACKED/data/pretrained/efficientnet-lite0.safetensors" ]; then
        echo "== train: no pretrained stem in the bundle: skipped" | tee "$out/train.txt"
        return 0
    fi
    rm -rf "$run"
    echo "== train --device cuda, ${TRAIN_S:-200} s" | tee "$out/train.txt"
    local rc=0
    CHANGELENS_CUDA_MATH=${TRAIN_MATH:-bf16} timeout -s INT "${TRAIN_S:-200}" \
        "$bin/changelens-engine" train --device cuda \
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
    "$bin/changelens-engine" model convert --dtype f16 "$ck" "$out/train-f16.safetensors" 2>&1 |
        tee -a "$out/train.txt"
    cp "$run/train.jsonl" "$out/train.jsonl"
    echo "train: $ck -> train-f16.safetensors" | tee -a "$out/train.txt"
}

case "${1:-}" in
bundle) bundle ;;
run) shift; run "$@" ;;
*) echo "usage: tools/gpu-check.sh bundle | run [OUT]" >&2; exit 2 ;;
esac
