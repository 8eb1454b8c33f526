# lab: --layout pods --rails 4
# rdmabw client and server (issue 3) between podA and podB over real rxe and libibverbs:
# every rail, the daemon, the traffic class on the wire, peers and rails that die mid-run,
# perftest on the other end, and every bad input the issue lists.

SRV=$(ctl_ip podB)   # the server pod's control address (eth0)
# Under emulation every rdmabw start (sysfs discovery, device open, QP creation) takes seconds.
TEST_TIMEOUT=${TEST_TIMEOUT:-300}

# expect_rc WANT NAME CMD...: run CMD, capture stdout+stderr in $T_OUT/NAME.out, check the exit.
expect_rc() {
  local want=$1 name=$2 rc=0; shift 2
  "$@" >"$T_OUT/$name.out" 2>&1 || rc=$?
  echo "$name: exit $rc: $(grep -m1 'error' "$T_OUT/$name.out" || head -c 300 "$T_OUT/$name.out")"
  [ "$rc" -eq "$want" ] || { cat "$T_OUT/$name.out"; fail "$name: expected exit $want, got $rc"; }
}

# must_say NAME REGEX: the output of an expect_rc run matches REGEX.
must_say() { grep -Eq -- "$2" "$T_OUT/$1.out" || { cat "$T_OUT/$1.out"; fail "$1: output does not match /$2/"; }; }

# rdmabw client to rdmabw server (the bare ib_write_bw form on the server) on every rail: the
# bandwidth is above zero, the JSON parses, and the GID chosen without -x is the pod's own.
test_every_rail_client_server() {
  local i port nd ip_a ip_b bw gi p99 peak
  for ((i = 0; i < LAB_RAILS; i++)); do
    port=$((18515 + i)); nd=$(topo podA "$i" iface)
    ip_a=$(topo podA "$i" ipv4); ip_b=$(topo podB "$i" ipv4)
    in_pod podB timeout 240 "$RDMABW" --netdev "$nd" -F --report_gbits -D 2 -p "$port" \
      >"$T_OUT/server$i.txt" 2>"$T_OUT/server$i.err" &
    wait_port podB "$port"
    in_pod podA timeout 150 "$RDMABW" client --json --netdev "$nd" -D 2 -p "$port" "$SRV" \
      >"$T_OUT/client$i.json" 2>"$T_OUT/client$i.err" || { cat "$T_OUT/client$i.err"; fail "rail $i: client failed"; }
    wait $! || { cat "$T_OUT/server$i.err"; fail "rail $i: server failed"; }
    bw=$(json_get "$T_OUT/client$i.json" '.results[-1].bw_avg_gbps') || fail "rail $i: JSON does not parse"
    gi=$(json_get "$T_OUT/client$i.json" '.local.gid_index')
    echo "rail $i $nd: $bw Gb/s, client GID index $gi, status $(json_get "$T_OUT/client$i.json" '.status')"
    gt "$bw" 0 || fail "rail $i: bandwidth $bw is not above zero"
    # The 10 ms interval figures follow the average: rxe keeps at most 128 packets unacknowledged,
    # so no interval can run far above it. A poll that meets a backlog once fed the sampler one
    # completion at a time and showed p99 at 7 times the average and peaks at 15 times. The
    # bounds sit between that and the lab's own spread: under software emulation a correct
    # sampler (the engine before and after its split alike) measured p99 at 1.6-2.1 times the
    # average and peaks at 1.9-2.6 times, so 2x and 3x failed runs with no defect.
    read -r p99 peak < <(json_get "$T_OUT/client$i.json" '"\(.results[-1].bw_p99_gbps) \(.results[-1].bw_peak_gbps)"')
    echo "rail $i: p99 $p99, peak $peak Gb/s (average $bw)"
    gt "$(awk -v a="$bw" 'BEGIN { print 3.5 * a }')" "$p99" || fail "rail $i: p99 $p99 Gb/s is above 3.5 times the average $bw"
    gt "$(awk -v a="$bw" 'BEGIN { print 6 * a }')" "$peak" || fail "rail $i: peak $peak Gb/s is above 6 times the average $bw"
    [ "$gi" = "$(gid_index "$(topo podA "$i" rdma_dev)" "$ip_a")" ] || fail "rail $i: GID index $gi is not podA's own"
    [ "$(json_get "$T_OUT/client$i.json" '.remote.ipv4')" = "$ip_b" ] || fail "rail $i: remote GID is not podB's $ip_b"
    # The server printed ib_write_bw's table.
    bw_of "$T_OUT/server$i.txt" >/dev/null || { cat "$T_OUT/server$i.txt"; fail "rail $i: no table on the server"; }
  done
}

# The server's JSON names the client's side as the client's names the server's: device, GID
# index (told in the endpoints exchange) and interface.
test_server_report_names_the_clients_gid() {
  local ip_a gi
  ip_a=$(topo podA 0 ipv4)
  in_pod podB timeout 120 "$RDMABW" --netdev "$(topo podB 0 iface)" -D 1 -s 4096 -p 18530 --json \
    >"$T_OUT/server.json" 2>"$T_OUT/server.err" &
  wait_port podB 18530
  in_pod podA timeout 60 "$RDMABW" client --netdev "$(topo podA 0 iface)" -D 1 -s 4096 -p 18530 "$SRV" \
    >/dev/null 2>"$T_OUT/client.err" || { cat "$T_OUT/client.err"; fail "client failed"; }
  wait $! || { cat "$T_OUT/server.err"; fail "server failed"; }
  cat "$T_OUT/server.json"
  gi=$(json_get "$T_OUT/server.json" '.remote.gid_index') || fail "server JSON does not parse"
  [ "$gi" = "$(gid_index "$(topo podA 0 rdma_dev)" "$ip_a")" ] || fail "the server reports the client's GID index as $gi"
  [ "$(json_get "$T_OUT/server.json" '.remote.netdev')" = "$(topo podA 0 iface)" ] \
    || fail "the server does not name the client's interface"
}

