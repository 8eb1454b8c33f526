# lab: --layout pods --rails 4
# No false failure under load (issue 21): in the 2-vCPU guest, where the kernel moves rxe's data
# on the same two CPUs that run both rdmabw processes, a heartbeat thread is starved long before
# the data stops. A run each of -q 4 and -q 8 at 1 MiB, and of railsweep --parallel over the
# 4 rails (five of each in the soak tier, `scripts/test --soak`, which sets LAB_SOAK=1; RUNS=N
# chooses): no run may fail, and a window the kernel's work kept the poller out of (0 writes
# counted) must say so. (A peer really gone is still reported in time: suite engine's
# test_server_sigkill_mid_run and test_link_down_mid_run.)

SRV=$(ctl_ip podB)
RUNS=${RUNS:-$([ "${LAB_SOAK:-0}" = 1 ] && echo 5 || echo 1)}
TEST_TIMEOUT=${TEST_TIMEOUT:-600}

# loaded QPS: RUNS client/server tests of 1 MiB writes on QPS queue pairs over rail 0.
loaded() {
  local qps=$1 r port nd fails=0
  nd=$(topo podA 0 iface)
  for r in $(seq 1 "$RUNS"); do
    port=$((18700 + qps * 10 + r))
    in_pod podB timeout 200 "$RDMABW" --netdev "$nd" -D 5 -s 1048576 -q "$qps" -p "$port" \
      >"$T_OUT/q$qps.$r.srv" 2>&1 &
    wait_port podB "$port"
    if in_pod podA timeout 150 "$RDMABW" client --netdev "$nd" -D 5 -s 1048576 -q "$qps" -p "$port" \
      --report_gbits "$SRV" >"$T_OUT/q$qps.$r.out" 2>&1; then
      echo "-q $qps run $r: $(awk '$1 == 1048576 && NF == 5 { print $4 " Gb/s, " $2 " iterations" }' "$T_OUT/q$qps.$r.out")"
      # A window the kernel's work kept the poller out of entirely is said to be one.
      if awk '$1 == 1048576 && NF == 5 && $2 == 0 { z = 1 } END { exit !z }' "$T_OUT/q$qps.$r.out" \
        && ! grep -q 'the polling thread did not run for' "$T_OUT/q$qps.$r.out"; then
        fails=$((fails + 1)); echo "-q $qps run $r: 0 writes in the window and no word of why"
      fi
    else
      fails=$((fails + 1)); echo "-q $qps run $r FAILED:"; grep -i 'error\|heard nothing' "$T_OUT/q$qps.$r.out"
    fi
    wait || { fails=$((fails + 1)); echo "-q $qps run $r: the server FAILED:"; tail -3 "$T_OUT/q$qps.$r.srv"; }
  done
  [ "$fails" -eq 0 ] || fail "$fails of $RUNS runs of -q $qps failed"
}

test_liveness_four_qps_of_1mib() { loaded 4; }

test_liveness_eight_qps_of_1mib() { loaded 8; }

test_liveness_railsweep_parallel_over_four_rails() {
  local r rc fails=0
  for r in $(seq 1 "$RUNS"); do
    rc=0
    "$RAILSWEEP" run --runner local --client-pod podA --server-pod podB --rdmabw "$RDMABW" \
      --tclass 41 --quiet --parallel --window 3 -s 1048576 --deadline-slack 60 --output-file "$T_OUT/par$r.csv" \
      >"$T_OUT/par$r.out" 2>"$T_OUT/par$r.err" || rc=$?
    echo "railsweep --parallel run $r: exit $rc; $(grep -m1 '^lab:\|rails,' "$T_OUT/par$r.out")"
    [ "$rc" -eq 0 ] || { fails=$((fails + 1)); grep 'failed' "$T_OUT/par$r.out" | head -4; }
  done
  [ "$fails" -eq 0 ] || fail "$fails of $RUNS railsweep --parallel runs failed"
}
