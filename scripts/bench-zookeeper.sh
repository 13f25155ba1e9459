#!/usr/bin/env bash
# bench-zookeeper.sh: a 3-node Apache ZooKeeper ensemble (Debian's
# zookeeper 3.8) beside a 3-node latch cluster serving ZooKeeper's
# protocol (--zookeeper-addr), on this machine, on loopback, in one run
# (issue #28). A manual benchmark: not run by CI.
#
#   1. both start, each node with a fresh data dir in a temp dir:
#      ZooKeeper as Debian's zkServer would (QuorumPeerMain, tickTime=2000,
#      initLimit=5, syncLimit=2, forceSync=yes, its default: the
#      transaction log is forced to disk before a write is acked), latch
#      as "latch serve --data-dir" with its ZooKeeper front end alone
#      (every Raft log append fdatasync'd before it is acked);
#   2. scripts/zkbench cycle (go-zookeeper v1.0.4 with the lock recipe
#      of ZooKeeper's documentation: create EPHEMERAL_SEQUENTIAL,
#      getChildren, exists-watch the predecessor while not the lowest,
#      delete) at each level of $LEVELS: 1 session, 16 sessions, 16
#      sessions x 16 lockers (go-zookeeper pipelines a session's requests
#      on its connection), every locker on a lock of its own; 16 sessions
#      on one lock (hand-offs); every level on both, one right after the
#      other: ZooKeeper then latch in odd rounds, latch then ZooKeeper in
#      even ones (ABBA), after one unmeasured 16 x 16 warm-up run on each
#      (ZooKeeper's JIT compiles its hot paths) and 5 s of idle time, whose
#      CPU the report gives;
#   3. the failover, $REPS times on each: $FAILOVER_CLIENTS sessions
#      contend on one lock, the leader gets SIGKILL (ZooKeeper: the node
#      whose srvr says "Mode: leader"; latch: the node /v1/cluster names),
#      and zkbench failover times the first grant of a lock asked after
#      the kill, the first grant of any kind after it, and the longest
#      pause between grants; the killed node is then started again on its
#      data dir, and the next repetition waits until all three serve.
#
# Every session is given all three addresses: go-zookeeper picks one at
# random (each run reports where its sessions landed, and how many on the
# leader). CPU is the servers' user+sys time per cycle (per hand-off on
# one lock) over the measured time, from /proc/<pid>/stat, summed over
# the three nodes. The load generator runs on the same cores.
#
# It prints the results as Markdown tables, headed by the machine, the
# date and the commit. UPDATE_DOCS=1 also writes them into
# docs/benchmarks.md, between its lines "<!-- begin bench-zookeeper -->"
# and "<!-- end bench-zookeeper -->" (scripts/lib-docs.sh). Only a full
# run may: with --quick or LEVELS set it stops before it starts;
# UPDATE_DOCS=force writes such a run anyway, marked partial.
# DOCS_FILE=<file> writes another file.
#
# Usage: scripts/bench-zookeeper.sh [--quick]   (about 4 minutes on 2 cores)
#   --quick: one round of 1 s per level, no failover (about a minute)
# Knobs (environment): ROUNDS=2 DURATION=4s WARMUP=1s REPS=3
#   FAILOVER_CLIENTS=8 WARM_UP=8s (the unmeasured 16 x 16 run on each)
#   BASE_PORT=23500 ZK_JAVA_OPTS="-Xmx1g"
#   LEVELS="1 16 16x16 shared failover" (what runs: N is N sessions x 1
#   locker, NxM N sessions x M lockers; shared: 16 sessions on one lock;
#   failover: the failovers)
#   OUT=<dir> (keep the raw results, one JSON a line, the logs and
#   report.md)
#   PROFILE=1 (10 s CPU profiles of latch's nodes during an extra run at
#   PROFILE_LEVEL=16x16, into OUT or the temp dir as latch-nI.pprof, and
#   the leader's top functions printed)
#   UPDATE_DOCS=1|force DOCS_FILE=<file> (see above)
#
# Needs: zookeeper (apt-get install zookeeper: the jars, and java), Go,
# curl and jq. It installs nothing. Everything it starts is killed, and
# its temp dir removed, on exit.
set -euo pipefail