# The table keeps ib_write_bw's layout: awk '/^ 65536/ {print $4}' reads the average; MB/sec
# without --report_gbits; CSV and -b and -a work.
test_table_csv_bidir_sweep() {
  local v
  in_pod podB timeout 240 "$RDMABW" server --daemon -p 18610 2>"$T_OUT/daemon.err" &
  wait_port podB 18610
  in_pod podA timeout 150 "$RDMABW" -d rxe_a1 --server-dev rxe_b1 -F --report_gbits -n 300 -p 18610 "$SRV" >"$T_OUT/gbits.txt" \
    || fail "table run failed"
  cat "$T_OUT/gbits.txt"
  v=$(awk '/^ 65536/ {print $4}' "$T_OUT/gbits.txt"); gt "$v" 0 || fail "awk read '$v' as the average"
  grep -q '^ #bytes     #iterations    BW peak\[Gb/sec\]    BW average\[Gb/sec\]   MsgRate\[Mpps\]$' "$T_OUT/gbits.txt" || fail "header differs"
  [ "$(grep -c '^-\{87\}$' "$T_OUT/gbits.txt")" -eq 2 ] || fail "no 87-dash lines"
  in_pod podA timeout 150 "$RDMABW" -d rxe_a1 --server-dev rxe_b1 -n 300 -p 18610 "$SRV" >"$T_OUT/mb.txt" || fail "MB run failed"
  grep -q 'BW average\[MB/sec\]' "$T_OUT/mb.txt" || fail "no MB/sec header without --report_gbits"
  v=$(awk '/^ 65536/ {print $4}' "$T_OUT/mb.txt"); gt "$v" 0 || fail "MB/sec average '$v'"
  in_pod podA timeout 150 "$RDMABW" client --csv --netdev net2 --server-netdev net2 -n 200 -s 4096 -p 18610 "$SRV" >"$T_OUT/run.csv" || fail "CSV run failed"
  head -1 "$T_OUT/run.csv" | grep -q '^schema_version,run_id,' || fail "CSV header: not railsweep's results columns"
  [ "$(wc -l <"$T_OUT/run.csv")" -eq 2 ] || fail "CSV rows"
  in_pod podA timeout 150 "$RDMABW" client --json -b --netdev net2 --server-netdev net2 -D 3 -Q 10 -p 18610 "$SRV" >"$T_OUT/bidir.json" || fail "-b failed"
  json_get "$T_OUT/bidir.json" '"-b: \(.directions.client_to_server[0].bw_avg_gbps) and \(.directions.server_to_client[0].bw_avg_gbps) Gb/s, \(.results[0].bw_avg_gbps) in all"'
  v=$(json_get "$T_OUT/bidir.json" '[.directions.client_to_server[0].bw_avg_gbps, .directions.server_to_client[0].bw_avg_gbps] | min')
  gt "$v" 0 || fail "a direction of -b moved nothing"
  in_pod podA timeout 150 "$RDMABW" client --json -a -n 4 --netdev net2 --server-netdev net2 -p 18610 "$SRV" >"$T_OUT/sweep.json" || fail "-a failed"
  [ "$(json_get "$T_OUT/sweep.json" '.results | length')" -eq 23 ] || fail "-a did not sweep 23 sizes"
  [ "$(json_get "$T_OUT/sweep.json" '.results[-1].msg_size_bytes')" -eq 8388608 ] || fail "-a does not end at 8 MiB"
}

