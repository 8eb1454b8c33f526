# lab: host
# The lab script's own failure paths: each ends with a non-zero exit and a message that names
# the step, within its time limit. These run on the host and boot guests of their own.
# Those whose guest runs its command are in the soak tier only: every other suite's run shows
# a command's status and files coming back; the default run keeps the failures that stop before
# the command (a download, a module, a refused node, a bad option).
SOAK_TESTS="test_lab_returns_command_status test_lab_returns_files test_lab_command_timeout"

lab() { "$LAB_REPO/scripts/lab" --out "$T_OUT/lab" "$@"; }

# The command's exit status comes back through the guest.
test_lab_returns_command_status() {
  local rc=0
  lab -- 'echo hello-from-guest; exit 7' >"$T_OUT/out" 2>&1 || rc=$?
  [ "$rc" -eq 7 ] || fail "expected exit 7, got $rc: $(tail -5 "$T_OUT/out")"
  grep -q hello-from-guest "$T_OUT/out" || fail "the command's output did not come back"
}

# Files written to $LAB_OUT come back to --out.
test_lab_returns_files() {
  lab -- 'echo 42 > $LAB_OUT/answer' >"$T_OUT/out" 2>&1 || fail "lab run failed: $(tail -5 "$T_OUT/out")"
  [ "$(cat "$T_OUT/lab/answer")" = 42 ] || fail "file written in the guest did not come back"
}

# A command that runs too long is stopped at --timeout and reported, exit 124.
test_lab_command_timeout() {
  local rc=0 t0 t1
  t0=$(date +%s)
  lab --timeout 3 -- 'sleep 300' >"$T_OUT/out" 2>&1 || rc=$?
  t1=$(date +%s)
  [ "$rc" -eq 124 ] || fail "expected exit 124, got $rc"
  grep -q 'ran past --timeout 3 s' "$T_OUT/out" || fail "no message about the time limit: $(tail -3 "$T_OUT/out")"
  [ $((t1 - t0)) -lt 100 ] || fail "took $((t1 - t0)) s for a 3 s limit"
}

# A kernel download that fails names the step and exits 2 without booting anything.
test_lab_download_failure() {
  local rc=0
  # One suite: apt retries each refused index with growing delays (7 s per suite).
  RAILBENCH_LAB_CACHE=$T_OUT/empty-cache RAILBENCH_LAB_MIRROR=http://127.0.0.1:9/debian RAILBENCH_LAB_SUITES=sid \
    timeout 120 "$LAB_REPO/scripts/lab" --out "$T_OUT/lab" -- true >"$T_OUT/out" 2>&1 || rc=$?
  cat "$T_OUT/out"
  [ "$rc" -eq 2 ] || fail "expected exit 2, got $rc"
  grep -q "step 'fetch kernel'" "$T_OUT/out" || fail "the message does not name the step"
  grep -q "could be fetched from: sid$" "$T_OUT/out" || fail "the message does not name the suite tried"
}

# A kernel module that will not load in the guest names the module and exits 2.
test_lab_module_failure() {
  local rc=0
  RAILBENCH_LAB_BREAK_MODULE=rdma_rxe lab -- true >"$T_OUT/out" 2>&1 || rc=$?
  cat "$T_OUT/out"
  [ "$rc" -eq 2 ] || fail "expected exit 2, got $rc"
  grep -q "insmod rdma_rxe" "$T_OUT/out" || fail "the message does not name the module"
}

# A bad option is a usage error that names the option.
test_lab_bad_option() {
  local rc=0
  lab --layout mesh -- true >"$T_OUT/out" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || fail "expected exit 2, got $rc"
  grep -q -- '--layout mesh: use pods, hostnet or ipvlan' "$T_OUT/out" || fail "$(cat "$T_OUT/out")"
}