QUICK=
[ "${1:-}" = "--quick" ] && QUICK=1
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-4s}
WARMUP=${WARMUP:-1s}
REPS=${REPS:-3}
WARM_UP=${WARM_UP:-8s}
FAILOVER_CLIENTS=${FAILOVER_CLIENTS:-8}
ZK_JAVA_OPTS=${ZK_JAVA_OPTS:--Xmx1g}
ALL_LEVELS="1 16 16x16 shared failover"
partial=()
[ -z "$QUICK" ] || partial+=(--quick)
[ -z "${LEVELS:-}" ] || [ "$LEVELS" = "$ALL_LEVELS" ] || partial+=("LEVELS=$LEVELS")
LEVELS=${LEVELS:-$ALL_LEVELS}
if [ -n "$QUICK" ]; then
	ROUNDS=1 DURATION=1s WARMUP=500ms
	LEVELS=${LEVELS/failover/}
fi
# Below Linux's ephemeral port range (32768-60999); bench-cluster.sh
# uses 23300-23480.
BASE_PORT=${BASE_PORT:-23500}
OUT=${OUT:-}
PROFILE=${PROFILE:-}
PROFILE_LEVEL=${PROFILE_LEVEL:-16x16}
ZK_CP=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib-docs.sh
source scripts/lib-docs.sh
docs_guard bench-zookeeper "${partial[@]}"
log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

# LEVELS: CYCLES holds "CONNS INFLIGHT" per cycle level.
CYCLES=() SHARED= FAILOVER=
for l in $LEVELS; do
	case $l in
	shared) SHARED=1 ;;
	failover) FAILOVER=1 ;;
	*)
		if [[ ! $l =~ ^([1-9][0-9]*)(x([1-9][0-9]*))?$ ]]; then
			echo "bench-zookeeper: LEVELS: $l is not N, NxM, shared or failover" >&2
			exit 2
		fi
		CYCLES+=("${BASH_REMATCH[1]} ${BASH_REMATCH[3]:-1}")
		;;
	esac
done

if [[ ! $PROFILE_LEVEL =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]]; then
	echo "bench-zookeeper: PROFILE_LEVEL: $PROFILE_LEVEL is not NxM" >&2
	exit 2
fi

for tool in go curl jq java; do
	if ! command -v "$tool" >/dev/null; then
		echo "bench-zookeeper: $tool is missing${tool/java/: apt-get install -y zookeeper}" >&2
		exit 1
	fi
done
if [ ! -f /usr/share/java/zookeeper.jar ]; then
	echo "bench-zookeeper: /usr/share/java/zookeeper.jar is missing: apt-get install -y zookeeper" >&2
	exit 1
fi

TMP=$(mktemp -d -t bench-zookeeper.XXXXXX)
# Every process started and not yet waited for: one waited for is dropped
# (unpids), so that cleanup never signals a pid the system gave away since.
PIDS=()
unpids() { # PID...: wait for PIDs (already signalled) and drop them from PIDS
	local p q keep=()
	for p in "$@"; do wait "$p" 2>/dev/null || true; done
	for q in "${PIDS[@]}"; do
		for p in "$@"; do [ "$p" = "$q" ] && continue 2; done
		keep+=("$q")
	done
	PIDS=("${keep[@]}")
}
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		# Bounded: SIGKILL what has not ended after 5 s.
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [ -n "$OUT" ]; then
		mkdir -p "$OUT"
		cp "$TMP"/*.log "$TMP"/results.jsonl "$TMP"/report.md "$OUT"/ 2>/dev/null || true
		cp "$TMP"/*.pprof "$OUT"/ 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building latch and zkbench into $TMP"
go build -o "$TMP/latch" ./cmd/latch
go build -o "$TMP/zkbench" ./scripts/zkbench
REV=$(docs_commit)
RUN_DATE=$(docs_date)
RESULTS=$TMP/results.jsonl
: >"$RESULTS"
ZK_VERSION=$(dpkg-query -W -f '${Version}' zookeeper 2>/dev/null || echo "?")
JAVA_VERSION=$(java -version 2>&1 | head -1 | sed 's/.*version "\([^"]*\)".*/\1/')