# -e/--use_event (ib_write_bw refuses it for RDMA WRITE): the client sleeps on completion events
# against a plain rdmabw server on one rail, moves data, ends on time, and its report says which
# mode ran, with the CPU per GB beside the bandwidth (the table with --cpu_util too); then -b with
# -e on both sides, so the server's writer waits on events as well.
test_use_event() {
  local nd bw poll cpg q t0 secs
  nd=$(topo podA 0 iface)
  # The server follows the client's length: a 4 s window (-D 4 would measure 2 s of it), long
  # enough for a few batches of the default half queue (64 x 64 KiB) in a slow lab.
  in_pod podB timeout 120 "$RDMABW" --netdev "$(topo podB 0 iface)" -p 18725 \
    >"$T_OUT/server.txt" 2>"$T_OUT/server.err" &
  wait_port podB 18725
  t0=$(now)
  in_pod podA timeout 90 "$RDMABW" client -e --json --netdev "$nd" --window 4 -p 18725 "$SRV" \
    >"$T_OUT/client.json" 2>"$T_OUT/client.err" || { cat "$T_OUT/client.err"; fail "the -e client failed"; }
  secs=$(elapsed "$t0")
  wait $! || { cat "$T_OUT/server.err"; fail "the server failed"; }
  cat "$T_OUT/client.err"
  bw=$(json_get "$T_OUT/client.json" '.results[-1].bw_avg_gbps') || fail "JSON does not parse"
  poll=$(json_get "$T_OUT/client.json" '.tuning.poll')
  q=$(json_get "$T_OUT/client.json" '.tuning.cq_mod')
  cpg=$(json_get "$T_OUT/client.json" '.results[-1].cpu_s_per_gb')
  echo "-e: $bw Gb/s, poll $poll, cq_mod $q, $cpg CPU s per GB, client done in $secs s"
  gt "$bw" 0 || fail "-e: bandwidth $bw is not above zero"
  [ "$poll" = event ] || fail "-e: the report says poll $poll"
  [ "$q" -ge 64 ] || fail "-e without -Q: cq_mod $q, expected at least half the send queue (64)"
  gt "$cpg" 0 || fail "-e: cpu_s_per_gb is $cpg"
  grep -q 'waiting on completion events' "$T_OUT/client.err" || fail "-e: the log does not say it waits on events"
  # A 4 s window with start-up under emulation: well under the 90 s limit, or a wait blocked.
  gt 60 "$secs" || fail "-e: the client took $secs s for a 4 s window"
  # Both ways, each writer on events; the table with --cpu_util has the CPU per GB column. -Q 16:
  # with the default half queue (64 x 64 KiB, 4 MiB) a loaded lab at 0.02 Gb/s completes one
  # batch in 2 s, and -b's window could close before the first.
  in_pod podB timeout 120 "$RDMABW" -e -b -Q 16 --netdev "$(topo podB 0 iface)" -D 3 -p 18726 --json \
    >"$T_OUT/bserver.json" 2>"$T_OUT/bserver.err" &
  wait_port podB 18726
  in_pod podA timeout 90 "$RDMABW" client -e -b -Q 16 --cpu_util --report_gbits --netdev "$nd" -D 3 -p 18726 "$SRV" \
    >"$T_OUT/bclient.txt" 2>"$T_OUT/bclient.err" || { cat "$T_OUT/bclient.err"; fail "-e -b client failed"; }
  wait $! || { cat "$T_OUT/bserver.err"; fail "-e -b server failed"; }
  cat "$T_OUT/bclient.txt"
  grep -q 'CPU_Util\[%\]	CPU\[s/GB\]$' "$T_OUT/bclient.txt" || fail "--cpu_util: no CPU[s/GB] column"
  bw=$(bw_of "$T_OUT/bclient.txt") || fail "-e -b: no result row"
  gt "$bw" 0 || fail "-e -b: bandwidth $bw"
  [ "$(json_get "$T_OUT/bserver.json" '.tuning.poll')" = event ] || fail "-e -b: the server did not wait on events"
  bw=$(json_get "$T_OUT/bserver.json" '.directions.server_to_client[0].bw_avg_gbps')
  gt "$bw" 0 || fail "-e -b: the server's direction moved $bw Gb/s"
}

# One daemon per pod serves all four rails at once (railsweep's path), then the next test. Each
# rail moves a fixed count of messages (-n 300 of 64 KiB) rather than for a duration: four
# rails share the guest's one emulated CPU, and on a loaded machine one rail once completed no
# write at all in a 4 s window. The four runs must overlap in time (each shell records its
# client's start and end).
test_daemon_all_rails_at_once() {
  local i pids=() bw
  in_pod podB timeout 240 "$RDMABW" server --daemon --json -p 18620 >"$T_OUT/daemon.jsonl" 2>"$T_OUT/daemon.err" &
  wait_port podB 18620
  for ((i = 0; i < LAB_RAILS; i++)); do
    (
      echo "start $(now)" >"$T_OUT/rail$i.times"
      in_pod podA timeout 150 "$RDMABW" client --json --netdev "net$((i + 1))" --server-netdev "net$((i + 1))" -n 300 -Q 10 -p 18620 "$SRV" \
        >"$T_OUT/rail$i.json" 2>"$T_OUT/rail$i.err"
      rc=$?
      echo "end $(now)" >>"$T_OUT/rail$i.times"
      exit "$rc"
    ) &
    pids+=($!)
  done
  for ((i = 0; i < LAB_RAILS; i++)); do
    wait "${pids[$i]}" || { cat "$T_OUT/rail$i.err"; fail "rail $i failed under the daemon"; }
    bw=$(json_get "$T_OUT/rail$i.json" '.results[0].bw_avg_gbps')
    echo "rail $i concurrently: $bw Gb/s on $(json_get "$T_OUT/rail$i.json" '.remote.device'), $(json_get "$T_OUT/rail$i.json" '.results[0].iterations') iterations"
    gt "$bw" 0 || fail "rail $i: $bw"
    [ "$(json_get "$T_OUT/rail$i.json" '.results[0].iterations')" = 300 ] || fail "rail $i: not 300 iterations"
    [ "$(json_get "$T_OUT/rail$i.json" '.remote.device')" = "$(topo podB "$i" rdma_dev)" ] || fail "rail $i: wrong server device"
  done
  # Every client started before any ended: the daemon served them at once.
  cat "$T_OUT"/rail*.times | awk '$1 == "start" && $2 > s { s = $2 } $1 == "end" && (e == "" || $2 < e) { e = $2 }
    END { printf "last start %.2f s before the first end\n", e - s; exit !(s < e) }' || fail "the rails' runs did not overlap"
  in_pod podA timeout 150 "$RDMABW" client --json --netdev net1 --server-netdev net1 -n 200 -p 18620 "$SRV" >"$T_OUT/next.json" \
    || fail "the daemon did not serve the next test"
  [ "$(wc -l <"$T_OUT/daemon.jsonl")" -ge 5 ] || fail "the daemon printed $(wc -l <"$T_OUT/daemon.jsonl") reports, expected 5"
}

