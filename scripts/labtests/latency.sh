# lab: --layout pods --rails 4
# rdmabw lat (issue 34), the drop-in for ib_write_lat, over real rxe between podA and podB:
# against itself (table, --json, a link named ib_write_lat), beside the reference perftest
# 25.x's ib_write_lat on the same rail with the reference against itself as the A/A control,
# and --max-p99-us flagging a rail with netem delay while the clean rail passes. rdmabw does not
# speak perftest's connection exchange, so each pair is one tool on both ends.
TEST_TIMEOUT=${TEST_TIMEOUT:-400}
# netem delay on one direction of rail 1 (towards podB): every round trip waits for it, so the
# one-way latency (half a round trip) is at least half of it. Both ends take -u 20 (an ACK
# timeout of 4 s): the default (67 ms) is shorter than such a round trip.
DELAY_US=${DELAY_US:-100000}
# --max-p99-us for the netem test: below half the delay, and well above a clean rail's p99
# under emulation, whose tail is the guest's scheduling (single round trips of 10 ms and more
# were seen, with a typical one of about 50 us).
MAX_P99_US=${MAX_P99_US:-40000}

# rail I: rail I's devices, GID indexes and podB's address, in DEV_A/B, GID_A/B, IP_B.
rail() {
  DEV_A=$(topo podA "$1" rdma_dev); DEV_B=$(topo podB "$1" rdma_dev); IP_B=$(topo podB "$1" ipv4)
  GID_A=$(gid_index "$DEV_A" "$(topo podA "$1" ipv4)"); GID_B=$(gid_index "$DEV_B" "$IP_B")
}

# lat_pair TOOL PORT NAME SERVER_FLAGS CLIENT_FLAGS...: TOOL's server in podB and client in podA
# on the rail `rail` chose, each tool's flags first (`lat` for rdmabw); the client's stdout in
# NAME.out, stderr in NAME.err, exit in $rc; the server's output in NAME.srv and its exit in $src.
lat_pair() {
  local tool=$1 port=$2 name=$3 sflags=$4 spid; shift 4; rc=0 src=0
  # shellcheck disable=SC2086
  in_pod podB timeout 120 "$tool" $sflags -d "$DEV_B" -x "$GID_B" -p "$port" >"$T_OUT/$name.srv" 2>&1 &
  spid=$!
  wait_port podB "$port"
  in_pod podA timeout 120 "$tool" "$@" -d "$DEV_A" -x "$GID_A" -p "$port" "$IP_B" \
    >"$T_OUT/$name.out" 2>"$T_OUT/$name.err" || rc=$?
  wait "$spid" || src=$?
}

# typical FILE: t_typical of the 2-byte row of an ib_write_lat style table (9 columns).
typical() { awk '$1 == 2 && NF == 9 && $2 ~ /^[0-9]+$/ { v = $5 } END { if (v == "") exit 1; print v }' "$1"; }

# rdmabw lat against itself: ib_write_lat's table on both ends (1000 exchanges of 2 bytes by
# default, 9 columns, min <= typical <= max), and --json's typed report with the histogram's
# percentiles and what the server measured.
test_lat_rdmabw_against_itself() {
  rail 0
  lat_pair "$RDMABW" 18700 table lat lat
  if [ "$rc" -ne 0 ] || [ "$src" -ne 0 ]; then cat "$T_OUT/table.err" "$T_OUT/table.srv"; fail "rdmabw lat: client $rc, server $src"; fi
  cat "$T_OUT/table.out"
  grep -q '#bytes #iterations    t_min\[usec\]    t_max\[usec\]  t_typical\[usec\]' "$T_OUT/table.out" || fail "no ib_write_lat header"
  awk '$1 == 2 && NF == 9 && $2 == 1000 && $3 > 0 && $3 <= $5 && $5 <= $4 && $8 <= $4 { ok = 1 } END { exit !ok }' "$T_OUT/table.out" \
    || fail "no sane 2-byte row of 1000 iterations"
  awk '$1 == 2 && NF == 9 && $2 == 1000 { ok = 1 } END { exit !ok }' "$T_OUT/table.srv" || { cat "$T_OUT/table.srv"; fail "the server printed no table"; }
  lat_pair "$RDMABW" 18701 json lat lat --json -s 64 -n 300 --report-both
  [ "$rc" -eq 0 ] || { cat "$T_OUT/json.err"; fail "rdmabw lat --json: exit $rc"; }
  "$LABCHECK" lat "$T_OUT/json.out" --size 64 --iters 300 --samples 299 || fail "the --json report is not what it should be"
}

