#!/usr/bin/env bash
# peer-venv.sh - the test side's peers in build/venv (never used by the product): llama.cpp as
# llama-cpp-python, built from its sdist (pinned), for the GGUF parity test and
# `bench --decoder … --vs-llama`. Idempotent; pip keeps the built wheel in its cache, so a second
# set-up does not compile again. Cannot build it (no registry, no compiler): one line on stderr,
# exit 0 — the tests that need it are skipped, not failed.
set -uo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."

LLAMA_CPP_PYTHON="llama-cpp-python==0.3.36"
venv=build/venv

notice() { printf '\033[1mrun.sh:\033[0m %s\n' "$*" >&2; }

have() { [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import $1" >/dev/null 2>&1; }

have llama_cpp && exit 0
mkdir -p build
if [ ! -x "$venv/bin/python" ] && ! python3 -m venv "$venv" >build/peer-venv.log 2>&1; then
  notice "test peers not installed (python3 -m venv failed, see build/peer-venv.log); the llama.cpp parity test is skipped"
  exit 0
fi
notice "building the llama.cpp peer ($LLAMA_CPP_PYTHON from its sdist) into $venv (once)…"
# CMAKE_ARGS: the CPU build only, native instructions as llama-bench would use them
if ! CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF" \
     CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
     timeout 2400 "$venv/bin/pip" install --quiet --retries 1 --timeout 30 \
       --no-binary llama-cpp-python "$LLAMA_CPP_PYTHON" numpy >>build/peer-venv.log 2>&1; then
  notice "the llama.cpp peer could not be built (see build/peer-venv.log); the parity test and --vs-llama are skipped"
fi
exit 0
