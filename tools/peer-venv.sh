#!/usr/bin/env bash
# peer-venv.sh - the test side's peers in build/venv (never used by the product): llama.cpp as
# llama-cpp-python, built from its sdist (pinned), for the GGUF parity test and
# `bench --decoder … --vs-llama`; and, only when asked (CL_PEER_TORCH=1), PyTorch for the
# EfficientNet-Lite0 agreement test (tests/reference/effnet_peer.py). Idempotent; pip keeps the
# built or downloaded wheels in its cache, so a second set-up does not compile or fetch again.
# Cannot install a peer (no registry, no compiler, too slow): one line on stderr, exit 0 — the
# tests that need it are skipped, not failed.
#
# Why PyTorch is opt-in: PyPI serves only the CUDA build for Linux x86-64 (torch 2.15: a 539 MB
# wheel that needs ~2.5 GB more of NVIDIA libraries to import, even on a machine without a GPU);
# the CPU-only wheels live on PyTorch's own index, which set-up cannot reach. Debian's
# python3-torch (1.13, CPU) is the other way: test-effnet uses /usr/bin/python3 when it has torch.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."

LLAMA_CPP_PYTHON="llama-cpp-python==0.3.36"
TORCH_TIMEOUT=1200 # seconds for the ~3 GB download and unpacking; past it, skipped
venv=build/venv

notice() { printf '\033[1mrun.sh:\033[0m %s\n' "$*" >&2; }

have() { [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import $1" >/dev/null 2>&1; }

want_torch=0
[ "${CL_PEER_TORCH:-0}" = 1 ] && ! have torch && want_torch=1
have llama_cpp && [ $want_torch = 0 ] && exit 0
mkdir -p build
if [ ! -x "$venv/bin/python" ] && ! python3 -m venv "$venv" >build/peer-venv.log 2>&1; then
  notice "test peers not installed (python3 -m venv failed, see build/peer-venv.log); the llama.cpp parity test is skipped"
  exit 0
fi
if ! have llama_cpp; then
  notice "building the llama.cpp peer ($LLAMA_CPP_PYTHON from its sdist) into $venv (once)…"
  # CMAKE_ARGS: the CPU build only, native instructions as llama-bench would use them
  if ! CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF" \
       CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
       timeout 2400 "$venv/bin/pip" install --quiet --retries 1 --timeout 30 \
         --no-binary llama-cpp-python "$LLAMA_CPP_PYTHON" numpy >>build/peer-venv.log 2>&1; then
    notice "the llama.cpp peer could not be built (see build/peer-venv.log); the parity test and --vs-llama are skipped"
  fi
fi
if [ $want_torch = 1 ]; then
  notice "installing PyTorch (PyPI's newest, the CUDA build: ~3 GB) into $venv (once)…"
  if ! timeout "$TORCH_TIMEOUT" "$venv/bin/pip" install --quiet --retries 1 --timeout 30 \
         torch numpy >>build/peer-venv.log 2>&1 || ! have torch; then
    notice "PyTorch could not be installed (see build/peer-venv.log; limit ${TORCH_TIMEOUT}s); /effnet/pytorch is skipped"
  fi
fi
exit 0
