# lab: --layout pods --rails 2 --pods 4
# lab-tier: soak
# (The soak tier only, 130 s: the rounds and the suspects' rules over the same faults, a failed
# rail and a node slow to answer, are the cluster tests' fleet_cluster.rs and fleet_verdicts.rs.)
# railsweep fleet (issue 9) over four pods and two rails with the local runner: all 6 pairs in
# 3 rounds with the pairs of a round running at the same time, and in one run a rail taken down
# on one pod and another pod's rail slow to answer (netem delay), each named as a suspect, the
# second for its latency (issue 34). Bandwidths are only compared with each other: rxe under emulation is slow,
# and two pairs at once share the guest's one emulated CPU, so a round of 2 rails takes ~30 s.
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
# netem delay on podC's rail 1 switch port (r1c: what the rail sends to podC): each latency
# exchange with podC on rail 1 waits for it once, so its one-way latency (half a round trip)
# rises by half of it. The p99 of a clean rail under emulation is the guest's scheduling: 1 to
# 3 ms on one machine (p50 about 120 us), 4.4 ms on a loaded one, where a 4 ms delay left podC's
# pairs under 2.1 times the fleet's p99. So the delay is 6 times the clean rail's p99 measured
# just before (podC's p99 about 4 times the clean one), at least LAT_DELAY_US and at most
# LAT_DELAY_MAX_US (well inside the RDMA ACK timeout, 67 ms). Each of a latency test's LAT_ITERS
# exchanges of 2 B waits for the delay, so --deadline-slack grows with both; railsweep's --lat-iters
# keeps the test short: ib_write_lat's 1000 exchanges took 11 s per pair behind a 10 ms delay,
# and eight of podC's pairs run. The p99 of 300 exchanges is their third largest, noisier than
# that of 1000 (a clean pair's 1 to 3 ms): hence 6 times, not 4.
LAT_DELAY_US=${LAT_DELAY_US:-15000}
LAT_DELAY_MAX_US=${LAT_DELAY_MAX_US:-25000}
LAT_ITERS=${LAT_ITERS:-300}

# fleet NAME ARGS...: railsweep fleet over podA..podD; files in $T_OUT/NAME/, stdout in
# $T_OUT/NAME.out, stderr in $T_OUT/NAME.err; sets $rc.
fleet() {
  local name=$1; shift
  rc=0
  "$RAILSWEEP" fleet --runner local --pods podA,podB,podC,podD --rdmabw "$RDMABW" \
    --tclass 41 --out-dir "$T_OUT/$name" "$@" >"$T_OUT/$name.out" 2>"$T_OUT/$name.err" || rc=$?
  cat "$T_OUT/$name.out"; tail -12 "$T_OUT/$name.err"
}

# All pairs, 3 rounds of 2 pairs; the two pairs of each round overlap in time. Emulated rxe is
# too noisy for the outlier rule (a pair can get ~0 of the shared CPU), so none is re-measured
# and the exit code only has to say that railsweep ran (0 or 1).
test_fleet_all_pairs_in_rounds() {
  fleet all --window 1 --no-remeasure --metrics "$T_OUT/all.prom"
  [ "$rc" -le 1 ] || { cat "$T_OUT/all.err"; fail "railsweep fleet exit $rc"; }
  "$LABCHECK" fleet-rounds "$T_OUT/all" --pairs 6 --rows 12 --rounds 3 --per-round 2 --min-overlap 1 \
    || fail "rounds or rows are not as expected"
  [ -s "$T_OUT/all/heatmap-rail0.svg" ] && [ -s "$T_OUT/all/heatmap-rail1.svg" ] || fail "no heatmaps"
  # The fleet's OpenMetrics, in --out-dir and where --metrics said: a railbench_rail_ok sample
  # per pair and rail (the format itself: scripts/check-metrics).
  cmp -s "$T_OUT/all/fleet.prom" "$T_OUT/all.prom" || fail "--metrics FILE is not fleet.prom"
  [ "$(grep -c '^railbench_rail_ok{' "$T_OUT/all/fleet.prom")" -eq 12 ] || fail "not 12 railbench_rail_ok samples"
  tail -1 "$T_OUT/all/fleet.prom" | grep -qx '# EOF' || fail "fleet.prom does not end with # EOF"
  ! pgrep -x rdmabw >/dev/null || { pgrep -a rdmabw; fail "rdmabw processes left behind"; }
}

