#!/bin/bash
# Scenarios for the engine on the lab's Soft-RoCE, run inside the guest:
#   cargo build --release -p bench-core --example write_pair
#   scripts/lab --rails 2 --out lab-out/engine -- bench-core/examples/write_pair_lab.sh [SCENARIO...]
# Each scenario writes server/client JSON (stdout) and logs (stderr) to $LAB_OUT/<scenario>/.
# Layout: pods (podA client, podB server, control over eth0 10.99.0.x).
set -u
W=${W:-target/release/examples/write_pair}
OUT=${LAB_OUT:-/tmp}
SRV=10.99.0.2
port=18600

# start NAME [common options] -- [client-only options]: scenario NAME's server in podB on the
# next port, its pid in $spid; $name, $common and $client are left for run_client.
start() {
  name=$1; shift
  common=() client=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do common+=("$1"); shift; done
  [ $# -gt 0 ] && shift && client=("$@")
  port=$((port + 1))
  mkdir -p "$OUT/$name"
  ip netns exec podB "$W" server --listen "$SRV:$port" "${common[@]}" >"$OUT/$name/server.json" 2>"$OUT/$name/server.log" &
  spid=$!
}

# run_client: the client of the scenario started last, in podA; its exit code in client.rc.
run_client() {
  ip netns exec podA "$W" client --connect "$SRV:$port" "${common[@]}" "${client[@]}" >"$OUT/$name/client.json" 2>"$OUT/$name/client.log"
  echo $? >"$OUT/$name/client.rc"
}

pair() { # pair NAME [common options] -- [client-only options]
  start "$@"
  run_client
  # A server whose client failed before connecting would wait for its accept timeout.
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 $spid 2>/dev/null || break; sleep 1; done
  kill $spid 2>/dev/null
  wait $spid
  echo $? >"$OUT/$name/server.rc"
  echo "scenario $name: client rc $(cat "$OUT/$name/client.rc"), server rc $(cat "$OUT/$name/server.rc")" >&2
}

# after_connected FILE SECONDS: returns SECONDS after FILE (a client log) says "connected".
after_connected() {
  local i
  for ((i = 0; i < 600; i++)); do
    grep -q "connected to" "$1" 2>/dev/null && break
    sleep 0.1
  done
  sleep "$2"
}

# kill_server_after NAME SECONDS [options] -- [client-only options]: kill -9 the server SECONDS
# after the client has connected.
kill_server_after() {
  local after=$2
  start "$1" "${@:3}"
  ( after_connected "$OUT/$name/client.log" "$after"; date +%s.%N >"$OUT/$name/killed_at"; kill -9 $spid ) &
  run_client
  date +%s.%N >"$OUT/$name/client_exit_at"
  wait
  echo "scenario $name: client rc $(cat "$OUT/$name/client.rc")" >&2
}

run() {
  case "$1" in
    iter64k) pair iter64k -s 65536 -n 2000 ;;
    qps2bidir) pair qps2bidir -s 65536 -q 2 -n 500 -b ;;
    duration_qps4) pair duration_qps4 -s 65536 -q 4 -D 4 --warmup 1 --cooldown 1 -t 64 -Q 16 ;;
    sweep) pair sweep -a 1048576 -n 200 ;;
    duration) pair duration -s 65536 -D 3 --warmup 1 --cooldown 1 ;;
    qps4) pair qps4 -s 65536 -q 4 -n 500 -t 64 -Q 16 ;;
    postlist) pair postlist -s 4096 -n 4000 -l 8 -t 128 -Q 32 ;;
    inline) pair inline -s 64 -n 20000 -I 128 ;;
    bidir) pair bidir -s 65536 -n 1000 -b ;;
    mtu) pair mtu -s 65536 -n 500 --mtu 512 ;;
    mtu_too_big) pair mtu_too_big -s 65536 -n 500 --mtu 4096 ;;
    rail1) pair rail1 --netdev net2 -s 65536 -n 1000 ;;
    # hostnet: podA's rail 1 is rdma1, podB's is net2; each side names its own.
    rail1_hostnet)
      mkdir -p "$OUT/rail1_hostnet"
      ip netns exec podB "$W" server --listen "$SRV:18700" --netdev net2 -s 65536 -n 1000 \
        >"$OUT/rail1_hostnet/server.json" 2>"$OUT/rail1_hostnet/server.log" &
      ip netns exec podA "$W" client --connect "$SRV:18700" --netdev rdma1 -s 65536 -n 1000 \
        >"$OUT/rail1_hostnet/client.json" 2>"$OUT/rail1_hostnet/client.log"
      wait ;;
    # Dead peer: the control socket's EOF raises the stop flag.
    kill_watch) kill_server_after kill_watch 2 -s 65536 -D 20 --warmup 0.5 --cooldown 0.5 ;;
    # Dead peer without the watcher: the CQ must report retry exceeded (short ACK timeout).
    # ACK timeout 14 (67 ms): shorter ones fire spuriously under emulation. Retry 6: rxe
    # retries forever with 7, and the engine's stall guard (10 s) would end the run instead.
    kill_cq) kill_server_after kill_cq 2 -s 65536 -D 20 --warmup 0.5 --cooldown 0.5 --retry 6 -- --no-watch ;;
    kill_cq7) kill_server_after kill_cq7 2 -s 65536 -D 20 --warmup 0.5 --cooldown 0.5 -- --no-watch ;;
    # Rail down mid-run (podB's end of rail 0 on the switch), both processes alive.
    link_down)
      mkdir -p "$OUT/link_down"
      ( after_connected "$OUT/link_down/client.log" 2; date +%s.%N >"$OUT/link_down/down_at"; ip link set r0b down ) &
      pair link_down -s 65536 -D 20 --warmup 0.5 --cooldown 0.5 --retry 6
      ip link set r0b up
      wait ;;
    # Port down before the start: netdev down takes the rxe port down.
    port_down)
      mkdir -p "$OUT/port_down"
      ip netns exec podA ip link set net1 down
      sleep 1
      ip netns exec podA "$W" rail --dev rxe_a0 >"$OUT/port_down/rail.json" 2>&1
      ip netns exec podA ip link set net1 up ;;
    # Memlock: without CAP_IPC_LOCK and with a 64 KiB limit, registering 2 x 1 MiB fails.
    memlock)
      mkdir -p "$OUT/memlock"
      ip netns exec podA setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock \
        prlimit --memlock=65536:65536 "$W" server --listen 10.99.0.1:19999 -s 1048576 -n 10 \
        >"$OUT/memlock/server.json" 2>"$OUT/memlock/server.log" ;;
    wrong_gid)
      mkdir -p "$OUT/wrong_gid"
      ip netns exec podA "$W" rail --dev rxe_b0 -x 1 >"$OUT/wrong_gid/rail.json" 2>&1
      ip netns exec podA "$W" rail --dev rxe_a0 -x 7 >"$OUT/wrong_gid/rail_empty.json" 2>&1 ;;
    dmabuf)
      mkdir -p "$OUT/dmabuf"
      ip netns exec podA "$W" dmabuf --netdev net2 >"$OUT/dmabuf/out.json" 2>&1 ;;
    *) echo "unknown scenario $1" >&2 ;;
  esac
}

if [ $# -eq 0 ]; then
  set -- iter64k sweep duration qps4 postlist inline bidir mtu mtu_too_big rail1 kill_watch kill_cq link_down port_down memlock wrong_gid dmabuf
fi
for s in "$@"; do run "$s"; done