# Called through a link named ib_write_lat, rdmabw runs `rdmabw lat`: a script written for
# ib_write_lat runs unchanged, and its awk reads the same columns.
test_lat_link_named_ib_write_lat() {
  rail 0
  ln -sf "$RDMABW" "$T_OUT/ib_write_lat"
  lat_pair "$T_OUT/ib_write_lat" 18710 link "-n 200" -n 200
  if [ "$rc" -ne 0 ] || [ "$src" -ne 0 ]; then cat "$T_OUT/link.err" "$T_OUT/link.srv"; fail "ib_write_lat -> rdmabw: client $rc, server $src"; fi
  cat "$T_OUT/link.out"
  awk '$1 == 2 && NF == 9 && $2 == 200 { ok = 1 } END { exit !ok }' "$T_OUT/link.out" || fail "no 2-byte row of 200 iterations"
}

# Side by side on rail 0, alternately, ROUNDS rounds of three pairs each: perftest's
# ib_write_lat, rdmabw lat, and ib_write_lat again (the A/A control). Prints each round's
# typical latencies at 2 bytes, the ratio rdmabw/perftest and perftest's A/A ratio; both tools
# must measure every round.
test_lat_beside_ib_write_lat() {
  local i p1 r p2 rounds=${ROUNDS:-3}
  rail 0
  "$IB_WRITE_LAT" --version | head -1
  for ((i = 0; i < rounds; i++)); do
    lat_pair "$IB_WRITE_LAT" $((18720 + 3 * i)) p1_$i "-F" -F
    [ "$rc" -eq 0 ] || { cat "$T_OUT/p1_$i.out" "$T_OUT/p1_$i.err"; fail "ib_write_lat round $i: exit $rc"; }
    lat_pair "$RDMABW" $((18721 + 3 * i)) r_$i lat lat
    [ "$rc" -eq 0 ] || { cat "$T_OUT/r_$i.err"; fail "rdmabw lat round $i: exit $rc"; }
    lat_pair "$IB_WRITE_LAT" $((18722 + 3 * i)) p2_$i "-F" -F
    [ "$rc" -eq 0 ] || { cat "$T_OUT/p2_$i.out" "$T_OUT/p2_$i.err"; fail "ib_write_lat (A/A) round $i: exit $rc"; }
    p1=$(typical "$T_OUT/p1_$i.out") || { cat "$T_OUT/p1_$i.out"; fail "no row in ib_write_lat's table"; }
    r=$(typical "$T_OUT/r_$i.out") || { cat "$T_OUT/r_$i.out"; fail "no row in rdmabw lat's table"; }
    p2=$(typical "$T_OUT/p2_$i.out") || fail "no row in ib_write_lat's (A/A) table"
    awk -v i="$i" -v p1="$p1" -v r="$r" -v p2="$p2" 'BEGIN {
      printf "round %d: t_typical 2 B: ib_write_lat %s us, rdmabw lat %s us, ib_write_lat %s us; rdmabw/perftest %.2f, A/A %.2f\n",
        i, p1, r, p2, r / ((p1 + p2) / 2), p2 / p1; exit !(p1 > 0 && r > 0 && p2 > 0) }' \
      || fail "a typical latency is not above zero"
  done | tee "$T_OUT/rounds.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "a round failed"
}

# netem delay of DELAY_US on rail 1 towards podB: rdmabw lat --max-p99-us MAX_P99_US exits 1 on
# it and names the threshold; on clean rail 0 the same threshold passes (exit 0).
test_lat_netem_delay_is_flagged_by_max_p99_us() {
  rail 0
  lat_pair "$RDMABW" 18740 clean "lat -u 20" lat -u 20 -n 100 --json --max-p99-us "$MAX_P99_US"
  echo "clean rail 0: exit $rc, p99 $(json_get "$T_OUT/clean.out" '.results[0].p99_us') us"
  [ "$rc" -eq 0 ] || { cat "$T_OUT/clean.err"; fail "the clean rail exceeded --max-p99-us $MAX_P99_US (exit $rc)"; }
  tc qdisc add dev r1b root netem delay "${DELAY_US}us" || fail "tc netem on r1b (is sch_netem loaded?)"
  rail 1
  lat_pair "$RDMABW" 18741 delayed "lat -u 20" lat -u 20 -n 100 --json --max-p99-us "$MAX_P99_US"
  tc qdisc del dev r1b root || true
  echo "rail 1 with ${DELAY_US} us netem delay: exit $rc, typical $(json_get "$T_OUT/delayed.out" '.results[0].t_typical_us') us, p99 $(json_get "$T_OUT/delayed.out" '.results[0].p99_us') us"
  tail -2 "$T_OUT/delayed.err"
  [ "$rc" -eq 1 ] || fail "the delayed rail exited $rc, expected 1"
  [ "$(json_get "$T_OUT/delayed.out" '.status')" = below_threshold ] || fail "the report's status is not below_threshold"
  grep -q "above --max-p99-us $MAX_P99_US" "$T_OUT/delayed.err" || fail "the client does not name the threshold"
}