# record SYSTEM CASE ROUND: append the JSON on stdin, labelled.
record() {
	jq -c --arg s "$1" --arg c "$2" --arg r "$3" \
		'. + {system: $s, case: $c, round: ($r | tonumber)}' >>"$RESULTS"
}

# wait_until SECONDS CMD...: run CMD every 0.1 s until it succeeds.
wait_until() {
	local n=$(($1 * 10))
	shift
	for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "bench-zookeeper: timed out waiting for: $*" >&2
	return 1
}

# Ports: BASE_PORT + 1-3 ZooKeeper's clients, 11-13 its quorum, 21-23 its
# elections; 31-33 latch's Raft, 41-43 its ZooKeeper clients, 51-53 its
# admin API.
ZK_ADDR=() LT_ADDR=() LT_ADMIN=() ZKP=() LTP=()
for i in 1 2 3; do
	ZK_ADDR+=("127.0.0.1:$((BASE_PORT + i))")
	LT_ADDR+=("127.0.0.1:$((BASE_PORT + 40 + i))")
	LT_ADMIN+=("127.0.0.1:$((BASE_PORT + 50 + i))")
done
ZK_SERVERS=$(IFS=,; echo "${ZK_ADDR[*]}")
LT_SERVERS=$(IFS=,; echo "${LT_ADDR[*]}")

# ---- ZooKeeper ----
start_zk() { # I: start (or restart, on its data dir) ZooKeeper node I
	local i=$1 dir=$TMP/zk$1 j
	if [ ! -f "$dir/zoo.cfg" ]; then
		mkdir -p "$dir/data"
		echo "$i" >"$dir/data/myid"
		{
			echo "tickTime=2000"
			echo "initLimit=5"
			echo "syncLimit=2"
			echo "dataDir=$dir/data"
			echo "clientPort=$((BASE_PORT + i))"
			echo "clientPortAddress=127.0.0.1"
			echo "maxClientCnxns=0"
			echo "admin.enableServer=false"
			echo "4lw.commands.whitelist=*"
			for j in 1 2 3; do
				echo "server.$j=127.0.0.1:$((BASE_PORT + 10 + j)):$((BASE_PORT + 20 + j))"
			done
		} >"$dir/zoo.cfg"
	fi
	# shellcheck disable=SC2086 # the options are words
	java $ZK_JAVA_OPTS -cp "$ZK_CP" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
		>>"$TMP/zookeeper$i.log" 2>&1 &
	PIDS+=($!)
	ZKP[i]=$!
}

zk_word() { # I WORD: the answer of ZooKeeper node I to a four-letter word
	timeout 2 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}" && printf %s "$2" >&3 && cat <&3' _ "${ZK_ADDR[$1 - 1]}" "$2" 2>/dev/null
}

zk_mode() { zk_word "$1" srvr | sed -n 's/^Mode: //p'; } # I

zk_leader() { # the index of ZooKeeper's leader, or nothing
	local i
	for i in 1 2 3; do
		[ "$(zk_mode "$i")" = leader ] && { echo "$i"; return 0; }
	done
	return 1
}

zk_whole() { # every ZooKeeper node serves, one of them the leader
	local i m leaders=0
	for i in 1 2 3; do
		m=$(zk_mode "$i")
		case $m in
		leader) leaders=$((leaders + 1)) ;;
		follower) ;;
		*) return 1 ;;
		esac
	done
	[ "$leaders" = 1 ]
}

