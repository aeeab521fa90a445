#!/usr/bin/env bash
# scripts/lib.sh: helpers shared by scripts/test and scripts/demo. Source it:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   cd "$DLOCK_ROOT"
#   ensure_deps
#   build_dir build -DCMAKE_BUILD_TYPE=Debug
#
# Functions return non-zero on failure instead of relying on `set -e` (which
# bash turns off inside functions called from `if` or `||`).
set -euo pipefail

DLOCK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian 12 packages needed to build and test dlock.
DLOCK_DEPS=(
  cmake ninja-build g++ ccache pkg-config help2man clang-format
  redis-server redis-tools libhiredis-dev libboost1.81-dev libssl-dev openssl libsqlite3-dev
  libpq-dev postgresql pgbouncer zookeeper libzookeeper-mt-dev
  etcd-server etcd-client libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev python3
  python3-prometheus-client
)

# ccache, for every build a script of this folder makes (scripts/bench's
# too). Precompiled headers (cmake/dlockPrecompiled.cmake) are cached only
# with these relaxed checks, which its manual asks for them. Paths under the
# checkout are hashed relative to it, and the build folder is not hashed: a
# clone in another folder (CI's) reuses what an earlier build on this
# machine compiled from the same sources and flags.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$DLOCK_ROOT}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

log() { printf '==> %s\n' "$*" >&2; }
die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}