# A second client for a device in use is told the device is busy; the first is unharmed.
# The first runs -D 12: the second, started once the first is measuring, reaches the daemon
# within a few seconds even under emulation.
test_daemon_busy_device() {
  local rc=0
  in_pod podB timeout 240 "$RDMABW" server --daemon -p 18630 2>"$T_OUT/daemon.err" &
  wait_port podB 18630
  in_pod podA timeout 150 "$RDMABW" client --json --netdev net3 --server-netdev net3 -D 12 -p 18630 "$SRV" >"$T_OUT/first.json" 2>"$T_OUT/first.err" &
  local first=$!
  wait_measuring "$T_OUT/first.err"
  expect_rc 1 second in_pod podA timeout 150 "$RDMABW" client -d rxe_a3 --server-netdev net3 -D 1 -p 18630 "$SRV"
  must_say second 'busy: device rxe_b2 is running a test for'
  wait "$first" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$T_OUT/first.err"; fail "the first client failed ($rc)"; }
}

# --tclass 41 shows as TOS 0x29 in the IPv4 header of rdmabw's RoCE v2 packets, both ways
# (the server takes the client's traffic class for its ACKs when not given its own).
test_tclass_in_tos() {
  local nd; nd=$(topo podB 1 iface)
  in_pod podB timeout 20 tcpdump -l -n -v -c 30 -i "$nd" udp port 4791 >"$T_OUT/tcpdump.txt" 2>"$T_OUT/tcpdump.err" &
  local tpid=$!
  sleep 1
  in_pod podB timeout 240 "$RDMABW" --netdev "$nd" -p 18640 >/dev/null 2>"$T_OUT/server.err" &
  wait_port podB 18640
  in_pod podA timeout 240 "$RDMABW" --netdev net2 --tclass 41 -n 300 -p 18640 "$SRV" >"$T_OUT/client.txt" 2>&1 \
    || { cat "$T_OUT/client.txt"; fail "rdmabw --tclass 41 failed"; }
  wait "$tpid" || true
  grep -m3 'tos 0x' "$T_OUT/tcpdump.txt" || true
  grep -q 'tos 0x29' "$T_OUT/tcpdump.txt" || fail "no packet with tos 0x29 ($(grep -c . "$T_OUT/tcpdump.txt") lines)"
  ! grep -q 'tos 0x0, .*proto UDP' "$T_OUT/tcpdump.txt" || fail "a RoCE packet with tos 0x0 during the --tclass 41 run"
}

# three_s_into_a_window SERVER_IFACE CLIENT_IFACE PORT: a server in podB and a -D 30 client in
# podA on that rail; returns 3 s into the measured window with $spid, $cpid and $tm (when the
# window began) set in the caller's locals (server.err, client.out in $T_OUT). The window is long
# so that what the test does to the run, not the window's end, ends it (with -D 8 a client once
# exited 0 after the link went down, its writes seen to stop 4 s into the window; not seen again).
three_s_into_a_window() {
  ip netns exec podB "$RDMABW" server --netdev "$1" -p "$3" >/dev/null 2>"$T_OUT/server.err" &
  spid=$!
  wait_port podB "$3"
  ip netns exec podA "$RDMABW" client --netdev "$2" -D 30 -p "$3" "$SRV" >"$T_OUT/client.out" 2>&1 &
  cpid=$!
  wait_measuring "$T_OUT/client.out"; tm=$(now)
  sleep 3
}

# kill -9 of the server in the middle of the measured window: the client exits non-zero and says
# the server is gone, within 15 s (long before the window's end); the time is reported.
test_server_sigkill_mid_run() {
  local rc=0 tm tk t1 spid cpid
  three_s_into_a_window net1 net1 18650
  tk=$(now); kill -9 "$spid"
  wait "$cpid" || rc=$?
  t1=$(now)
  echo "client exit $rc, $(elapsed "$tk" "$t1") s after the kill, $(elapsed "$tm" "$t1") s after the window began (-D 30)"
  grep 'error' "$T_OUT/client.out" || true
  [ "$rc" -eq 1 ] || { cat "$T_OUT/client.out"; fail "the client exited $rc, expected 1"; }
  grep -Eq 'closed the control connection.*(died|killed)' "$T_OUT/client.out" || { cat "$T_OUT/client.out"; fail "no message about the dead server"; }
  gt 15 "$(elapsed "$tk" "$t1")" || fail "took $(elapsed "$tk" "$t1") s: more than 15 s (the window had 27 s to go)"
  elapsed "$tk" "$t1" >"$T_OUT/time_to_error_s"
}

# The rail goes down (ip link set ... down) mid-window: the client exits non-zero with a message
# that says so, within 15 s (long before the window's end); the server also ends, with the reason.
test_link_down_mid_run() {
  local rc=0 src=0 tm tk t1 spid cpid nd; nd=$(topo podB 2 iface)
  three_s_into_a_window "$nd" net3 18660
  tk=$(now); in_pod podB ip link set "$nd" down
  wait "$cpid" || rc=$?
  t1=$(now)
  wait "$spid" || src=$?
  in_pod podB ip link set "$nd" up
  echo "client exit $rc, $(elapsed "$tk" "$t1") s after the link went down, $(elapsed "$tm" "$t1") s after the window began (-D 30); server exit $src"
  grep 'error' "$T_OUT/client.out" "$T_OUT/server.err" || true
  [ "$rc" -eq 1 ] || { cat "$T_OUT/client.out" "$T_OUT/server.err"; fail "the client exited $rc, expected 1"; }
  [ "$src" -eq 1 ] || { cat "$T_OUT/server.err"; fail "the server exited $src, expected 1"; }
  grep -Eqi 'retry|stopped responding|down' "$T_OUT/client.out" || { cat "$T_OUT/client.out"; fail "no message about the rail"; }
  gt 15 "$(elapsed "$tk" "$t1")" || fail "took $(elapsed "$tk" "$t1") s: more than 15 s (the window had 27 s to go)"
  elapsed "$tk" "$t1" >"$T_OUT/time_to_error_s"
  sleep 1   # let rxe's port come back before later tests use this rail
}

