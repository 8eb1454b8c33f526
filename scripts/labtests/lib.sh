# Helpers for lab test suites (sourced by scripts/lab.d/suite inside the guest).
# shellcheck shell=bash

RDMABW=${RDMABW:-$LAB_REPO/target/release/rdmabw}
RAILSWEEP=${RAILSWEEP:-$LAB_REPO/target/release/railsweep}
# The suites' checks of rdmabw's and railsweep's output, through results' and wire's types
# (the labcheck crate; `labcheck --help`).
LABCHECK=${LABCHECK:-$LAB_REPO/target/release/labcheck}
# The reference peer: Debian unstable's perftest (25.x), as scripts/lab fetched it.
IB_WRITE_BW=${IB_WRITE_BW:-$LAB_REPO/scripts/lab.d/ib_write_bw}
IB_WRITE_LAT=${IB_WRITE_LAT:-$LAB_REPO/scripts/lab.d/ib_write_lat}

# fail MSG: end the current test with a message.
fail() { echo "FAIL: $*" >&2; exit 1; }

# in_pod POD CMD...: run CMD in a pod's network namespace.
in_pod() { local p=$1; shift; ip netns exec "$p" "$@"; }

# topo POD RAIL COLUMN: a column (iface, ipv4, rdma_dev) of the lab's topology table.
topo() {
  awk -F'\t' -v p="$1" -v r="$2" -v c="$3" '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $1 == p && $2 == r { print $col[c]; found = 1 }
    END { exit !found }' "$LAB_TOPOLOGY" || fail "no $3 for $1 rail $2 in $LAB_TOPOLOGY"
}

