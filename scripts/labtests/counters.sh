# lab: --layout pods --rails 4
# Counter deltas and findings (issue 20) over real rxe: with netem dropping a share of the
# packets on rail 1's switch port towards podB, and nothing on rail 0, the client's report for
# rail 1 has rxe's retry and sequence counters moving and the finding packet_loss, rail 0 has
# none; -W prints the deltas after the result table, and `rdmabw counters` lists a rail's. A
# link flap mid-window is a finding, not a failure; railsweep shows the findings per rail.

SRV=$(ctl_ip podB)
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
# A rate at which rxe still completes a -D 2 test (each loss costs it a retransmission timeout).
LOSS=${LOSS:-2%}


# one_test RAIL NAME [CLIENT FLAGS...]: an rdmabw server in podB and a --json client in podA
# on RAIL; the client's document in $T_OUT/NAME.json, its stderr in $T_OUT/NAME.err.
one_test() {
  local i=$1 name=$2 port=$((18600 + $1)) nd; shift 2
  nd=$(topo podA "$i" iface)
  in_pod podB timeout 200 "$RDMABW" --netdev "$nd" -D 2 -p "$port" >"$T_OUT/$name.srv" 2>&1 &
  wait_port podB "$port"
  in_pod podA timeout 150 "$RDMABW" client --netdev "$nd" -D 2 -p "$port" "$@" "$SRV" \
    >"$T_OUT/$name.json" 2>"$T_OUT/$name.err" || { cat "$T_OUT/$name.err"; fail "$name: client failed"; }
  wait $! || { cat "$T_OUT/$name.srv"; fail "$name: server failed"; }
}

test_counters_loss_on_one_rail() {
  tc qdisc add dev r1b root netem loss "$LOSS" || fail "tc netem on r1b (is sch_netem loaded?)"
  one_test 1 lossy --json
  tc qdisc del dev r1b root
  one_test 0 clean --json
  "$LABCHECK" findings "$T_OUT/lossy.json" --counter-sides client,server --exactly loss || fail "findings are not where the loss was"
  "$LABCHECK" findings "$T_OUT/clean.json" --counter-sides client,server --exactly none || fail "a finding on the clean rail"
  grep -q 'rdmabw: finding loss: packets were lost or retransmitted' "$T_OUT/lossy.err" || fail "no finding on stderr"
  ! grep -q 'finding' "$T_OUT/clean.err" || fail "a finding on the clean rail"
}

test_counters_report_counters_table() {
  one_test 0 table -W hw_counters/sent_pkts,rcvd_pkts --report_gbits
  grep -q '#bytes' "$T_OUT/table.json" || fail "no result table"
  grep -Eq '^ Counters of the client \(rxe_a0 port 1, net1\), [0-9.]+ s around the window: [0-9]+ of [0-9]+ moved' "$T_OUT/table.json" \
    || { cat "$T_OUT/table.json"; fail "no counter table after the results"; }
  grep -Eq '^ +hw +sent_pkts +[1-9]' "$T_OUT/table.json" || fail "rxe's sent_pkts did not move"
  # -W lists what to print, as ib_write_bw's -W does: nothing else.
  ! grep -Eq '^ +(hw|port|netdev) +(sent_bytes|rx_bytes|tx_packets) ' "$T_OUT/table.json" || fail "-W printed counters it did not name"
  in_pod podA "$RDMABW" counters --netdev net1 >"$T_OUT/counters.txt" || fail "rdmabw counters failed"
  grep -Eq '^rxe_a0 port 1 \(net1\): [0-9]+ counters' "$T_OUT/counters.txt" || { cat "$T_OUT/counters.txt"; fail "no counter listing"; }
  in_pod podA "$RDMABW" counters -d rxe_a0 --json | "$LABCHECK" counters - --netdev net1 --has sent_pkts \
    || fail "rdmabw counters --json"
}

