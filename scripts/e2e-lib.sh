# SPDX-License-Identifier: Apache-2.0
#
# e2e-lib.sh -- sourced by scripts/e2e.sh and scripts/peers.sh: emulated
# engines (`wsel cluster`) and nginx, with or without the wsel module, on
# free 127.0.0.1 ports, each started in the background and stopped by pid.
#
# The caller sets: prog (its name, for messages), build, wsel, module,
# NGINX, NGINX_WORKERS, WORKERS, DP, BLOCK, HEADER_BUFFER, KV_THREADS (may
# be unset), pin_nginx and pin_rest (arrays, may be empty),
# deadline, BUDGET_S, and optionally engine_extra (an array of more
# wsel-engine options), PROMPT_DIRECTIVE (wsel_prompt's value, tokens by
# default), NGINX_TOKENIZER (a wsel_tokenizer folder), POLICY_CONFIG (the
# policy's JSON configuration, {} by default; no single quote) and
# upstream_extra (more wsel_* lines for the upstream block, e.g.
# wsel_sync); these
# functions set cluster_pid, nginx_pid and port.

# A master started as root runs its workers as nobody, who cannot read a
# checkout under a private folder (mktemp -d is mode 0700): run them as
# the user running the script.
user_line=""
if [ "$(id -u)" = 0 ]; then user_line="user $(id -un) $(id -gn);"; fi