# A --k8s-node spec that scripts/cluster refuses ends the lab before the guest boots: exit 2,
# the step and the field named, no control-plane process left running.
test_lab_k8s_node_refused() {
  local rc=0
  lab --k8s-node 'node-a,netns=podA,bogus=1' -- true >"$T_OUT/out" 2>&1 || rc=$?
  cat "$T_OUT/out"
  [ "$rc" -eq 2 ] || fail "expected exit 2, got $rc"
  grep -q "step 'cluster'" "$T_OUT/out" || fail "the message does not name the step"
  grep -q "unknown field 'bogus=1'" "$T_OUT/out" || fail "the message does not name the field"
  ! grep -q booting "$T_OUT/out" || fail "the guest booted"
  ! pgrep -f "$T_OUT/lab/.cluster" >/dev/null || { pgrep -af "$T_OUT/lab/.cluster"; fail "processes left running"; }
}

# The sccache server a build starts outlives the script (its idle time) and must hold no lock
# its caller took: scripts/lab --real-nodes holds one on fd 9, and a server that inherited it
# kept the next --real-nodes lab out ("another scripts/lab --real-nodes runs"). A server of
# its own (another port), started by use_sccache under a lock on fd 9: the lock is free once
# the caller's shell ends.
test_sccache_server_holds_no_lock() {
  local lock=$T_OUT/lock port=$((4300 + RANDOM % 500)) wrapper rc=0
  (
    export SCCACHE_SERVER_PORT=$port
    exec 9>"$lock"
    flock -n 9 || exit 1
    unset RUSTC_WRAPPER
    # shellcheck source=scripts/lib.sh
    . "$LAB_REPO/scripts/lib.sh"
    use_sccache
    echo "${RUSTC_WRAPPER:-}" >"$T_OUT/wrapper"
    # A compilation through the wrapper, as cargo's first rustc call (it starts a server
    # where none runs).
    [ -z "${RUSTC_WRAPPER:-}" ] || "$RUSTC_WRAPPER" rustc -vV
  ) >"$T_OUT/out" 2>&1 </dev/null || fail "use_sccache or a compile failed under a lock on fd 9: $(tail -3 "$T_OUT/out")"
  wrapper=$(cat "$T_OUT/wrapper")
  [ -n "$wrapper" ] || fail "RAILBENCH_SCCACHE=0 here: nothing to check"
  SCCACHE_SERVER_PORT=$port "$wrapper" --show-stats >/dev/null 2>&1 || fail "no sccache server on port $port"
  flock -n "$lock" true || rc=$?
  SCCACHE_SERVER_PORT=$port "$wrapper" --stop-server >/dev/null 2>&1 || true
  [ "$rc" -eq 0 ] || fail "the sccache server holds the caller's lock on fd 9"
}

# Scripts that run what they built find it where cargo put it: CARGO_TARGET_DIR's release/
# (absolute, or relative to the checkout) or target/release; no host-side script spells
# target/release itself (the lab's guest sees the checkout only, as scripts/demo's guest part
# does, and scripts/check-release
# checks a normal build's on purpose).
test_release_binaries_follow_cargo_target_dir() {
  local got
  got=$(unset CARGO_TARGET_DIR; . "$LAB_REPO/scripts/lib.sh"; release_dir)
  [ "$got" = "$LAB_REPO/target/release" ] || fail "without CARGO_TARGET_DIR: $got"
  got=$(CARGO_TARGET_DIR=/elsewhere/t; . "$LAB_REPO/scripts/lib.sh"; release_dir)
  [ "$got" = /elsewhere/t/release ] || fail "CARGO_TARGET_DIR=/elsewhere/t: $got"
  got=$(CARGO_TARGET_DIR=tgt; cd /; . "$LAB_REPO/scripts/lib.sh"; release_dir)
  [ "$got" = "$LAB_REPO/tgt/release" ] || fail "CARGO_TARGET_DIR=tgt: $got"
  local spelled
  spelled=$(grep -n 'target/release/\|target/release}' "$LAB_REPO"/scripts/{bench-*,node-parts,check-metrics,check-image,cluster} 2>/dev/null | grep -v '^[^:]*:[0-9]*:#' || true)
  [ -z "$spelled" ] || fail "scripts that spell target/release: $spelled"
}