# ---- latch ----
start_latch() { # I: start (or restart, on its data dir) latch node I
	local i=$1 j initial=
	for j in 1 2 3; do initial+="${initial:+,}n$j=127.0.0.1:$((BASE_PORT + 30 + j))"; done
	"$TMP/latch" serve --data-dir "$TMP/latch$i" --node-id "n$i" \
		--raft-addr "127.0.0.1:$((BASE_PORT + 30 + i))" --initial-cluster "$initial" \
		--zookeeper-addr "${LT_ADDR[i - 1]}" --admin-addr "${LT_ADMIN[i - 1]}" \
		--memcache-addr= --dlock-addr= --redis-addr= \
		>>"$TMP/latch$i.log" 2>&1 &
	PIDS+=($!)
	LTP[i]=$!
}

latch_view() { curl -sf --max-time 2 "http://${LT_ADMIN[$1 - 1]}/v1/cluster" | jq -r '.leader // ""'; } # I

latch_leader() { # the index of latch's leader, as a node names it, or nothing
	local i l
	for i in 1 2 3; do
		l=$(latch_view "$i" 2>/dev/null) || continue
		case $l in
		n[1-3]) echo "${l#n}"; return 0 ;;
		esac
	done
	return 1
}

latch_whole() { # every latch node names the same leader
	local a b c
	a=$(latch_view 1) && b=$(latch_view 2) && c=$(latch_view 3) || return 1
	[ -n "$a" ] && [ "$a" = "$b" ] && [ "$b" = "$c" ]
}

# Per system: its servers, pids, leader and wholeness.
servers_of() { if [ "$1" = zookeeper ]; then echo "$ZK_SERVERS"; else echo "$LT_SERVERS"; fi; }
pids_of() { if [ "$1" = zookeeper ]; then (IFS=,; echo "${ZKP[*]}"); else (IFS=,; echo "${LTP[*]}"); fi; }
leader_of() { if [ "$1" = zookeeper ]; then zk_leader; else latch_leader; fi; }
whole() { if [ "$1" = zookeeper ]; then zk_whole; else latch_whole; fi; }
addr_of() { # SYSTEM I: node I's client address
	if [ "$1" = zookeeper ]; then echo "${ZK_ADDR[$2 - 1]}"; else echo "${LT_ADDR[$2 - 1]}"; fi
}
restart() { if [ "$1" = zookeeper ]; then start_zk "$2"; else start_latch "$2"; fi; }

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for i in 1 2 3; do start_zk "$i"; start_latch "$i"; done
wait_until 60 zk_whole
wait_until 60 latch_whole
log "zookeeper $ZK_VERSION up: $ZK_SERVERS, leader $(zk_leader) (pids $(pids_of zookeeper))"
log "latch up: $LT_SERVERS, leader n$(latch_leader) (pids $(pids_of latch))"

# cycle SYSTEM CONNS INFLIGHT [flags]: one zkbench cycle run, JSON out.
cycle() {
	local sys=$1 c=$2 p=$3 l
	shift 3
	l=$(leader_of "$sys") || l=
	timeout 120 "$TMP/zkbench" cycle --name "$sys" --servers "$(servers_of "$sys")" --conns "$c" --inflight "$p" \
		--duration "$DURATION" --warmup "$WARMUP" --server-pid "$(pids_of "$sys")" \
		${l:+--leader "$(addr_of "$sys" "$l")"} "$@" 2>>"$TMP/zkbench.log"
}

say() { # the line of a result on stdin: for the log
	jq -r '"\(.server): \(if .handoff then "\(.handoff.handoffs_per_sec) hand-offs/s" else "\(.ops_per_sec) cycles/s" end), p50 \(.latency.p50_us) µs, p99 \(.latency.p99_us) µs, CPU \(.server_cpu.total_us_per_op // "-") µs (client \(.client_cpu_us_per_op // "-") µs), \(.on_leader // "?") of \(.landed | add) sessions on the leader, errors \(.errors)"'
}

ticks() { # PID...: their user+sys CPU time so far, in clock ticks (1/100 s)
	local p t=0 f
	for p in "$@"; do
		f=$(sed 's/.*) //' "/proc/$p/stat")
		set -- $f
		t=$((t + ${12} + ${13}))
	done
	echo "$t"
}

