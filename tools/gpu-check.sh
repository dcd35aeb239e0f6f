#!/usr/bin/env bash
# gpu-check.sh - the GPU checks of the CUDA backend, prepared here and run on a GPU machine
# that has CUDA 13 and PyTorch but not this project's Debian libraries.
#
#   tools/gpu-check.sh bundle      (here, after ./run.sh's build) writes build/gpu-bundle/: the
#                                  cuda and devicepath tests, changelens-cli, and every shared
#                                  library they need from Debian except glibc, libstdc++ and
#                                  CUDA's own (the GPU machine has those), as lib.tar.xz
#   tools/gpu-check.sh run [OUT]   (there, in a copy of this tree with build/gpu-bundle) runs
#                                  the cuda suite, then `bench --device cuda --preset base
#                                  --vs-torch --torch-compile` in f32 and in TF32, and the
#                                  encoder-heavy large preset; logs and JSON go to OUT
#                                  (default: $OUT, else build/gpu-out)
#
# Budget: about 6 minutes of GPU time for `run` (the torch.compile warm-ups are most of it).
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
    du -sh "$BUNDLE"
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
    } 2>&1 | tee "$out/machine.txt"
    local rc=0
    echo "== cuda suite" | tee "$out/tests.txt"
    "$bin/test-cuda" --verbose 2>&1 | tee -a "$out/tests.txt" || rc=1
    echo "== devicepath suite" | tee -a "$out/tests.txt"
    "$bin/test-devicepath" 2>&1 | grep -E "^(ok|not ok)" | tee -a "$out/tests.txt" || rc=1
    for math in f32 tf32; do
        echo "== bench base, $math" | tee "$out/bench-base-$math.txt"
        CHANGELENS_CUDA_MATH=$math timeout 240 "$bin/changelens-cli" bench --device cuda \
            --preset base --vs-torch --torch-compile --repeat 5 --tokens 32 2>&1 |
            tee -a "$out/bench-base-$math.txt" || rc=1
    done
    echo "== bench large, tf32 (no peer)" | tee "$out/bench-large-tf32.txt"
    CHANGELENS_CUDA_MATH=tf32 timeout 120 "$bin/changelens-cli" bench --device cuda \
        --preset large --repeat 3 --tokens 16 2>&1 | tee -a "$out/bench-large-tf32.txt" || rc=1
    return $rc
}

case "${1:-}" in
bundle) bundle ;;
run) shift; run "$@" ;;
*) echo "usage: tools/gpu-check.sh bundle | run [OUT]" >&2; exit 2 ;;
esac
