# lab: --layout pods --rails 4
# The lab itself, proven with perftest's ib_write_bw as the reference peer.

# ib_write_bw on both ends of every rail: soak tier (scripts/test --soak). In the default tier
# interop's test_interop_bw_every_rail puts ib_write_bw at one end of every rail, both ways.
SOAK_TESTS="test_perftest_every_rail"

# ib_write_bw from podA to podB on every rail: each rail carries traffic.
test_perftest_every_rail() {
  local i port dev_a dev_b ip_b bw
  for ((i = 0; i < LAB_RAILS; i++)); do
    port=$((18515 + i))
    dev_a=$(topo podA "$i" rdma_dev); dev_b=$(topo podB "$i" rdma_dev); ip_b=$(topo podB "$i" ipv4)
    in_pod podB timeout 30 "$IB_WRITE_BW" -d "$dev_b" -x "$(gid_index "$dev_b" "$ip_b")" -F --report_gbits -D 2 -p "$port" \
      >"$T_OUT/server$i.txt" 2>&1 &
    wait_port podB "$port"
    in_pod podA timeout 30 "$IB_WRITE_BW" -d "$dev_a" -x "$(gid_index "$dev_a" "$(topo podA "$i" ipv4)")" -F --report_gbits \
      -D 2 -p "$port" "$ip_b" >"$T_OUT/client$i.txt" 2>&1 || { cat "$T_OUT/client$i.txt"; fail "ib_write_bw on rail $i failed"; }
    wait
    # ib_write_bw's own Gb/s divides by a CPU frequency it estimates from rdtsc; under
    # emulation that estimate sometimes fails ("Correlation coefficient r^2: 0.69 < 0.9") and
    # the table then says 0.000000 over writes that did complete. The writes in the 2 s window
    # (#iterations) are what shows traffic; the Gb/s is computed from them.
    bw=$(awk '$1 == 65536 && NF == 5 && $2 ~ /^[0-9]+$/ { v = $2 * 65536 * 8 / 2 / 1e9 }
      END { if (v == "") exit 1; printf "%.3f", v }' "$T_OUT/client$i.txt") \
      || { cat "$T_OUT/client$i.txt"; fail "rail $i: no result row in ib_write_bw's output"; }
    echo "rail $i $dev_a -> $dev_b: $bw Gb/s (from #iterations; ib_write_bw says $(bw_of "$T_OUT/client$i.txt"))"
    gt "$bw" 0 || fail "rail $i: bandwidth $bw Gb/s is not above zero"
  done
}

# --tclass=41 shows up as TOS 0x29 in the IPv4 header of the RoCE v2 packets on the rail.
test_perftest_tclass_in_tos() {
  local dev_a dev_b ip_b
  dev_a=$(topo podA 1 rdma_dev); dev_b=$(topo podB 1 rdma_dev); ip_b=$(topo podB 1 ipv4)
  # Capture on podB's rail interface: RoCE v2 is UDP port 4791.
  in_pod podB timeout 20 tcpdump -l -n -v -c 20 -i "$(topo podB 1 iface)" udp port 4791 >"$T_OUT/tcpdump.txt" 2>"$T_OUT/tcpdump.err" &
  local tpid=$!
  sleep 1
  in_pod podB timeout 20 "$IB_WRITE_BW" -d "$dev_b" -x "$(gid_index "$dev_b" "$ip_b")" -F --report_gbits -n 200 --tclass=41 -p 18600 >/dev/null 2>&1 &
  wait_port podB 18600
  in_pod podA timeout 20 "$IB_WRITE_BW" -d "$dev_a" -x "$(gid_index "$dev_a" "$(topo podA 1 ipv4)")" -F --report_gbits -n 200 \
    --tclass=41 -p 18600 "$ip_b" >"$T_OUT/client.txt" 2>&1 || fail "ib_write_bw --tclass=41 failed"
  wait "$tpid" || true
  grep -m3 'tos 0x' "$T_OUT/tcpdump.txt" || true
  grep -q 'tos 0x29' "$T_OUT/tcpdump.txt" || fail "no packet with tos 0x29 in the capture ($(grep -c . "$T_OUT/tcpdump.txt") lines)"
  # No RoCE packet of the run went out with the default TOS 0.
  ! grep -q 'tos 0x0, .*proto UDP' "$T_OUT/tcpdump.txt" || fail "a RoCE packet with tos 0x0 during the --tclass=41 run"
}

# rail0: rail 0's devices, GID indexes and podB's address, in R0_DEV_A/B, R0_GID_A/B, R0_IP_B.
rail0() {
  R0_DEV_A=$(topo podA 0 rdma_dev); R0_DEV_B=$(topo podB 0 rdma_dev); R0_IP_B=$(topo podB 0 ipv4)
  R0_GID_A=$(gid_index "$R0_DEV_A" "$(topo podA 0 ipv4)"); R0_GID_B=$(gid_index "$R0_DEV_B" "$R0_IP_B")
}

# pair TOOL PORT NAME SERVER_FLAGS CLIENT_FLAGS...: TOOL's server in podB and client in podA on
# rail 0 (call rail0 first); the client's stdout in NAME.out, its stderr in NAME.err, its exit
# in $rc and its wall time in $wall.
pair() {
  local tool=$1 port=$2 name=$3 sflags=$4 t0; shift 4; rc=0
  # shellcheck disable=SC2086
  in_pod podB timeout 60 "$tool" -d "$R0_DEV_B" -x "$R0_GID_B" -p "$port" $sflags >/dev/null 2>&1 &
  wait_port podB "$port"
  t0=$(now)
  in_pod podA timeout 60 "$tool" -d "$R0_DEV_A" -x "$R0_GID_A" -p "$port" "$@" "$R0_IP_B" \
    >"$T_OUT/$name.out" 2>"$T_OUT/$name.err" || rc=$?
  wall=$(elapsed "$t0")
  wait || true
}

# -D times a test as ib_write_bw does (issue 21): -D 4 is 4 s in all with 1 s margins inside,
# 2 s measured. On one rail, ib_write_bw's pair and rdmabw's pair with the same -D 4: the
# clients' wall times and #iterations are printed side by side; rdmabw measures 2 s, and
# --window 4 measures 4 s.
test_perftest_duration_timing_is_ib_write_bws() {
  local wall_p wall_r it_p it_r m_d m_w
  rail0
  pair "$IB_WRITE_BW" 18620 perftest "-F --report_gbits -D 4" -F --report_gbits -D 4
  [ "$rc" -eq 0 ] || { cat "$T_OUT/perftest.out" "$T_OUT/perftest.err"; fail "ib_write_bw -D 4 failed"; }
  wall_p=$wall
  pair "$RDMABW" 18621 rdmabw "-D 4" -F --report_gbits -D 4
  [ "$rc" -eq 0 ] || { cat "$T_OUT/rdmabw.err"; fail "rdmabw -D 4 failed"; }
  wall_r=$wall
  it_p=$(awk '$1 == 65536 && NF == 5 { print $2 }' "$T_OUT/perftest.out")
  it_r=$(awk '$1 == 65536 && NF == 5 { print $2 }' "$T_OUT/rdmabw.out")
  echo "-D 4: ib_write_bw client ${wall_p} s wall, ${it_p} iterations; rdmabw client ${wall_r} s wall, ${it_r} iterations"
  [ -n "$it_p" ] && [ -n "$it_r" ] || fail "no #iterations in a table"
  # Before, rdmabw measured 4 s where ib_write_bw measured 2: 2.28 times the iterations.
  awk -v a="$it_r" -v b="$it_p" 'BEGIN { r = a / b; printf "#iterations rdmabw/ib_write_bw: %.2f\n", r; exit !(r > 0.6 && r < 1.6) }' \
    || fail "rdmabw's #iterations for -D 4 are not ib_write_bw's"
  pair "$RDMABW" 18622 d4 "-D 4" --json -D 4
  [ "$rc" -eq 0 ] || fail "rdmabw -D 4 --json failed"
  pair "$RDMABW" 18623 w4 "--window 4" --json --window 4
  [ "$rc" -eq 0 ] || fail "rdmabw --window 4 failed"
  m_d=$(json_get "$T_OUT/d4.out" '.results[0].measured_s'); m_w=$(json_get "$T_OUT/w4.out" '.results[0].measured_s')
  echo "measured: -D 4 ${m_d} s, --window 4 ${m_w} s"
  awk -v d="$m_d" -v w="$m_w" 'BEGIN { exit !(d > 1.9 && d < 2.1 && w > 3.9 && w < 4.1) }' \
    || fail "-D 4 should measure 2 s and --window 4 measure 4 s"
}

# ib_write_bw's output flags with their meaning in rdmabw (issue 21): --cpu_util adds the
# CPU_Util[%] column (and rdmabw's CPU[s/GB] after it), --output=bandwidth prints one number,
# -y above the message rate exits 1 naming it, --out_json_file writes the document, --cpu pins
# the polling thread, and -b --report-both prints each direction. The output flags are the client's; -b goes to both.
test_perftest_output_flags_of_rdmabw() {
  rail0
  pair "$RDMABW" 18631 cpu "-D 2" -D 2 --cpu_util --report_gbits
  [ "$rc" -eq 0 ] || { cat "$T_OUT/cpu.err"; fail "--cpu_util: exit $rc"; }
  grep -q 'MsgRate\[Mpps\].CPU_Util\[%\].CPU\[s/GB\]$' "$T_OUT/cpu.out" || { cat "$T_OUT/cpu.out"; fail "no CPU_Util[%] and CPU[s/GB] columns"; }
  awk '$1 == 65536 && NF == 7 && $7 > 0 { print "CPU_Util " $6 "%, " $7 " CPU s per GB"; ok = 1 } END { exit !ok }' "$T_OUT/cpu.out" \
    || fail "no CPU figures in the row"
  pair "$RDMABW" 18632 figure "-D 2" -D 2 --output=bandwidth --report_gbits
  [ "$rc" -eq 0 ] && grep -Eqx '[0-9]+\.[0-9]{2}' "$T_OUT/figure.out" || { cat "$T_OUT/figure.out"; fail "--output=bandwidth is not one number"; }
  echo "--output=bandwidth: $(cat "$T_OUT/figure.out") Gb/s"
  pair "$RDMABW" 18633 verifier "-D 2" -D 2 -y 1000000 --out_json_file "$T_OUT/doc.json"
  [ "$rc" -eq 1 ] || fail "-y 1000000 exited $rc, expected 1"
  grep -q 'below -y/--limit_msgrate 1000000 Mpps' "$T_OUT/verifier.err" || { cat "$T_OUT/verifier.err"; fail "-y does not say why"; }
  [ "$(json_get "$T_OUT/doc.json" '.status')" = below_threshold ] || fail "--out_json_file: not the report"
  # --cpu 1: the polling thread runs there, and each row says so (rxe has no NUMA node: without
  # --cpu the thread is left to the scheduler).
  pair "$RDMABW" 18634 pinned "-D 2" -D 2 --json --cpu 1
  [ "$rc" -eq 0 ] || { cat "$T_OUT/pinned.err"; fail "--cpu 1: exit $rc"; }
  [ "$(json_get "$T_OUT/pinned.out" '.results[0].polling_cpu')" = 1 ] || fail "--cpu 1: the row's polling_cpu is not 1"
  [ "$(json_get "$T_OUT/pinned.out" '.tuning.cpu')" = '{"cpu":1}' ] || fail "--cpu 1: not in the report's tuning"
  pair "$RDMABW" 18635 both "-D 2 -b" -D 2 -b --report-both --report_gbits
  [ "$rc" -eq 0 ] || { cat "$T_OUT/both.err"; fail "-b --report-both: exit $rc"; }
  grep -q '^ client to server:' "$T_OUT/both.out" && grep -q '^ server to client:' "$T_OUT/both.out" \
    || { cat "$T_OUT/both.out"; fail "--report-both: no table per direction"; }
}