# A daemon (`rdmabw server --daemon`) serves a latency test as it serves bandwidth, the rails
# named by interface on both ends (--netdev, --server-netdev), the GIDs found; the daemon logs
# the typical and p99 latency.
test_lat_daemon_serves_latency_by_netdev() {
  local nd_a nd_b
  nd_a=$(topo podA 1 iface); nd_b=$(topo podB 1 iface)
  in_pod podB timeout 100 "$RDMABW" server --daemon -p 18750 >"$T_OUT/daemon.out" 2>"$T_OUT/daemon.err" &
  wait_port podB 18750
  rc=0
  in_pod podA timeout 60 "$RDMABW" lat --netdev "$nd_a" --server-netdev "$nd_b" -p 18750 -n 200 --json \
    "$(topo podB 1 ipv4)" >"$T_OUT/client.json" 2>"$T_OUT/client.err" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$T_OUT/client.err" "$T_OUT/daemon.err"; fail "rdmabw lat against the daemon: exit $rc"; }
  "$LABCHECK" lat "$T_OUT/client.json" --iters 200 --samples 199 --netdev "$nd_a" || fail "the report does not name the rails"
  sleep 0.5
  grep 'done: latency' "$T_OUT/daemon.err" || { cat "$T_OUT/daemon.err"; fail "the daemon did not log the latency test"; }
}

# -D: exchanges for that long, ib_write_lat's duration columns (#iterations, t_avg, tps), the
# server answering until the client's end; -a: every size from 2 B to 8 MiB in turn; -U: each
# sample before the table.
test_lat_duration_sweep_and_samples() {
  rail 0
  lat_pair "$RDMABW" 18760 timed lat lat -D 2
  if [ "$rc" -ne 0 ] || [ "$src" -ne 0 ]; then cat "$T_OUT/timed.err" "$T_OUT/timed.srv"; fail "rdmabw lat -D 2: client $rc, server $src"; fi
  cat "$T_OUT/timed.out"
  grep -q '#bytes        #iterations       t_avg\[usec\]    tps average' "$T_OUT/timed.out" || fail "no duration header"
  awk '$1 == 2 && NF == 4 && $2 > 0 && $3 > 0 && $4 > 0 { ok = 1 } END { exit !ok }' "$T_OUT/timed.out" || fail "no duration row"
  lat_pair "$RDMABW" 18761 sweep lat lat -a -n 5
  if [ "$rc" -ne 0 ] || [ "$src" -ne 0 ]; then cat "$T_OUT/sweep.err" "$T_OUT/sweep.srv"; fail "rdmabw lat -a -n 5: client $rc, server $src"; fi
  awk 'NF == 9 && $2 == 5 { n++; last = $1 } END { print n " sizes, the last " last " B"; exit !(n == 23 && last == 8388608) }' "$T_OUT/sweep.out" \
    || { cat "$T_OUT/sweep.out"; fail "-a did not measure the 23 sizes from 2 B to 8 MiB"; }
  lat_pair "$RDMABW" 18762 unsorted lat lat -n 50 -U
  [ "$rc" -eq 0 ] || { cat "$T_OUT/unsorted.err"; fail "rdmabw lat -U: exit $rc"; }
  awk '/^#, usec$/ { h = 1 } /^[0-9]+, [0-9.e+-]+$/ { n++ } END { print n " samples"; exit !(h && n == 49) }' "$T_OUT/unsorted.out" \
    || { cat "$T_OUT/unsorted.out"; fail "-U did not print the 49 samples"; }
}