# Runs a command as root (directly, or through sudo).
as_root() {
  if [[ $EUID -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "root is needed to run: $*"
  fi
}

pkg_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

# PIDs of running redis-server processes that serve the packaged default
# port 6379 (their process title is "redis-server 127.0.0.1:6379").
system_redis_pids() {
  local d cmdline
  for d in /proc/[0-9]*; do
    [[ "$(cat "$d/comm" 2>/dev/null)" == redis-server ]] || continue
    cmdline="$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)" || continue
    [[ $cmdline =~ :6379( |$) ]] && echo "${d#/proc/}"
  done
  return 0
}

# True while PID exists and is not a zombie.
pid_alive() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [[ "${stat%% *}" != Z ]]
}

# Stops redis-servers on 6379 that were not in the list $1 (the ones that
# the package installation started), each by its PID.
stop_new_system_redis() {
  local before=" ${1//$'\n'/ } " pid i
  for pid in $(system_redis_pids); do
    [[ "$before" == *" $pid "* ]] && continue
    log "stopping redis-server $pid that the package installation started on port 6379"
    if [[ -d /run/systemd/system ]] && systemctl is-active --quiet redis-server 2>/dev/null; then
      as_root systemctl stop redis-server || true
    fi
    as_root kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      pid_alive "$pid" || break
      sleep 0.05
    done
    if pid_alive "$pid"; then as_root kill -KILL "$pid" 2>/dev/null || true; fi
  done
  return 0
}

# Installs whatever of DLOCK_DEPS is missing (nothing, and no apt-get update,
# if all are there). Services are kept from starting during the installation.
ensure_deps() {
  command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this needs Debian 12 (bookworm)"
  local missing=() pkg
  for pkg in "${DLOCK_DEPS[@]}"; do
    pkg_installed "$pkg" || missing+=("$pkg")
  done
  ((${#missing[@]} == 0)) && return 0

  log "installing missing packages: ${missing[*]}"
  local before rc=0
  before="$(system_redis_pids)"
  # policy-rc.d exiting 101 tells the maintainer scripts not to start services
  # (redis-server would start on 6379). Only added if the system has none.
  (
    policy=/usr/sbin/policy-rc.d
    if [[ ! -e $policy ]]; then
      trap 'as_root rm -f "$policy"' EXIT
      trap 'exit 130' INT TERM
      # shellcheck disable=SC2016  # $1 is expanded by sh
      as_root sh -c 'printf "#!/bin/sh\nexit 101\n" >"$1" && chmod 755 "$1"' sh "$policy"
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  ) || rc=$?
  stop_new_system_redis "$before"
  ((rc == 0)) || die "apt-get failed (exit $rc) installing: ${missing[*]}"
  for pkg in "${missing[@]}"; do
    pkg_installed "$pkg" || die "package $pkg is still not installed"
  done
}

# The peer libraries the benchmarks and the interop tests run beside dlock.
# Python's from Debian's packages for /usr/bin/python3: redis-py, tooz with
# psycopg2 for PostgreSQL, kazoo for ZooKeeper, python-etcd3 for etcd.
ensure_python_peers() {
  local missing=() p
  for p in python3-redis python3-tooz python3-psycopg2 python3-kazoo python3-etcd3; do
    pkg_installed "$p" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  log "installing the Python peers: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The Node peers (npm redlock, redis-semaphore, ioredis: bench/peers/
# package.json) into build/bench-peers, which $DLOCK_PEERS_MODULES then
# names. Needs Node >= 20 (ioredis 6); returns 1 (and says why) without it.
DLOCK_PEERS_MODULES="${DLOCK_PEERS_MODULES:-$DLOCK_ROOT/build/bench-peers}"
ensure_node_peers() {
  local dir="$DLOCK_PEERS_MODULES"
  if ! command -v node >/dev/null 2>&1 || (($(node -p 'process.versions.node.split(".")[0]') < 20)); then
    log "Node >= 20 not found: the npm peers are skipped"
    return 1
  fi
  mkdir -p "$dir"
  if ! cmp -s "$DLOCK_ROOT/bench/peers/package.json" "$dir/package.json" || [[ ! -d $dir/node_modules/redlock ]] ||
    [[ ! -d $dir/node_modules/redis-semaphore ]]; then
    log "installing npm redlock, redis-semaphore, node-redisson and ioredis into $dir"
    cp "$DLOCK_ROOT/bench/peers/package.json" "$dir/"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null || return 1
  fi
  export DLOCK_PEERS_MODULES
}

# build_dir [DIR [CMAKE_ARGS...]]: configures DIR (default: build, relative
# to the repository root) with Ninja and RelWithDebInfo (later -D arguments
# win) and builds it on all cores ($DLOCK_JOBS jobs if set): every target, or
# only those named in $DLOCK_TARGETS (space-separated). ccache is used
# when installed (the top CMakeLists.txt makes it the compiler launcher).
# RelWithDebInfo here has line tables only (-g1): a quarter less to compile
# and link than -g, and a backtrace still names file and line.
DLOCK_RELWITHDEBINFO_FLAGS="-O2 -g1 -DNDEBUG"
build_dir() {
  local dir="${1:-build}"
  (($# > 0)) && shift
  [[ $dir == /* ]] || dir="$DLOCK_ROOT/$dir"
  local generator=(-G Ninja)
  # An existing tree keeps the generator it was made with.
  [[ -f "$dir/CMakeCache.txt" ]] && generator=()
  log "configuring $dir"
  cmake -S "$DLOCK_ROOT" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$DLOCK_RELWITHDEBINFO_FLAGS" "$@" || return 1
  log "building $dir"
  local targets=()
  # shellcheck disable=SC2206  # the list splits on purpose
  [[ -n ${DLOCK_TARGETS:-} ]] && targets=(--target ${DLOCK_TARGETS})
  cmake --build "$dir" -j "${DLOCK_JOBS:-$(nproc)}" ${targets[@]+"${targets[@]}"} || return 1
}

# A free TCP port on 127.0.0.1 (another process may take it before use).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# start_private_redis DIR: starts redis-server as a background child of this
# shell (not daemonized) on a free 127.0.0.1 port, files in DIR, no
# persistence; sets REDIS_PID and REDIS_PORT once it answers PING. Retries on
# another port if one was taken meanwhile. Extra arguments go to redis-server.
# It may be called again (with another DIR) for more servers: each one's PID
# is also kept in PRIVATE_REDIS_PIDS, so stop_private_redis stops them all.
# Call it directly, not in $(...), or the PIDs are lost with the subshell.
REDIS_PID=""
REDIS_PORT=""
PRIVATE_REDIS_PIDS=()
start_private_redis() {
  local dir="$1" attempt port i
  shift
  for attempt in 1 2 3 4 5; do
    port="$(free_port)"
    : >"$dir/redis.log"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --logfile "$dir/redis.log" \
      --save '' --appendonly no --daemonize no "$@" >"$dir/redis.out" 2>&1 &
    REDIS_PID=$!
    PRIVATE_REDIS_PIDS+=("$REDIS_PID")
    for ((i = 0; i < 200; i++)); do
      if ! pid_alive "$REDIS_PID"; then
        stop_redis_pid "$REDIS_PID"  # reaps it and forgets its PID
        REDIS_PID=""
        break
      fi
      if [[ "$(timeout 1 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" == PONG ]]; then
        # shellcheck disable=SC2034  # read by the scripts that source this file
        REDIS_PORT="$port"
        log "redis-server $REDIS_PID on 127.0.0.1:$port"
        return 0
      fi
      sleep 0.05
    done
    if [[ -n $REDIS_PID ]] || ! grep -qs 'Address already in use' "$dir/redis.log" "$dir/redis.out"; then
      tail -n 20 "$dir/redis.log" "$dir/redis.out" >&2 || true
      [[ -z $REDIS_PID ]] || stop_redis_pid "$REDIS_PID"
      return 1
    fi
    log "port $port was taken (attempt $attempt), trying another"
  done
  return 1
}

# start_private_postgres: a PostgreSQL 15 cluster in a new temp dir (initdb,
# as the postgres user when root: initdb refuses root) on a free 127.0.0.1
# port, taking prepared transactions (2PC); sets PG_PORT and PG_DIR.
# stop_private_postgres stops it (fast) and
# removes the dir.
PG_PORT=""
PG_DIR=""
PG_BIN=/usr/lib/postgresql/15/bin
pg_owner() { if [[ $EUID -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# $PG_EXTRA_OPTS: more server options ("-c name=value ...").
start_private_postgres() {
  PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/dlock-pg-XXXXXX")"
  [[ $EUID -ne 0 ]] || chown postgres:postgres "$PG_DIR"
  pg_owner "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync \
    >"$PG_DIR/initdb.log" 2>&1 || { tail -n 20 "$PG_DIR/initdb.log" >&2; return 1; }
  PG_PORT="$(free_port)"
  pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 30 \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$PG_DIR -c max_prepared_transactions=64 ${PG_EXTRA_OPTS:-}" \
    start >/dev/null ||
    { tail -n 20 "$PG_DIR/server.log" >&2; return 1; }
  log "postgres on 127.0.0.1:$PG_PORT"
}
stop_private_postgres() {
  [[ -n $PG_DIR && -d $PG_DIR ]] || return 0
  pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
  PG_DIR=""
}

# start_private_zookeeper: a standalone ZooKeeper 3.8 (Debian's jar) in a new
# temp dir on a free 127.0.0.1 port; sets ZK_PORT, ZK_DIR and ZK_PID.
# stop_private_zookeeper stops it and removes the dir.
ZK_PORT=""
ZK_DIR=""
ZK_PID=""
start_private_zookeeper() {
  ZK_DIR="$(mktemp -d "${TMPDIR:-/tmp}/dlock-zk-XXXXXX")"
  ZK_PORT="$(free_port)"
  mkdir -p "$ZK_DIR/data"
  printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=srvr,ruok\n' \
    "$ZK_DIR" "$ZK_PORT" >"$ZK_DIR/zoo.cfg"
  java -Xmx512m -cp "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar" \
    -Dzookeeper.log.dir="$ZK_DIR" org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZK_DIR/zoo.cfg" \
    >"$ZK_DIR/server.log" 2>&1 &
  ZK_PID=$!
  local i
  for ((i = 0; i < 300; i++)); do
    [[ "$(exec 3<>"/dev/tcp/127.0.0.1/$ZK_PORT" && printf srvr >&3 && timeout 1 cat <&3)" == *Mode:* ]] 2>/dev/null &&
      { log "zookeeper on 127.0.0.1:$ZK_PORT"; return 0; }
    sleep 0.1
  done
  tail -n 20 "$ZK_DIR/server.log" >&2
  return 1
}
stop_private_zookeeper() {
  if [[ -n $ZK_PID ]]; then
    kill "$ZK_PID" 2>/dev/null || true
    wait "$ZK_PID" 2>/dev/null || true  # 143: it died of the SIGTERM, as asked
  fi
  ZK_PID=""
  [[ -n $ZK_DIR ]] && rm -rf "$ZK_DIR"
  ZK_DIR=""
}

# start_private_etcd: one etcd member (Debian's etcd-server) on free
# loopback ports in a temp dir, fsyncing as deployed; sets ETCD_PORT.
start_private_etcd() {
  ETCD_DIR="$(mktemp -d "${TMPDIR:-/tmp}/dlock-etcd-XXXXXX")"
  ETCD_PORT="$(free_port)"
  local peer
  peer="$(free_port)"
  etcd --name bench --data-dir "$ETCD_DIR/data" --listen-client-urls "http://127.0.0.1:$ETCD_PORT"     --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$peer"     --initial-advertise-peer-urls "http://127.0.0.1:$peer" --initial-cluster "bench=http://127.0.0.1:$peer"     --logger zap --log-outputs "$ETCD_DIR/etcd.log" >"$ETCD_DIR/etcd.out" 2>&1 &
  ETCD_PID=$!
  local i
  for ((i = 0; i < 300; i++)); do
    ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:$ETCD_PORT" endpoint health >/dev/null 2>&1 &&
      { log "etcd on 127.0.0.1:$ETCD_PORT"; return 0; }
    sleep 0.1
  done
  tail -n 20 "$ETCD_DIR/etcd.log" >&2
  return 1
}
stop_private_etcd() {
  if [[ -n ${ETCD_PID:-} ]]; then
    kill "$ETCD_PID" 2>/dev/null || true
    wait "$ETCD_PID" 2>/dev/null || true
  fi
  ETCD_PID=""
  [[ -n ${ETCD_DIR:-} ]] && rm -rf "$ETCD_DIR"
  ETCD_DIR=""
}

# stop_redis_pid PID: stops one server that start_private_redis started
# (SIGTERM, then SIGKILL after 5 s), reaps it and drops it from
# PRIVATE_REDIS_PIDS. Any other PID is left alone.
stop_redis_pid() {
  local pid="$1" p i keep=()
  for p in "${PRIVATE_REDIS_PIDS[@]}"; do
    [[ $p == "$pid" ]] || keep+=("$p")
  done
  ((${#keep[@]} < ${#PRIVATE_REDIS_PIDS[@]})) || return 0
  PRIVATE_REDIS_PIDS=("${keep[@]}")
  [[ $REDIS_PID != "$pid" ]] || REDIS_PID=""
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    pid_alive "$pid" || break
    sleep 0.05
  done
  if pid_alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  wait "$pid" 2>/dev/null || true
}

# start_private_cluster N DIR: a Redis Cluster of N masters (no replicas) in
# DIR/node-1..N, each started by start_private_redis with an explicit bus
# port (a free one, so no port needs +10000 free), met and given an even
# share of the 16384 slots; sets CLUSTER_PORTS and CLUSTER_URL once every node
# reports cluster_state:ok. stop_private_cluster stops its nodes (and
# stop_private_redis does with the rest).
CLUSTER_PORTS=()
CLUSTER_PIDS=()
CLUSTER_URL=""
start_private_cluster() {
  local n="$1" dir="$2" i first lo hi ok p
  CLUSTER_PORTS=()
  CLUSTER_PIDS=()
  for ((i = 1; i <= n; i++)); do
    mkdir -p "$dir/node-$i"
    start_private_redis "$dir/node-$i" --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-port "$(free_port)" --cluster-node-timeout 5000 || return 1
    CLUSTER_PORTS+=("$REDIS_PORT")
    CLUSTER_PIDS+=("$REDIS_PID")
  done
  first="${CLUSTER_PORTS[0]}"
  for ((i = 1; i < n; i++)); do
    timeout 10 redis-cli -h 127.0.0.1 -p "${CLUSTER_PORTS[i]}" CLUSTER MEET 127.0.0.1 "$first" \
      "$(timeout 10 redis-cli -h 127.0.0.1 -p "$first" CONFIG GET cluster-port | tail -n 1)" >/dev/null || return 1
  done
  for ((i = 0; i < n; i++)); do
    lo=$((16384 * i / n))
    hi=$((16384 * (i + 1) / n - 1))
    timeout 10 redis-cli -h 127.0.0.1 -p "${CLUSTER_PORTS[i]}" CLUSTER ADDSLOTSRANGE "$lo" "$hi" >/dev/null || return 1
  done
  for ((i = 0; i < 400; i++)); do
    ok=1
    for p in "${CLUSTER_PORTS[@]}"; do
      timeout 5 redis-cli -h 127.0.0.1 -p "$p" CLUSTER INFO | grep -q '^cluster_state:ok' || { ok=0; break; }
      [[ "$(timeout 5 redis-cli -h 127.0.0.1 -p "$p" CLUSTER INFO | tr -d '\r' | sed -n 's/^cluster_size://p')" == "$n" ]] ||
        { ok=0; break; }
    done
    if ((ok)); then
      CLUSTER_URL="redis-cluster://$(printf '127.0.0.1:%s,' "${CLUSTER_PORTS[@]}")"
      CLUSTER_URL="${CLUSTER_URL%,}"
      log "Redis Cluster of $n masters on ${CLUSTER_PORTS[*]}"
      return 0
    fi
    sleep 0.05
  done
  log "the cluster on ${CLUSTER_PORTS[*]} did not reach cluster_state:ok"
  return 1
}
stop_private_cluster() {
  local pid
  for pid in "${CLUSTER_PIDS[@]}"; do stop_redis_pid "$pid"; done
  CLUSTER_PIDS=()
  CLUSTER_PORTS=()
}

# stop_private_redis: stops every server start_private_redis started, newest
# first (a replica before its master). No-op if none is running.
stop_private_redis() {
  while ((${#PRIVATE_REDIS_PIDS[@]} > 0)); do
    stop_redis_pid "${PRIVATE_REDIS_PIDS[-1]}"
  done
}