# A client killed (-9) under a daemon: the daemon logs the failure, frees the device, and
# serves the next test on it.
test_client_killed_under_daemon() {
  local tk i
  in_pod podB timeout 240 "$RDMABW" server --daemon -p 18670 2>"$T_OUT/daemon.err" &
  wait_port podB 18670
  ip netns exec podA "$RDMABW" client --netdev net4 --server-netdev net4 -D 8 -p 18670 "$SRV" >/dev/null 2>"$T_OUT/victim.err" &
  local vpid=$!
  wait_measuring "$T_OUT/victim.err"
  sleep 2
  tk=$(now); kill -9 "$vpid"; wait "$vpid" 2>/dev/null || true
  for i in $(seq 1 150); do grep -q 'test failed' "$T_OUT/daemon.err" && break; sleep 0.1; done
  echo "daemon noticed after $(elapsed "$tk") s: $(grep 'test failed' "$T_OUT/daemon.err")"
  grep -q 'test failed: .*closed the control connection during the measurement' "$T_OUT/daemon.err" \
    || { cat "$T_OUT/daemon.err"; fail "the daemon did not notice the dead client"; }
  in_pod podA timeout 150 "$RDMABW" client --json --netdev net4 --server-netdev net4 -n 200 -p 18670 "$SRV" >"$T_OUT/next.json" 2>"$T_OUT/next.err" \
    || { cat "$T_OUT/next.err" "$T_OUT/daemon.err"; fail "the daemon did not serve the next test"; }
  gt "$(json_get "$T_OUT/next.json" '.results[0].bw_avg_gbps')" 0 || fail "next test moved nothing"
}

# SIGINT on the client mid-run: it stops within seconds and the server is told why.
test_sigint_stops_both_sides() {
  local rc=0 src=0 tk t1
  in_pod podB timeout 240 "$RDMABW" server --netdev net1 -p 18680 >/dev/null 2>"$T_OUT/server.err" &
  local spid=$!
  wait_port podB 18680
  ip netns exec podA "$RDMABW" client --netdev net1 -D 10 -p 18680 "$SRV" >"$T_OUT/client.out" 2>&1 &
  local cpid=$!
  wait_measuring "$T_OUT/client.out"
  sleep 2
  tk=$(now); kill -INT "$cpid"
  wait "$cpid" || rc=$?
  t1=$(now)
  wait "$spid" || src=$?
  echo "client exit $rc after $(elapsed "$tk" "$t1") s; server exit $src: $(grep error "$T_OUT/server.err")"
  [ "$rc" -eq 130 ] || { cat "$T_OUT/client.out"; fail "client exit $rc, expected 130"; }
  [ "$src" -eq 1 ] || { cat "$T_OUT/server.err"; fail "server exit $src, expected 1"; }
  grep -q 'interrupted' "$T_OUT/server.err" || { cat "$T_OUT/server.err"; fail "the server was not told"; }
  gt 5 "$(elapsed "$tk" "$t1")" || fail "took $(elapsed "$tk" "$t1") s"
}

# Parameters given on both ends must match: the mismatch names the flag and both values.
test_param_mismatch_named() {
  in_pod podB timeout 240 "$RDMABW" server --netdev net1 -q 2 -p 18690 >/dev/null 2>"$T_OUT/server.err" &
  wait_port podB 18690
  expect_rc 2 mismatch in_pod podA timeout 150 "$RDMABW" client --netdev net1 -q 1 -n 10 -p 18690 "$SRV"
  must_say mismatch 'parameter --qp/-q differs: the server has 2, the client has 1'
}

# A server given --peer rdmabw names a perftest client in its log, refuses it and goes on
# waiting for an rdmabw client (one connection that is not a test must not end a one-test
# server); Ctrl-C ends it as usual. (Without --peer, rdmabw serves perftest: interop.sh.)
test_peer_rdmabw_server_refuses_perftest() {
  local dev_b ip_b
  dev_b=$(topo podB 0 rdma_dev); ip_b=$(topo podB 0 ipv4)
  in_pod podB timeout 240 "$RDMABW" server --peer rdmabw --netdev net1 -p 18701 >/dev/null 2>"$T_OUT/rdmabw_server.err" &
  local spid=$!
  wait_port podB 18701
  in_pod podA timeout 20 "$IB_WRITE_BW" -d "$(topo podA 0 rdma_dev)" -x "$(gid_index "$(topo podA 0 rdma_dev)" "$(topo podA 0 ipv4)")" -F -p 18701 "$SRV" >"$T_OUT/ib_client.txt" 2>&1 || true
  local i rc=0
  for i in $(seq 1 50); do grep -q perftest "$T_OUT/rdmabw_server.err" && break; sleep 0.1; done
  echo "rdmabw server --peer rdmabw with an ib_write_bw client: $(grep -m1 perftest "$T_OUT/rdmabw_server.err")"
  grep -q 'a perftest 6.24 client is refused: this server was started with --peer rdmabw' "$T_OUT/rdmabw_server.err" \
    || { cat "$T_OUT/rdmabw_server.err"; fail "the server does not name the refused perftest client"; }
  kill -0 "$spid" 2>/dev/null || { cat "$T_OUT/rdmabw_server.err"; fail "the server ended on a connection that was not a test"; }
  pkill -INT -x rdmabw
  wait "$spid" || rc=$?
  [ "$rc" -eq 130 ] || { cat "$T_OUT/rdmabw_server.err"; fail "server exit $rc after Ctrl-C, expected 130"; }
}