# ctl_ip POD: the pod's address on the control network.
ctl_ip() { local l=${1#pod}; printf '10.99.0.%d' $(( $(printf '%d' "'$l") - 64 )); }

# gid_index DEV IPV4: the GID index of the IPv4-mapped RoCE v2 GID of IPV4 on DEV, read from sysfs
# (an independent check of what rdmabw chooses).
gid_index() {
  local dev=$1 ip=$2 want f
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${ip//./ })
  for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
    if [ "$(cat "$f")" = "$want" ]; then basename "$f"; return 0; fi
  done
  fail "no GID $want on $dev"
}

# wait_port POD PORT: wait up to 10 s for a TCP listener on PORT in POD.
wait_port() {
  local i
  for i in $(seq 1 100); do
    in_pod "$1" ss -ltn "sport = :$2" 2>/dev/null | grep -q LISTEN && return 0
    sleep 0.1
  done
  fail "nothing listens on port $2 in $1 after 10 s"
}

# cleanup_pods: end what a test left running.
cleanup_pods() { [ -n "${LAB_LAYOUT:-}" ] || return 0; pkill -f ib_write_bw; pkill -f ib_write_lat; pkill -x rdmabw; pkill -x tcpdump; pkill -x railsweep; sleep 0.2; } 2>/dev/null

# bw_of FILE: the average Gb/s of the 65536-byte row in an ib_write_bw style table.
bw_of() { awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { v = $4 } END { if (v == "") exit 1; print v }' "$1"; }

# json_get FILE FILTER: what the jq FILTER gives of the JSON document FILE, strings raw and
# arrays and objects on one line (`.results[-1].bw_avg_gbps`); exit non-zero when FILE does not
# parse.
json_get() { "${JQ[@]}" -rc "$2" "$1"; }
# The jq of json_get: the reference root's (scripts/lab fetches it beside perftest), through that
# root's loader, where the lab has one; else the machine's (1.6 takes ten times as long to start).
if [ -n "${LAB_PERFTEST:-}" ] && [ -x "$LAB_PERFTEST/usr/bin/jq" ]; then
  JQ=("$LAB_PERFTEST/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path
      "$LAB_PERFTEST/usr/lib/x86_64-linux-gnu" "$LAB_PERFTEST/usr/bin/jq")
else
  JQ=(jq)
fi

# now: seconds since the epoch with fractions.
now() { date +%s.%N; }
# elapsed T0 [T1]: seconds between two `now` readings (T1 defaults to now).
elapsed() { awk -v a="$1" -v b="${2:-$(now)}" 'BEGIN { printf "%.2f", b - a }'; }

# gt A B: true when the number A is greater than B.
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# wait_measuring FILE: wait up to 90 s until an rdmabw log says the measured window began.
wait_measuring() {
  local i
  for i in $(seq 1 900); do grep -q 'measuring' "$1" 2>/dev/null && return 0; sleep 0.1; done
  cat "$1"; fail "no 'measuring' in $1 after 90 s"
}

# kube METHOD PATH [JSON]: the lab's Kubernetes API server (scripts/lab --k8s-node) as admin;
# prints the response body, fails on an HTTP error.
kube() {
  local d=${LAB_K8S_DIR:?this suite needs scripts/lab --k8s-node} a p
  read -r a p <"$d/endpoint"
  curl -sSf --cacert "$d/pki/ca.crt" --cert "$d/pki/admin.crt" --key "$d/pki/admin.key" -X "$1" \
    ${3:+-H 'Content-Type: application/json' --data "$3"} "https://$a:$p$2"
}

# pods_in NS: the names of the pods in namespace NS, one per line.
pods_in() { kube GET "/api/v1/namespaces/$1/pods" | python3 -c 'import json, sys
for p in json.load(sys.stdin)["items"]: print(p["metadata"]["name"])'; }

# --- the real nodes' suites (scripts/lab --real-nodes: real_nodes, real_nodes_dra, real_nodes_crio)
rn_log() { kube GET "/api/v1/namespaces/lab/pods/$1/log"; }
# rn_log_part NAME PART: the lines of $T_OUT/NAME.log between its "=== PART" line and the next
# "=== " line (a report a pod printed among others).
rn_log_part() { sed -n "/^=== $2\$/,/^=== /p" "$T_OUT/$1.log" | sed '1d;/^=== /d'; }
rn_delete() { kube DELETE "/api/v1/namespaces/lab/pods/$1?gracePeriodSeconds=0" >/dev/null 2>&1 || true; }

# rn_node_sh NODE SCRIPT [SECONDS]: run SCRIPT with bash on NODE itself, as root in the guest's
# own namespaces (scripts/lab.d/node picks it up from its share within a second); prints its
# output and returns its exit status, 124 when no answer came within SECONDS (default 60).
rn_node_sh() {
  local d=$LAB_NODE_DIRS/$1/.lab/cmd id end=$((SECONDS + ${3:-60}))
  id=$(date +%s%N)-$BASHPID
  mkdir -p "$d"
  printf '%s\n' "$2" >"$d/$id.tmp" && mv "$d/$id.tmp" "$d/$id.sh"
  until [ -e "$d/$id.rc" ]; do
    [ $SECONDS -lt $end ] || { echo "rn_node_sh: no answer from $1 within ${3:-60} s" >&2; return 124; }
    sleep 0.2
  done
  cat "$d/$id.out"
  return "$(cat "$d/$id.rc")"
}

# rn_railsweep_multus NAME ARGS...: railsweep ARGS with --output-file $T_OUT/NAME.csv, stdout in NAME.out and
# stderr in NAME.err (each attempt's kept as NAME.N.err); sets $rc. Multus's thin plugin gives
# each GET of the pod 250 ms (multus.go, getPod): under emulation a fresh process's TLS handshake
# with the API server sometimes takes longer, and the sandbox fails with "error waiting for pod
# ... context deadline exceeded". Only that is tried again, at most three times in all, each
# attempt starting without the last one's files and pods (and after rn_before_retry, where a suite
# defines one).
rn_railsweep_multus() {
  local name=$1 attempt t0
  shift
  for attempt in 1 2 3; do
    rc=0 t0=$(now)
    rm -f "$T_OUT/$name".*csv "$T_OUT/$name.csv" "$T_OUT/$name.md" "$T_OUT/$name.svg"
    "$RAILSWEEP" "$@" --output-file "$T_OUT/$name.csv" >"$T_OUT/$name.out" 2>"$T_OUT/$name.err" || rc=$?
    echo "attempt $attempt: railsweep exit $rc after $(elapsed "$t0") s"
    cp "$T_OUT/$name.err" "$T_OUT/$name.$attempt.err"
    grep -q 'error waiting for pod: .*context deadline exceeded' "$T_OUT/$name.err" || break
    for _ in $(seq 60); do pods_in lab | grep -q '^railsweep-' || break; sleep 1; done
    ! declare -F rn_before_retry >/dev/null || rn_before_retry
  done
  cat "$T_OUT/$name.out"; tail -30 "$T_OUT/$name.err"
}

# RXE_FLAKE: rxe's `remote invalid request error` (status 9), which these emulated nodes give
# now and then (about once in ten real-node suite runs, on the nodes' own rails and on VFs; never
# twice in a row; why is not known: docs/testing.md). railsweep runs on them whose rails must be
# ok pass `--retries 1`, and rn_retried_only_after checks that nothing else was tried again.
RXE_FLAKE='remote invalid request error \(status 9'

# rn_retried_only_after ERR [RETRY_OK]: every rail railsweep tried again (its `attempt` lines in
# the stderr file ERR) failed first with what matches RETRY_OK (default: RXE_FLAKE).
rn_retried_only_after() {
  local ok=${2:-$RXE_FLAKE} bad
  echo "$(grep -c 'railsweep: rail [0-9]*: attempt ' "$1") rail(s) tried again"
  bad=$(grep 'railsweep: rail [0-9]*: attempt ' "$1" | grep -Ev "$ok" || true)
  [ -z "$bad" ] || fail "a rail was tried again after something other than /$ok/: $bad"
}

# rn_compare_expect NAME MODES [RETRY_OK]: what every real-node `railsweep compare --inject
# --show-commands --retries 1` of MODES modes must show in $T_OUT/NAME.err and NAME.md: each
# client command ran the injected rdmabw (/tmp/railsweep-rdmabw-VERSION), at least one per mode
# and rail; a rail tried again only after a failure matching RETRY_OK (rn_retried_only_after);
# each mode's pods deleted; and no warning in the comparison that the modes were measured
# unalike (the same flags for every mode).
rn_compare_expect() {
  local err=$T_OUT/$1.err modes=$2 cmds injected
  cmds=$(grep -c 'railsweep: rail [0-9]*: [^ ]* client ' "$err")
  injected=$(grep -c 'railsweep: rail [0-9]*: /tmp/railsweep-rdmabw-[^ ]* client ' "$err")
  echo "$injected client command(s)"
  [ "$cmds" -eq "$injected" ] && [ "$injected" -ge $((modes * LAB_RAILS)) ] \
    || { grep 'railsweep: rail [0-9]*: ' "$err"; fail "not every rail's client ran the injected rdmabw (the commands above)"; }
  rn_retried_only_after "$err" "${3:-$RXE_FLAKE}"
  [ "$(grep -c 'deleted pods' "$err")" -eq "$modes" ] || fail "each mode's pods not deleted"
  ! grep '^\*\*Warning' "$T_OUT/$1.md" || fail "$1.md warns that the modes were not measured alike"
}

# rn_wait_running NAME SECONDS: wait until pod NAME runs; its events and status to T_OUT if not.
rn_wait_running() {
  local end=$((SECONDS + $2)) phase
  while :; do
    phase=$(kube GET "/api/v1/namespaces/lab/pods/$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["status"].get("phase", ""))')
    [ "$phase" = Running ] && return 0
    if [ "$phase" = Failed ] || [ $SECONDS -ge $end ]; then
      kube GET "/api/v1/namespaces/lab/events?fieldSelector=involvedObject.name=$1" >"$T_OUT/$1.events.json" || true
      kube GET "/api/v1/namespaces/lab/pods/$1" >"$T_OUT/$1.status.json" || true
      python3 -c 'import json, sys
for e in json.load(open(sys.argv[1]))["items"]: print("event", e["reason"], e["message"][:300])' "$T_OUT/$1.events.json" || true
      fail "pod $1 is $phase after $2 s, not Running (events: $T_OUT/$1.events.json)"
    fi
    sleep 1
  done
}

# rn_wait_resource NODE RESOURCE SECONDS: wait until NODE's allocatable lists RESOURCE (the device
# plugin registered and the kubelet reported it).
rn_wait_resource() {
  local end=$((SECONDS + $3))
  until kube GET "/api/v1/nodes/$1" | python3 -c 'import json, sys
sys.exit(0 if int(json.load(sys.stdin)["status"].get("allocatable", {}).get(sys.argv[1], "0")) > 0 else 1)' "$2"; do
    [ $SECONDS -lt $end ] || fail "node $1 has no allocatable $2 after $3 s (the device plugin's log: $LAB_NODE_DIRS/$1/device-plugin.log)"
    sleep 1
  done
}

# rn_rails_ok_over_rdma CSV: every rail of the lab (0 to LAB_RAILS-1) in railsweep's CSV is ok,
# carried traffic and ran over the node's own rail interface rdmaI on both sides.
rn_rails_ok_over_rdma() {
  "$LABCHECK" rows "$1" --rails "0-$((LAB_RAILS - 1))" --any-order --ok --ends 'rdma{r},*' \
    --print rail,status,bw_avg_gbps,client_interface,server_interface || fail "the rails are not each ok over rdmaI (above)"
}