SYSTEMS=(zookeeper latch)
for s in "${SYSTEMS[@]}"; do
	log "$s: warm-up, 16 x 16 for $WARM_UP (not measured)"
	DURATION=$WARM_UP cycle "$s" 16 16 | record "$s" warmup 0
done
# The ensembles' CPU time when no client asks anything, both over the
# same 5 s.
z0=$(ticks "${ZKP[@]}") l0=$(ticks "${LTP[@]}")
sleep 5
z1=$(ticks "${ZKP[@]}") l1=$(ticks "${LTP[@]}")
IDLE="idle, the three nodes together: ZooKeeper $(((z1 - z0) * 10 / 5)) ms of CPU a second, latch $(((l1 - l0) * 10 / 5)) ms"
log "$IDLE"
for r in $(seq "$ROUNDS"); do
	order=("${SYSTEMS[@]}")
	[ $((r % 2)) = 1 ] || order=(latch zookeeper)
	for lv in "${CYCLES[@]}"; do
		set -- $lv
		for s in "${order[@]}"; do
			cycle "$s" "$1" "$2" | tee >(say | sed "s/^/$(date +%T) round $r, $1 x $2: /" >&2) | record "$s" "$1x$2" "$r"
		done
	done
	if [ -n "$SHARED" ]; then
		for s in "${order[@]}"; do
			cycle "$s" 16 1 --shared | tee >(say | sed "s/^/$(date +%T) round $r, 16 on one lock: /" >&2) | record "$s" shared16 "$r"
		done
	fi
done

if [ -n "$PROFILE" ]; then
	pl=$(latch_leader)
	log "latch: $PROFILE_LEVEL with a 10 s CPU profile of every node (the leader is n$pl)"
	profs=()
	for i in 1 2 3; do
		curl -sf -o "$TMP/latch-n$i.pprof" "http://${LT_ADMIN[i - 1]}/debug/pprof/profile?seconds=10" &
		profs+=($!)
	done
	DURATION=12s cycle latch "${PROFILE_LEVEL%x*}" "${PROFILE_LEVEL#*x}" |
		tee >(say | sed "s/^/$(date +%T) profiled: /" >&2) | record latch "profiled$PROFILE_LEVEL" 1
	wait "${profs[@]}" || true
	go tool pprof -top -nodecount=40 "$TMP/latch" "$TMP/latch-n$pl.pprof" 2>/dev/null | head -50 >&2 || true
fi

if [ -n "$FAILOVER" ]; then
	for r in $(seq "$REPS"); do
		for s in "${SYSTEMS[@]}"; do
			wait_until 60 whole "$s"
			sleep 1
			l=$(leader_of "$s")
			if [ "$s" = zookeeper ]; then pid=${ZKP[l]}; else pid=${LTP[l]}; fi
			log "$s failover $r: SIGKILL of the leader, node $l (pid $pid), $FAILOVER_CLIENTS sessions on one lock"
			timeout 90 "$TMP/zkbench" failover --servers "$(servers_of "$s")" --kill "$pid" \
				--killed-addr "$(addr_of "$s" "$l")" --clients "$FAILOVER_CLIENTS" 2>>"$TMP/zkbench.log" |
				tee >(jq -r '"first grant asked after the kill \(.first_grant_ms) ms, next grant \(.next_grant_ms) ms, longest pause \(.max_gap_ms) ms, errors \(.errors)"' |
					sed "s/^/$(date +%T) $s failover $r: /" >&2) |
				jq -c --arg l "$l" --arg a "$(addr_of "$s" "$l")" '. + {killed_node: ($l | tonumber), killed_addr: $a}' |
				record "$s" failover "$r"
			unpids "$pid"
			restart "$s" "$l"
		done
	done
	for s in "${SYSTEMS[@]}"; do wait_until 60 whole "$s"; done
fi