# `rdmabw devices` lists every device, port and GID table, marking other pods' GIDs.
test_devices_listing() {
  in_pod podB "$RDMABW" devices >"$T_OUT/devices.txt" 2>&1 || fail "rdmabw devices failed"
  cat "$T_OUT/devices.txt"
  grep -q '^rxe_b0 port 1: ACTIVE' "$T_OUT/devices.txt" || fail "rxe_b0 port 1 not listed ACTIVE"
  grep -Eq '^ +1 +0000:0000:0000:0000:0000:ffff:0ae0:0002 +RoCE v2 +net1 +10.224.0.2 +default' "$T_OUT/devices.txt" || fail "podB's GID not marked default"
  grep -q 'not usable here' "$T_OUT/devices.txt" || fail "no GID marked as another namespace's"
  in_pod podB "$RDMABW" devices --json >"$T_OUT/devices.json" || fail "devices --json"
  # podA's GID (10.224.0.1 on rxe_a0) must not count as usable in podB, even though the kernel
  # may name its netdev net1 there too.
  [ "$(json_get "$T_OUT/devices.json" '[.ports[] | select(.device == "rxe_a0") | .gids[] | select(.ip == "10.224.0.1") | .usable_here]')" = "[false]" ] \
    || fail "podA's GID counts as usable in podB"
  [ "$(json_get "$T_OUT/devices.json" '[.ports[] | select(.device == "rxe_b0") | .active_mtu_bytes][0]')" -gt 0 ] || fail "no active MTU"
}

# Every bad input of the issue: exit 2 and a message that names the flag and what would work.
test_bad_inputs() {
  expect_rc 2 unknown_device in_pod podA "$RDMABW" -d nosuch -n 10 "$SRV"
  must_say unknown_device '-d/--ib-dev nosuch: RDMA device nosuch not found; devices here: .*rxe_a0'
  expect_rc 2 gid_out_of_range in_pod podA "$RDMABW" -d rxe_a0 -x 9999 -n 10 "$SRV"
  must_say gid_out_of_range '-x/--gid-index 9999: .*out of range.*usable here: 1 \(net1 10.224.0.1\)'
  expect_rc 2 gid_empty in_pod podA "$RDMABW" -d rxe_a0 -x 9 -n 10 "$SRV"
  must_say gid_empty '-x/--gid-index 9: .*(all zeros|empty)'
  expect_rc 2 gid_foreign in_pod podA "$RDMABW" -d rxe_b0 -x 1 -n 10 "$SRV"
  must_say gid_foreign '-x/--gid-index 1: .*another network namespace'
  expect_rc 2 tclass in_pod podA "$RDMABW" --tclass 256 -n 10 "$SRV"
  must_say tclass "'256' for '--tclass <TC>': .*0-255"
  expect_rc 2 size_zero in_pod podA "$RDMABW" -s 0 "$SRV"
  must_say size_zero "'0' for '--size <BYTES>': .*at least 1 byte"
  expect_rc 2 size_big in_pod podA "$RDMABW" -s 4G "$SRV"
  must_say size_big "'4G' for '--size <BYTES>': above the largest buffer"
  # --use_cuda belongs to the GPUDirect issue now; without a CUDA driver it is still exit 2.
  expect_rc 2 cuda in_pod podA "$RDMABW" --use_cuda 0 "$SRV"
  must_say cuda '--use_cuda 0: .*Run without --use_cuda'
  # A control port in use.
  in_pod podB timeout 240 "$RDMABW" server --netdev net1 -p 18710 >/dev/null 2>&1 &
  wait_port podB 18710
  expect_rc 2 port_busy in_pod podB "$RDMABW" server --netdev net1 -p 18710
  must_say port_busy '-p/--port 18710: control port 18710 is in use'
  # A port that is down.
  in_pod podA ip link set net4 down
  local rc=0; in_pod podA "$RDMABW" -d rxe_a3 -n 10 "$SRV" >"$T_OUT/port_down.out" 2>&1 || rc=$?
  in_pod podA ip link set net4 up
  echo "port_down: exit $rc: $(cat "$T_OUT/port_down.out")"
  [ "$rc" -eq 2 ] || fail "port down: exit $rc"
  must_say port_down 'port 1 of RDMA device rxe_a3 is DOWN'
  # Memlock too low (root's CAP_IPC_LOCK dropped, as in a container without it).
  expect_rc 2 memlock in_pod podA setpriv --bounding-set -ipc_lock -- bash -c "ulimit -l 64; exec $RDMABW -d rxe_a0 -s 1M -n 10 $SRV"
  must_say memlock 'ulimit -l is 64 KiB.*ulimit -l unlimited'
  # No libibverbs: hide it in a private mount namespace.
  local lib; lib=$(readlink -f /usr/lib/x86_64-linux-gnu/libibverbs.so.1)
  expect_rc 2 no_libibverbs in_pod podA unshare -m bash -c "mount --bind /dev/null $lib && exec $RDMABW -d rxe_a0 -n 10 $SRV"
  must_say no_libibverbs 'libibverbs could not be loaded.*install'
}