# stop_all_on_exit PROG: on exit run the caller's stop_all, then remove
# OUT unless keep_out is 1 or the exit failed (then say where the logs
# are, as PROG); INT and TERM exit with 130 and 143.
e2e_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_all
  if ((keep_out == 0 && rc == 0)); then
    rm -rf "$OUT"
  else
    echo "$e2e_prog: logs in $OUT" >&2
  fi
  exit "$rc"
}
stop_all_on_exit() {
  e2e_prog=$1
  trap e2e_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# stop PID: TERM, up to 20 s, then KILL; only processes started here.
stop() {
  local pid=$1 i
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

die() {
  echo "${prog:-e2e.sh}: $*" >&2
  exit 1
}

left() { # seconds left of the budget, at least 1
  local l=$((deadline - SECONDS))
  ((l > 0)) || die "over the budget of ${BUDGET_S} s"
  echo "$l"
}

free_port() {
  python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_cluster DIR TIME_SCALE: the engines, waits for their ready file.
start_cluster() {
  local dir=$1 ts=$2 i
  rm -f "$dir/ready"
  "${pin_rest[@]}" "$wsel" cluster --workers "$WORKERS" --dp "$DP" --kv-events --time-scale "$ts" \
    --host 127.0.0.1 --block-size "$BLOCK" --quiet --ready-file "$dir/ready" \
    ${engine_extra[@]+"${engine_extra[@]}"} >"$dir/cluster.log" 2>&1 &
  cluster_pid=$!
  for ((i = 0; i < 1200; i++)); do
    [[ -s $dir/ready ]] && return 0
    kill -0 "$cluster_pid" 2>/dev/null || die "wsel cluster exited: $(tail -5 "$dir/cluster.log")"
    sleep 0.1
  done
  die "the engines did not start in 120 s"
}

# write_conf DIR POLICY MODE PORT: nginx.conf from the ready file. POLICY
# "plain": no module loaded, nginx's own round-robin over the same servers
# with the same proxy settings (the latency bench's baseline).
write_conf() {
  local dir=$1 policy=$2 mode=$3 port=$4 d=$1/nginx
  local servers wsrv load="" wsel_ups="" route="" rank="" status_loc=""
  rm -rf "$d"
  mkdir -p "$d/logs" "$d/tmp" "$d/conf"
  servers=$(awk '$3 == "http" { sub("http://", "", $4); printf "        server %s max_fails=0;\n", $4 }' "$dir/ready")
  if [[ $policy != plain ]]; then
    wsrv=$(awk -v dp="$DP" '
      $3 == "http" { sub("http://", "", $4); addr[$2] = $4; n = $2 + 1 }
      $3 == "kv_events" { kv[$2] = kv[$2] (kv[$2] == "" ? "" : ",") $5 }
      END { for (w = 0; w < n; w++) printf "        wsel_server %s dp=%s kv=%s;\n", addr[w], dp, kv[w] }' "$dir/ready")
    load="load_module $module;"
    wsel_ups="        wsel_policy $build/plugins/$policy.so '${POLICY_CONFIG:-{\}}';
$wsrv
        wsel_block_size $BLOCK;
        wsel_kv_source $mode${KV_THREADS:+$([[ $mode == events ]] && echo " threads=$KV_THREADS")};
        wsel_prompt ${PROMPT_DIRECTIVE:-tokens};${NGINX_TOKENIZER:+
        wsel_tokenizer $NGINX_TOKENIZER;}
        ${upstream_extra:-}"
    route="wsel_route engines;"
    rank="proxy_set_header X-data-parallel-rank \$wsel_dp_rank;"
    status_loc="location = /wsel/status { wsel_status engines; }"
  fi
  cat >"$d/conf/nginx.conf" <<EOF
# SPDX-License-Identifier: Apache-2.0
$load
$user_line
worker_processes $NGINX_WORKERS;
daemon off;
pid $d/logs/nginx.pid;
error_log $d/logs/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path $d/tmp/body;
    proxy_temp_path $d/tmp/proxy;
    fastcgi_temp_path $d/tmp/fastcgi;
    uwsgi_temp_path $d/tmp/uwsgi;
    scgi_temp_path $d/tmp/scgi;
    upstream engines {
$servers
$wsel_ups
        keepalive 256;
    }
    server {
        listen 127.0.0.1:$port$( ((NGINX_WORKERS > 1)) && echo " reuseport");
        client_header_buffer_size $HEADER_BUFFER;
        client_body_buffer_size 4m;
        client_max_body_size 16m;
        location /v1/ {
            $route
            proxy_pass http://engines;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            $rank
            proxy_buffering off;
            proxy_read_timeout 300s;
        }
        $status_loc
    }
}
EOF
}

status() { # status PORT: the module's JSON status
  curl -sf --max-time 10 "http://127.0.0.1:$1/wsel/status"
}

# start_nginx DIR MODE POLICY: nginx in the foreground on a free port (sets
# port), waits until it proxies; in events mode also for the first KV event
# of a probe request (the event subscriptions are up).
start_nginx() {
  local dir=$1 mode=$2 policy=$3 try i probe
  for ((try = 0; try < 3; try++)); do
    port=$(free_port)
    write_conf "$dir" "$policy" "$mode" "$port"
    "${pin_nginx[@]}" "$NGINX" -p "$dir/nginx/" -c "$dir/nginx/conf/nginx.conf" -e "$dir/nginx/logs/error.log" \
      >"$dir/nginx/logs/stdout.log" 2>&1 &
    nginx_pid=$!
    for ((i = 0; i < 600; i++)); do
      kill -0 "$nginx_pid" 2>/dev/null || break
      curl -sf --max-time 10 "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && break 2
      sleep 0.1
    done
    stop "$nginx_pid"
    nginx_pid=""
    grep -q "Address already in use" "$dir/nginx/logs/error.log" 2>/dev/null ||
      die "nginx did not start: $(tail -5 "$dir/nginx/logs/error.log" 2>/dev/null)"
  done
  [[ -n $nginx_pid ]] || die "nginx: no free port after 3 tries"
  [[ $policy != plain && $mode == events ]] || return 0
  # 128 random token ids: a prompt no engine has cached yet
  probe=$(python3 -c 'import json, random
print(json.dumps({"prompt": random.sample(range(32000), 128), "max_tokens": 1}))')
  for ((i = 0; i < 300; i++)); do
    if ((i % 50 == 0)); then
      curl -sf --max-time 10 -H 'Content-Type: application/json' -d "$probe" \
        "http://127.0.0.1:$port/v1/completions" >/dev/null || die "the probe request failed"
    fi
    status "$port" | grep -q '"kv_blocks_stored":0,' || return 0
    sleep 0.1
  done
  die "no KV event reached nginx in 30 s"
}
