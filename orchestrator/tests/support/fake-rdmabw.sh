#!/bin/sh
# The fake rdmabw of railsweep's tests and scripts/bench-fleet: what it does and the files of its
# folder that steer it are described in orchestrator/tests/support/fake.rs, which writes it with
# @DIR@, its folder, filled in (the tests' Fake, or `cargo run --example fake_fleet`).
dir=@DIR@
# The node this runs on: what the node agent says (TESTCLUSTER_NODE; one agent may host many
# nodes), else the --name of a node agent among its ancestors (empty elsewhere).
my_node() {
    [ -n "${TESTCLUSTER_NODE:-}" ] && { echo "$TESTCLUSTER_NODE"; return; }
    p=$$
    while [ "${p:-1}" -gt 1 ]; do
      n=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n '/^--name$/{n;p;q;}')
      [ -n "$n" ] && { echo "$n"; return; }
      p=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f2)
    done
}
# The seconds a flood lasts: the file flood-secs, else 10.
flood_secs() { cat "$dir/flood-secs" 2>/dev/null || echo 10; }
# The first of these files that exists.
first() { for f in "$@"; do [ -e "$f" ] && { echo "$f"; return; }; done; echo "$1"; }
# A rails report of this network namespace's interfaces named PREFIX*, in name order.
rails_from_links() {
    i=0; sep=""
    printf '{"schema_version":1,"rdmabw_version":"%s","host":"fake","rails":[' "$(sed 's/^rdmabw //' "$dir/version")"
    for n in $(ip -o link show | sed -n 's/^[0-9]*: \([^:@]*\).*/\1/p' | grep "^$1" | sort); do
      printf '%s{"rail":%d,"iface":"%s","ipv4":"10.225.%d.2","device":null,"port":null,"gid_index":null,"state":"ACTIVE","link_layer":"Ethernet","rate_gbps":100.0,"active_mtu_bytes":4096,"pci":null,"numa_node":null,"gpus":[],"attachment":"unknown","usable":true,"reason":null}' "$sep" "$i" "$n" "$i"
      sep=","; i=$((i + 1))
    done
    printf '],"not_rails":[]}\n'
}
# The report on standard input with the capabilities this build announces first: rdmabw's,
# less what a marker file (no-exit-flag, no-batch, no-bind, no-lat) says an older build lacks.
announce() {
    caps=""
    [ -e "$dir/no-exit-flag" ] || caps="$caps,\"exit-on-stdin-eof\""
    [ -e "$dir/no-batch" ] || caps="$caps,\"batch\""
    [ -e "$dir/no-bind" ] || caps="$caps,\"bind-addresses\""
    [ -e "$dir/no-lat" ] || caps="$caps,\"latency\""
    sed "1s/^{/{\"capabilities\":[${caps#,}],/"
}
# A latency report of p99 $1 us for interface $2, judged against --max-p99-us $3; exit 1 above.
lat_report() {
    p99=$1; nd=$2; max=$3
    st=ok; err=null; rc=0
    if [ -n "$max" ] && awk "BEGIN{exit !($p99 > $max)}"; then
      st=below_threshold; err="\"2 B: p99 latency $p99 us is above --max-p99-us $max\""; rc=1
    fi
    row="{\"role\":\"client\",\"device\":\"mlx5_0\",\"port\":1,\"gid_index\":3,\"netdev\":\"$nd\",\"remote_host\":\"10.224.0.2\",\"remote_device\":\"mlx5_0\",\"msg_size_bytes\":2,\"iterations\":1000,\"samples\":999,\"t_min_us\":1.0,\"t_max_us\":$p99,\"t_typical_us\":1.5,\"t_avg_us\":1.6,\"t_stdev_us\":0.2,\"t_p99_us\":$p99,\"t_p99_9_us\":$p99,\"p50_us\":1.5,\"p99_us\":$p99,\"p99_9_us\":$p99,\"max_us\":$p99,\"status\":\"$st\"}"
    printf '{"schema_version":1,"test":"latency","role":"client","params":{"sizes":{"one":{"msg_size_bytes":2}},"length":{"iterations":{"iterations":1000}},"qps":1,"connection":"RC","bidirectional":false,"latency":true},"path_mtu_bytes":4096,"max_p99_us":%s,"results":[%s],"peer_results":[],"status":"%s","error":%s}\n' \
      "${max:-null}" "$row" "$st" "$err"
    return $rc
}
client() {
    nd=""; snd=""; prev=""; last=""; maxp99=""
    for a in "$@"; do
      [ "$prev" = "--netdev" ] && nd=$a
      [ "$prev" = "--server-netdev" ] && snd=$a
      [ "$prev" = "-d" ] && nd=net$(( ${a#mlx5_} + 1 ))
      [ "$prev" = "--max-p99-us" ] && maxp99=$a
      prev=$a; last=$a
    done
    echo "$*" >>"$dir/client-args.log"
    case " $* " in *" --secret-stdin "*) IFS= read -r s; echo "$s" >>"$dir/secrets.log" ;; esac
    me=""; peer=""
    if [ -e "$dir/per-node" ]; then
      me=$(my_node); peer=$(cat "$dir/node-at-$last" 2>/dev/null)
    fi
    if [ "$1" = lat ]; then
      [ -e "$dir/lat-fail-$nd" ] && {
        echo "rdmabw: error: the server runs no latency tests (an older rdmabw)" >&2; return 2; }
      lat_report "$(cat "$(first "$dir/lat-p99-$me-$nd" "$dir/lat-p99-$peer-$nd" "$dir/lat-p99-$nd")" 2>/dev/null || echo 4.0)" "$nd" "${maxp99:-}"
      return $?
    fi
    b=$(cat "$(first "$dir/behave-$me-$nd" "$dir/behave-$peer-$nd" "$dir/behave-$nd")" 2>/dev/null || echo ok)
    rep=$(first "$dir/report-$me-$peer-$nd.json" "$dir/report-$me-$nd.json" "$dir/report-$peer-$nd.json" "$dir/report-$nd.json")
    if [ -e "$dir/rails-links" ] && [ ! -e "$rep" ]; then
      # Rails from the namespace's links: rail 0's report, with these interfaces (local first).
      sed -e "s/\"netdev\":\"net1\"/\"netdev\":\"$nd\"/" -e "s/\"netdev\":\"net1\"/\"netdev\":\"$snd\"/" \
        "$dir/report-net1.json" >"$dir/report-links-$$.json"
      rep="$dir/report-links-$$.json"
    fi
    # Against perftest's server (--peer perftest) the report names its peer, as rdmabw's does,
    # and not the server's device or GID index (empty and u32::MAX, as rdmabw's).
    case " $* " in *" --peer perftest "*)
      sed -e '1s/^{/{"peer":{"tool":"perftest","version":"6.24"},/' \
        -e 's/"remote":{"active_mtu_bytes":\([0-9]*\),"device":"[^"]*","gid":"\([^"]*\)","gid_index":[0-9]*/"remote":{"active_mtu_bytes":\1,"device":"","gid":"\2","gid_index":4294967295/' \
        "$rep" >"$dir/report-perftest-$$.json"
      rep="$dir/report-perftest-$$.json" ;; esac
    case "$b" in
      ok) cat "$rep" ;;
      fail) cat "$dir/report-fail.json"; return 2 ;;
      crash) echo "rdmabw: error: cannot connect to the server: connection refused" >&2; return 2 ;;
      hang) echo $$ >"$dir/hang-$nd.pid"; exec sleep 600 ;;
      once) echo ok >"$dir/behave-$nd"; cat "$dir/report-fail.json"; return 2 ;;
      slow) sleep 1; cat "$rep" ;;
      flood) head -c 3000000 /dev/zero | tr '\0' x; echo; cat "$rep" ;;
      floodlines) timeout "$(flood_secs)" yes "rdmabw: a line of a flood" | dd bs=64k 2>"$dir/flood-count"
        cat "$rep" ;;
      floodstderr) timeout "$(flood_secs)" yes "rdmabw: a line of a flood" | dd bs=64k >&2 2>"$dir/flood-count"
        cat "$rep" ;;
      linger) sleep "$(flood_secs)"; cat "$rep" ;;
      floodline) timeout "$(flood_secs)" tr '\0' x </dev/zero | dd bs=64k 2>"$dir/flood-count"
        echo; cat "$rep" ;;
      killsrv) kill -9 "$(cat "$dir/server.pid")"; sleep 0.3
        echo "rdmabw: error: the server stopped answering (no heartbeat for 1.5 s)" >&2; return 2 ;;
    esac
}
case "$1" in
  --version) cat "$dir/version" ;;
  rails)
    if [ -e "$dir/rails-links" ]; then rails_from_links "$(cat "$dir/rails-links")"
    elif [ -e "$dir/per-node" ]; then cat "$(first "$dir/rails-$(my_node).json" "$dir/rails.json")"
    else cat "$dir/rails.json"; fi | announce ;;
  server)
    # A one-test server for perftest's client (--client-tool ib_write_bw): it records its
    # arguments (pt-server-args.log) and PID (pt-server.pids), says it listens as rdmabw's does,
    # waits for the fake ib_write_bw client's mark pt-client-PORT (or forever), then prints the
    # server's report of that rail: the client's figures, without window or samples. A file
    # pt-server-fail makes it fail at once as one whose address is taken.
    case " $* " in *" --peer perftest "*)
      echo "$*" >>"$dir/pt-server-args.log"; echo $$ >>"$dir/pt-server.pids"
      prev=""; port=""; nd=""; addr=""
      for a in "$@"; do
        [ "$prev" = "-p" ] && port=$a
        [ "$prev" = "--bind" ] && addr=$a
        [ "$prev" = "-d" ] && nd=net$(( ${a#mlx5_} + 1 ))
        prev=$a
      done
      [ -e "$dir/pt-server-fail" ] && {
        echo "rdmabw: error: --bind $addr: cannot listen on port $port: address in use" >&2
        sed -e 's/"role":"client"/"role":"server"/' \
          -e "s/\"error\":\"[^\"]*\"/\"error\":\"--bind $addr: cannot listen on port $port: address in use\"/" \
          "$dir/report-fail.json"; exit 2; }
      echo "rdmabw server: listening on $addr:$port" >&2
      while [ ! -e "$dir/pt-client-$port" ]; do sleep 0.05; done
      sed -e 's/"role":"client"/"role":"server"/' -e '1s/^{/{"peer":{"tool":"perftest","version":"6.24"},/' \
        -e 's/"interval_ms":[0-9]*/"interval_ms":0/' -e 's/"measured_s":[0-9.]*/"measured_s":0.0/' \
        "$dir/report-$nd.json"
      exit 0 ;; esac
    case " $* " in *" --exit-on-stdin-eof "*) [ -e "$dir/no-exit-flag" ] && {
      echo "error: unexpected argument '--exit-on-stdin-eof' found" >&2; exit 2; } ;; esac
    echo $$ >"$dir/server.pid"; echo $$ >>"$dir/server.pids"; echo "$*" >"$dir/server-args"
    case " $* " in *" --secret-stdin "*) IFS= read -r s; echo "$s" >"$dir/server-secret" ;; esac
    # A file server-flood: the daemon prints lines as fast as it can for flood-secs seconds.
    [ -e "$dir/server-flood" ] && { timeout "$(flood_secs)" yes "rdmabw: a daemon's flood" \
      | dd bs=64k 2>"$dir/flood-count" & }
    # As rdmabw's: with the flag it stops at the end of its input (and says so in server-end).
    case " $* " in *" --exit-on-stdin-eof "*) cat >/dev/null 2>&1; echo eof >>"$dir/server-end"
      [ -e "$dir/server-linger" ] && sleep "$(cat "$dir/server-linger")"; exit 0 ;; esac
    exec sleep 600 ;;
  client|lat) client "$@"; exit $? ;;
  batch)
    [ -e "$dir/no-batch" ] && { echo "error: unrecognized subcommand 'batch'" >&2; exit 2; }
    echo $$ >>"$dir/batch.pids"
    [ "$2" = --secret-stdin ] && { IFS= read -r s; echo "$s" >>"$dir/secrets.log"; }
    n=0
    # railsweep's argument vectors hold no quotes, commas or spaces: split the JSON array.
    while IFS= read -r line; do
      n=$((n + 1))
      # shellcheck disable=SC2046
      set -- $(printf '%s' "$line" | sed -e 's/^\[//' -e 's/\]$//' -e 's/","/ /g' -e 's/"//g')
      client "$@"; rc=$?
      echo "rdmabw-batch-end {\"test\":$n,\"exit_code\":$rc}"
      echo "rdmabw-batch-end {\"test\":$n,\"exit_code\":$rc}" >&2
    done ;;
  *) echo "fake rdmabw: unknown command $1" >&2; exit 2 ;;
esac