# --run_infinitely (issue 21): a row per -D window as it closes until SIGINT, then exit 130 with
# every row on stdout; the server follows the client and is told. JSON lines and CSV rows are a
# stream; the client's memory does not grow with the windows.
test_run_infinitely_rows_until_sigint() {
  local rc=0 tk t1 n i rss1 rss2
  in_pod podB timeout 240 "$RDMABW" server --daemon -p 18720 2>"$T_OUT/daemon.err" &
  wait_port podB 18720
  # JSON lines, -D 1: interrupted after about three windows.
  ip netns exec podA "$RDMABW" client --json --run_infinitely -D 1 --netdev net1 --server-netdev net1 -p 18720 "$SRV" \
    >"$T_OUT/rows.jsonl" 2>"$T_OUT/client.err" &
  local cpid=$!
  wait_measuring "$T_OUT/client.err"
  for i in $(seq 1 300); do [ "$(wc -l <"$T_OUT/rows.jsonl")" -ge 3 ] && break; sleep 0.1; done
  tk=$(now); kill -INT "$cpid"
  wait "$cpid" || rc=$?
  t1=$(now)
  n=$(wc -l <"$T_OUT/rows.jsonl")
  echo "JSON: exit $rc, $n rows, $(elapsed "$tk" "$t1") s after SIGINT"
  cat "$T_OUT/client.err"
  [ "$rc" -eq 130 ] || fail "client exit $rc, expected 130"
  [ "$n" -ge 2 ] || fail "$n rows after about three windows"
  gt 5 "$(elapsed "$tk" "$t1")" || fail "took $(elapsed "$tk" "$t1") s to stop"
  "$LABCHECK" windows "$T_OUT/rows.jsonl" --window 1 || fail "a row is not a one-window BwReport with traffic"
  for i in $(seq 1 50); do grep -q 'test failed' "$T_OUT/daemon.err" && break; sleep 0.1; done
  grep 'test failed' "$T_OUT/daemon.err" || true
  grep -q 'test failed: .*interrupted on the other side' "$T_OUT/daemon.err" || { cat "$T_OUT/daemon.err"; fail "the server was not told"; }
  # CSV rows, 0.25 s windows: one header, then a row per window; the resident memory after
  # window 40 is that after window 10 (no growth per window).
  ip netns exec podA "$RDMABW" client --csv --run_infinitely --window 0.25 --netdev net1 --server-netdev net1 -p 18720 "$SRV" \
    >"$T_OUT/rows.csv" 2>"$T_OUT/csv.err" &
  cpid=$!
  for i in $(seq 1 900); do [ "$(wc -l <"$T_OUT/rows.csv")" -ge 11 ] && break; sleep 0.1; done
  rss1=$(awk '/^VmRSS/ {print $2}' "/proc/$cpid/status")
  for i in $(seq 1 900); do [ "$(wc -l <"$T_OUT/rows.csv")" -ge 41 ] && break; sleep 0.1; done
  rss2=$(awk '/^VmRSS/ {print $2}' "/proc/$cpid/status")
  kill -INT "$cpid"; rc=0; wait "$cpid" || rc=$?
  n=$(wc -l <"$T_OUT/rows.csv")
  echo "CSV: exit $rc, $n lines; VmRSS $rss1 kB after 10 windows, $rss2 kB after 40"
  head -3 "$T_OUT/rows.csv" | cut -c1-160
  [ "$rc" -eq 130 ] || { cat "$T_OUT/csv.err"; fail "CSV client exit $rc, expected 130"; }
  [ "$n" -ge 41 ] || fail "only $n CSV lines"
  [ "$(grep -c '^schema_version,' "$T_OUT/rows.csv")" -eq 1 ] || fail "the CSV header is not printed once"
  # Under emulation the idle-priority poller can be off its CPU for a whole 0.25 s window, which
  # then shows 0 and the next one the backlog: the windows' mean is what must be above 0.
  "$LABCHECK" windows "$T_OUT/rows.csv" --window 0.25 || fail "the CSV rows do not parse, or carry no traffic"
  # Growth of more than 256 kB over 30 windows would be 8 kB per window kept.
  gt $((rss1 + 256)) "$rss2" || fail "VmRSS grew from $rss1 to $rss2 kB over 30 windows"
}