# Two faults planted in one fleet run under --test bw,lat, one pair at a time (so that no pair
# shares the guest's CPU and bandwidth noise names no clean pod): podB's rail 0 (net1) down, and
# podC's rail 1 slow to answer (netem delay on r1c). Each of their pairs on that rail is an
# outlier, measured again, and exactly two suspects are named: podB rail 0 (its three pairs
# failed) and podC rail 1 with its latency; no other pod, and neither of them on its other rail.
# Both faults are removed however the test ends.
test_fleet_rail_down_and_latency_delay_are_the_suspects() {
  local p99 delay margin
  tc qdisc del dev r1c root 2>/dev/null || true
  trap 'tc qdisc del dev r1c root 2>/dev/null || true; in_pod podB ip link set net1 up' EXIT TERM INT
  # The clean rail's p99 now, podA -> podD on rail 1, as the fleet measures it.
  in_pod podD timeout 60 "$RDMABW" server --daemon -p 18790 >/dev/null 2>"$T_OUT/baseline.srv" &
  local spid=$!
  wait_port podD 18790
  in_pod podA timeout 60 "$RDMABW" lat -n "$LAT_ITERS" --netdev net2 --server-netdev net2 -p 18790 --json "$(topo podD 1 ipv4)" \
    >"$T_OUT/baseline.json" 2>"$T_OUT/baseline.err" || { cat "$T_OUT/baseline.err"; fail "the clean rail's latency"; }
  kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null || true
  p99=$(json_get "$T_OUT/baseline.json" '.results[0].p99_us')
  delay=$(awk -v p="$p99" -v lo="$LAT_DELAY_US" -v hi="$LAT_DELAY_MAX_US" 'BEGIN { d = 6 * p; d = d < lo ? lo : d; d = d > hi ? hi : d; printf "%d", d }')
  # 10 s, and twice the delay's LAT_ITERS exchanges.
  margin=$(awk -v d="$delay" -v n="$LAT_ITERS" 'BEGIN { printf "%d", 10 + 2 * n * d / 1000000 }')
  echo "clean rail 1 p99 $p99 us: netem delay ${delay} us on r1c, --margin $margin"
  tc qdisc add dev r1c root netem delay "${delay}us" || fail "tc netem on r1c (is sch_netem loaded?)"
  in_pod podB ip link set net1 down
  # --outlier-pct 50: a clean pair's bandwidth, one pair at a time under emulation, still
  # varies by tens of percent on a loaded machine; a rail that is down fails whatever the rule.
  fleet faults --window 1 --max-pairs 1 --deadline-slack "$margin" --outlier-pct 50 --test bw,lat --lat-iters "$LAT_ITERS"
  in_pod podB ip link set net1 up
  tc qdisc del dev r1c root || fail "removing the netem qdisc from r1c"
  "$LABCHECK" rows "$T_OUT/faults/fleet.csv" --print client_pod,server_pod,rail,status,bw_avg_gbps,lat_p50_us,lat_p99_us || true
  [ "$rc" -eq 1 ] || { cat "$T_OUT/faults.err"; fail "expected exit 1, got $rc"; }
  grep -c '^suspect: ' "$T_OUT/faults.out" | grep -qx 2 || fail "not exactly two suspects"
  grep -q '^suspect: node podB rail 0: slow in all 3 of its pairs' "$T_OUT/faults.out" || fail "podB rail 0 (down) is not a suspect"
  grep -q '^suspect: node podC rail 1: slow in all 3 of its pairs.*; latency: p99 [0-9.]* us in [1-3] of its pairs' "$T_OUT/faults.out" \
    || fail "podC rail 1 is not the suspect for its latency"
  grep -q 'measuring them again' "$T_OUT/faults.err" || fail "the outliers were not measured again"
  # Each row's verdict (the latest row of each pair and rail): podC's pairs on rail 1 blame the
  # path to podC (the other end of each pair is fine), podB's on rail 0 are its rail down in the pod.
  "$LABCHECK" fleet-faults "$T_OUT/faults/fleet.csv" --slow podC:1 --down podB:0 || fail "the rows' verdicts do not name the faults"
}
