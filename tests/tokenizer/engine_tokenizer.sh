#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# engine_tokenizer.sh ENGINE TOKENIZE MODEL_DIR -- wsel-engine --tokenizer
# counts a text and a chat prompt in the model's own tokens: the usage it
# reports equals wsel-tokenize's count (so its KV events carry those ids).
set -eu
engine=$1 tokenize=$2 model=$3
[ -d "$model" ] || { echo "skipped: run scripts/install-deps.sh"; exit 77; }
work=$(mktemp -d)
"$engine" --tokenizer "$model" --vocab-size 200000 --port 0 --port-file "$work/port" \
  --time-scale 1000 --quiet &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
i=0
until [ -s "$work/port" ]; do # wait for the port file, at most ~10 s
  i=$((i + 1)); [ $i -le 1000 ] || { echo "FAIL: engine did not start"; exit 1; }
  kill -0 $pid || { echo "FAIL: engine exited"; exit 1; }
  sleep 0.01
done
url=$(awk '/^http/{print $2}' "$work/port")
prompt_tokens() { # PATH BODY
  curl -sf "$url$1" -d "$2" | sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p'
}
text='Routing by prefix: 数据, café, 🙂 and <|im_start|> inside.'
chat='{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}'
want_text=$("$tokenize" "$model" "$text" | wc -w)
want_chat=$("$tokenize" "$model" --chat "$chat" | tail -1 | wc -w)
got_text=$(prompt_tokens /v1/completions "{\"model\":\"wsel-engine\",\"max_tokens\":1,\"prompt\":\"$text\"}")
got_chat=$(prompt_tokens /v1/chat/completions \
  "{\"model\":\"wsel-engine\",\"max_tokens\":1,${chat#\{}")
echo "text: $got_text tokens (wsel-tokenize $want_text); chat: $got_chat (wsel-tokenize $want_chat)"
[ "$got_text" = "$want_text" ] && [ "$got_chat" = "$want_chat" ] || { echo FAIL; exit 1; }
echo "1 passed, 0 failed"