# --rate_limit (issue 21): a limit of a third of the rail's measured rate gives a bandwidth
# within 10% of the limit; nonsense is refused naming the flag.
test_rate_limit_lands_at_the_limit() {
  local full limit bw
  expect_rc 2 zero in_pod podA "$RDMABW" --rate_limit 0 -n 10 "$SRV"
  must_say zero '^rdmabw: error: --rate_limit 0: give a positive rate'
  expect_rc 2 hw in_pod podA "$RDMABW" --rate_limit 1 --rate_limit_type HW -n 10 "$SRV"
  must_say hw '--rate_limit_type HW: not supported by rdmabw'
  in_pod podB timeout 280 "$RDMABW" server --daemon -p 18730 2>"$T_OUT/daemon.err" &
  wait_port podB 18730
  in_pod podA timeout 120 "$RDMABW" client --json --netdev net2 --server-netdev net2 -D 5 -p 18730 "$SRV" \
    >"$T_OUT/full.json" 2>"$T_OUT/full.err" || { cat "$T_OUT/full.err"; fail "full-rate run failed"; }
  full=$(json_get "$T_OUT/full.json" '.results[0].bw_avg_gbps')
  limit=$(awk -v f="$full" 'BEGIN { printf "%.4f", f / 3 }')
  in_pod podA timeout 120 "$RDMABW" client --json --netdev net2 --server-netdev net2 -D 5 --rate_limit "$limit" -p 18730 "$SRV" \
    >"$T_OUT/limited.json" 2>"$T_OUT/limited.err" || { cat "$T_OUT/limited.err"; fail "limited run failed"; }
  bw=$(json_get "$T_OUT/limited.json" '.results[0].bw_avg_gbps')
  echo "full rate $full Gb/s; --rate_limit $limit (Gb/s): $bw Gb/s = $(awk -v b="$bw" -v l="$limit" 'BEGIN { printf "%.1f", 100 * b / l }')% of the limit"
  [ "$(json_get "$T_OUT/limited.json" '.tuning.rate_limit.unit')" = gbps ] || fail "the report does not carry the limit"
  gt "$bw" "$(awk -v l="$limit" 'BEGIN { print 0.9 * l }')" || fail "$bw Gb/s is more than 10% under the limit $limit"
  gt "$(awk -v l="$limit" 'BEGIN { print 1.1 * l }')" "$bw" || fail "$bw Gb/s is more than 10% over the limit $limit"
  # Writes per second (p), bursts of 4: the message rate sits at the limit too.
  limit=$(json_get "$T_OUT/full.json" '.results[0].msg_rate_mpps * 1e6 / 3 | round')
  in_pod podA timeout 120 "$RDMABW" client --json --netdev net2 --server-netdev net2 -D 5 --rate_limit "$limit" --rate_units p --burst_size 4 -p 18730 "$SRV" \
    >"$T_OUT/pps.json" 2>"$T_OUT/pps.err" || { cat "$T_OUT/pps.err"; fail "pps-limited run failed"; }
  bw=$(json_get "$T_OUT/pps.json" '.results[0].msg_rate_mpps * 1e7 | round / 10')
  echo "--rate_limit $limit --rate_units p --burst_size 4: $bw writes/s"
  gt "$bw" "$(awk -v l="$limit" 'BEGIN { print 0.9 * l }')" || fail "$bw writes/s is more than 10% under $limit"
  gt "$(awk -v l="$limit" 'BEGIN { print 1.1 * l }')" "$bw" || fail "$bw writes/s is more than 10% over $limit"
}

# --data_validation (issue 21) on a clean rail: every byte the peer wrote is what it sent, for
# several QPs, an -a sweep (each size at its own offset), inline writes and both directions.
test_data_validation_clean_rail() {
  in_pod podB timeout 280 "$RDMABW" server --daemon -p 18740 2>"$T_OUT/daemon.err" &
  wait_port podB 18740
  expect_rc 0 qps in_pod podA timeout 120 "$RDMABW" client --json --data_validation -q 2 -D 2 --netdev net3 --server-netdev net3 -p 18740 "$SRV"
  grep -q 'data validation: every byte this side wrote is what was sent' "$T_OUT/qps.out" || fail "no validation verdict on the client"
  expect_rc 0 sweep in_pod podA timeout 120 "$RDMABW" client --json --data_validation -a -n 2 --netdev net3 --server-netdev net3 -p 18740 "$SRV"
  expect_rc 0 inline_bidir in_pod podA timeout 120 "$RDMABW" client --json --data_validation -b -s 64 -I 64 -n 2000 --netdev net3 --server-netdev net3 -p 18740 "$SRV"
  must_say inline_bidir 'every byte either side wrote is what was sent'
  [ "$(grep -c 'data validation: every byte the client wrote is what it sent' "$T_OUT/daemon.err")" -eq 3 ] \
    || { cat "$T_OUT/daemon.err"; fail "the server did not check all three tests"; }
}

# --data_validation (issue 21) end to end: a client whose sent bytes are corrupted on purpose
# (RDMABW_TEST_CORRUPT_SENT_BYTE, a test hook that flips one byte of its pattern before the
# first write) fails on both sides, exit 1, naming the offset, the byte sent and the byte found.
test_data_validation_catches_a_wrong_byte() {
  in_pod podB timeout 280 "$RDMABW" server --daemon -p 18750 2>"$T_OUT/daemon.err" &
  wait_port podB 18750
  # Byte 70000 of the sending half: QP 1's slot (64 KiB per QP), its byte 4464.
  expect_rc 1 corrupt in_pod podA env RDMABW_TEST_CORRUPT_SENT_BYTE=70000 timeout 120 "$RDMABW" client --data_validation -q 2 -n 200 --netdev net4 --server-netdev net4 -p 18750 "$SRV"
  must_say corrupt 'stopped the test: data validation failed: byte 70000 of the landing region \(QP 1, 65536 B writes\) is 0x[0-9a-f]{2}, expected 0x[0-9a-f]{2}'
  for i in $(seq 1 50); do grep -q 'test failed' "$T_OUT/daemon.err" && break; sleep 0.1; done
  grep 'test failed' "$T_OUT/daemon.err" || { cat "$T_OUT/daemon.err"; fail "the server did not fail the test"; }
  grep -q 'test failed: data validation failed: byte 70000' "$T_OUT/daemon.err" || fail "the server does not name the byte"
  # The same client without the hook passes: the failure was the corrupted byte.
  expect_rc 0 clean in_pod podA timeout 120 "$RDMABW" client --data_validation -q 2 -n 200 --netdev net4 --server-netdev net4 -p 18750 "$SRV"
}