# ---- report ----
REPORT=$TMP/report.md
{
docs_header "$RUN_DATE" "$REV"
echo "ZooKeeper $ZK_VERSION (Debian; OpenJDK $JAVA_VERSION, $ZK_JAVA_OPTS; tickTime=2000, initLimit=5, syncLimit=2, forceSync=yes: its transaction log forced to disk before a write is acked), 3 nodes; latch, 3 nodes (every Raft log append fdatasync'd before it is acked), its ZooKeeper front end alone. All data dirs in $(dirname "$TMP") ($(df -T "$TMP" | awk 'NR == 2 {print $2}'))."
echo "Client: go-zookeeper v1.0.4, the documentation's lock recipe, every session given the three addresses. Levels: ${LEVELS}; $ROUNDS round(s) of $DURATION after $WARMUP of warm-up, ZooKeeper and latch alternating (ABBA), after a $WARM_UP 16 × 16 warm-up on each."
echo "Servers $IDLE. The load generator (go-zookeeper) runs on the same cores; its own CPU per cycle is in the table."
echo "Load average (1, 5, 15 min) at the start: $LOAD_START; at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
levels_json=[]
[ ${#CYCLES[@]} = 0 ] || levels_json=$(printf '%s\n' "${CYCLES[@]}" | jq -R 'split(" ") | .[0] + "x" + .[1]' | jq -sc .)
jq -rs --argjson levels "$levels_json" -f /dev/stdin "$RESULTS" <<'JQ'
def k: if . == null then "-" elif . >= 1000 then ((. / 100 | round) / 10 | tostring) + "k" else (round | tostring) end;
def ms: if . == null then "-" else ((. / 10 | round) / 100 | tostring) + " ms" end;
def sec: if . == null or . < 0 then "none" else ((. / 10 | round) / 100 | tostring) + " s" end;
def x: if . == null then "-" else ((. * 100 | round) / 100 | tostring) + "×" end;
def cpu: if . == null then "-" elif . >= 100 then (round | tostring) else ((. * 10 | round) / 10 | tostring) end;
def mean: map(select(. != null)) | if length == 0 then null else add / length end;
def ratio($a; $b): if $a == null or $b == null or $b == 0 then null else $a / $b end;
def runs(f): map(f) | map(if . == null then "-" else . end) | join(" / ");
def sel(s; c): map(select(.system == s and .case == c)) | sort_by(.round);
def rate: if .handoff then .handoff.handoffs_per_sec else .ops_per_sec end;
def p50: if .handoff then .handoff.handoff_latency.p50_us else .latency.p50_us end;
def p99: if .handoff then .handoff.handoff_latency.p99_us else .latency.p99_us end;
def lvl: if . == "shared16" then "16 on one lock (hand-offs/s)" else sub("x"; " × ") end;
def row: "| " + join(" | ") + " |";
def onleader: "\(.on_leader // "?")/\(.landed | add)";
. as $all
| ($levels + ["shared16"]) as $cases
| ($cases | map(. as $c | {c: $c, z: ($all | sel("zookeeper"; $c)), l: ($all | sel("latch"; $c))})
   | map(select((.z | length) > 0 or (.l | length) > 0))) as $rows
| (if ($rows | length) == 0 then empty else
  ("### Lock+unlock cycles of the recipe: ZooKeeper vs latch (every run: run 1 / run 2 / ...)",
  "",
  "A cycle: create EPHEMERAL_SEQUENTIAL, getChildren, delete (on one lock, also exists-watch of the predecessor and the wait). Latency: a whole cycle, from the create sent to the delete answered; on one lock, the hand-off (one session's delete sent to the next one's grant). CPU: the three nodes' user+sys time per cycle (per hand-off). Sessions on the leader: how many of the run's sessions the client put on the leader.",
  "",
  "| level (sessions × lockers) | ZooKeeper cycles/s | latch cycles/s | latch/ZooKeeper (means) | p50 ZooKeeper — latch | p99 ZooKeeper — latch | server CPU µs/cycle ZooKeeper — latch | load generator CPU µs/cycle ZooKeeper — latch | sessions on the leader ZooKeeper — latch | errors |",
  "|---|---|---|---|---|---|---|---|---|---|",
  ($rows[] | .z as $z | .l as $l
   | [(.c | lvl), ($z | runs(rate | k)), ($l | runs(rate | k)),
      (ratio($l | map(rate) | mean; $z | map(rate) | mean) | x),
      (($z | runs(p50 | ms)) + " — " + ($l | runs(p50 | ms))),
      (($z | runs(p99 | ms)) + " — " + ($l | runs(p99 | ms))),
      (($z | runs(.server_cpu.total_us_per_op | cpu)) + " — " + ($l | runs(.server_cpu.total_us_per_op | cpu))),
      (($z | runs(.client_cpu_us_per_op | cpu)) + " — " + ($l | runs(.client_cpu_us_per_op | cpu))),
      (($z | runs(onleader)) + " — " + ($l | runs(onleader))),
      ([$z[], $l[]] | map(.errors) | add | tostring)] | row),
  "") end),
  (($all | sel("zookeeper"; "failover")) as $zf | ($all | sel("latch"; "failover")) as $lf
   | if ($zf | length) == 0 and ($lf | length) == 0 then empty else
  ("### Failover: SIGKILL of the leader (every repetition: 1 / 2 / ...)",
  "",
  "Sessions contending on one lock through the recipe, every session given the three addresses; the leader killed; the killed node started again before the next repetition.",
  "",
  "| measure | ZooKeeper | latch |",
  "|---|---|---|",
  (["first grant of a lock asked after the kill", ($zf | runs(.first_grant_ms | sec)), ($lf | runs(.first_grant_ms | sec))] | row),
  (["first grant of any lock after the kill", ($zf | runs(.next_grant_ms | sec)), ($lf | runs(.next_grant_ms | sec))] | row),
  (["longest pause between grants", ($zf | runs(.max_gap_ms | sec)), ($lf | runs(.max_gap_ms | sec))] | row),
  (["sessions on the killed node", ($zf | runs("\(.landed[.killed_addr] // 0)")), ($lf | runs("\(.landed[.killed_addr] // 0)"))] | row),
  (["grants in the second before the kill, and in the second after the first", ($zf | runs("\(.grants_before), \(.grants_after)")), ($lf | runs("\(.grants_before), \(.grants_after)"))] | row),
  (["client errors (retried), mutual exclusion violations", ($zf | runs("\(.errors), \(.violations)")), ($lf | runs("\(.errors), \(.violations)"))] | row),
  "") end),
  (($all | sel("zookeeper"; "failover")) as $zf | ($all | sel("latch"; "failover")) as $lf
   | if ($rows | length) == 0 then empty else
  ("### Targets (issue #28)",
  "",
  "| measure | ZooKeeper | latch | latch/ZooKeeper | target | met? |",
  "|---|---|---|---|---|---|",
  ($rows[] | (.z | map(rate) | mean) as $zr | (.l | map(rate) | mean) as $lr | ratio($lr; $zr) as $q
   | ["cycles/s at " + (.c | lvl) + " (means)", ($zr | k), ($lr | k), ($q | x), "≥ 1×", (if $q == null then "-" elif $q >= 1 then "yes" else "NO" end)] | row),
  (if ($lf | length) == 0 then empty else
   ($lf | map(.first_grant_ms) | if any(. < 0) then -1 else max end) as $worst
   | ["first grant after the leader's SIGKILL (worst repetition)", ($zf | map(.first_grant_ms) | max | sec), ($worst | sec), "-", "≤ 2 s",
      (if $worst >= 0 and $worst <= 2000 then "yes" else "NO" end)] | row end),
  "") end),
  ($all | map(select(.notes and .case == "failover")) | map("note (\(.system) failover \(.round)): " + (.notes | join("; "))) | .[])
JQ
} >"$REPORT"
echo
cat "$REPORT"
docs_update bench-zookeeper "$REPORT"
log "done${OUT:+; raw results, logs and report.md in $OUT}"
