#!/bin/sh
# A fake perftest ib_write_bw (orchestrator/tests/support/fake.rs writes it with @DIR@, its
# folder, filled in). As a server: it records its arguments (ib_write_bw-args.log) and PID
# (ib_write_bw.pids), serves its one test in 0.2 s and exits 0; a file ib_write_bw-fail makes it
# fail at once as one whose port is taken, ib_write_bw-hang makes it wait forever (as a server
# whose client never came).
#
# Given a server's address (its last argument), it is perftest's client instead: it records its
# arguments (ib_write_bw-client-args.log), marks pt-client-PORT for the fake rdmabw server of
# that port, prints its table and exits 0; a file ib_write_bw-client-fail makes it fail as a
# client that could not connect.
dir=@DIR@
for last in "$@"; do :; done
case "$last" in [0-9]*.*)
  echo "$*" >>"$dir/ib_write_bw-client-args.log"
  prev=""; port=""
  for a in "$@"; do [ "$prev" = "-p" ] && port=$a; prev=$a; done
  [ -e "$dir/ib_write_bw-client-fail" ] && { echo " Couldn't connect to $last:$port" >&2; exit 1; }
  : >"$dir/pt-client-$port"
  echo " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
  exit 0 ;;
esac
echo "$*" >>"$dir/ib_write_bw-args.log"
echo $$ >>"$dir/ib_write_bw.pids"
[ -e "$dir/ib_write_bw-fail" ] && { echo " Couldn't listen to port 18515" >&2; exit 1; }
[ -e "$dir/ib_write_bw-hang" ] && exec sleep 600
sleep 0.2
echo " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
exit 0