# A link that goes down and comes back mid-window: rail 0's switch port towards podB is taken
# down for 0.3 s once the client's packets flow. The rail guard lets the test go on (the port
# came back within its grace), rxe retransmits, and the counters show the flap.
test_counters_link_flap() {
  local nd port=18610 sent=/sys/class/infiniband/rxe_a0/ports/1/hw_counters/sent_pkts s0 i
  nd=$(topo podA 0 iface)
  [ -r "$sent" ] || fail "no $sent to see the window start"
  in_pod podB timeout 200 "$RDMABW" --netdev "$nd" -D 6 -p "$port" >"$T_OUT/flap.srv" 2>&1 &
  local spid=$!
  wait_port podB "$port"
  s0=$(cat "$sent")
  in_pod podA timeout 150 "$RDMABW" client --netdev "$nd" -D 6 -p "$port" --json "$SRV" \
    >"$T_OUT/flap.json" 2>"$T_OUT/flap.err" &
  local cpid=$!
  # The window has started once rxe has sent thousands of packets (the handshake sends a few).
  for i in $(seq 1 600); do
    [ $(( $(cat "$sent") - s0 )) -gt 5000 ] && break
    sleep 0.1
  done
  [ $(( $(cat "$sent") - s0 )) -gt 5000 ] || fail "the client's packets never flowed"
  sleep 1
  ip link set r0b down; sleep 0.3; ip link set r0b up
  echo "flapped r0b at $(date +%T.%N)"
  wait "$cpid" || { cat "$T_OUT/flap.err"; fail "the client failed: a flap of 0.3 s must not end the test"; }
  wait "$spid" || { cat "$T_OUT/flap.srv"; fail "the server failed"; }
  "$LABCHECK" findings "$T_OUT/flap.json" --includes link-flap --evidence-side server || fail "no link-flap finding"
  grep -q 'rdmabw: finding link-flap: ' "$T_OUT/flap.err" || fail "no link-flap finding on stderr"
}

# railsweep run over both rails with netem on rail 1's path: the table's diagnosis column says
# loss on rail 1 only, the summary names rail 1, the CSV rows carry the findings' words, the
# findings file beside the CSV their evidence, and the counters file both sides' counters.
test_counters_railsweep_names_the_lossy_rail() {
  tc qdisc add dev r1b root netem loss "$LOSS" || fail "tc netem on r1b"
  local rc=0
  "$RAILSWEEP" run --runner local --client-pod podA --server-pod podB --rdmabw "$RDMABW" \
    --quiet -s 4096 --deadline-slack 60 --rails 0,1 --output-file "$T_OUT/sweep.csv" >"$T_OUT/sweep.out" 2>"$T_OUT/sweep.err" || rc=$?
  tc qdisc del dev r1b root
  cat "$T_OUT/sweep.out"; tail -5 "$T_OUT/sweep.err"
  [ "$rc" -eq 0 ] || fail "railsweep exit $rc"
  # Not a terminal: the table is plain, its columns apart by spaces.
  grep -Eq '^ *1 .* loss *$' "$T_OUT/sweep.out" || fail "rail 1's diagnosis is not loss"
  grep -Eq '^ *0 .* - *$' "$T_OUT/sweep.out" || fail "rail 0 has a diagnosis"
  grep -q '^findings: rail 1 loss (' "$T_OUT/sweep.out" || fail "the summary does not name rail 1"
  "$LABCHECK" rows "$T_OUT/sweep.csv" --rails 0,1 --print rail,diagnosis,layer,evidence || fail "the CSV rows are not rails 0 and 1"
  "$LABCHECK" lossy-rail "$T_OUT/sweep.csv" --rail 1 || fail "the CSV rows do not carry the findings"
  "$RAILSWEEP" report -o markdown "$T_OUT/sweep.csv" >"$T_OUT/sweep.md" || fail "railsweep report"
  grep -q '^- \*\*loss\*\*: ' "$T_OUT/sweep.md" || { cat "$T_OUT/sweep.md"; fail "no finding in the markdown report"; }
}
