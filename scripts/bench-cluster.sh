#!/usr/bin/env bash
# bench-cluster.sh: a 3-node latch cluster against a 3-member etcd cluster
# (etcd's concurrency.Mutex), and a durable single latch node, on this
# machine, on loopback, in one run (issue #14); with BASELINE, latch before
# and after a change in the same run. A manual benchmark: not run by CI.
#
#   1. three etcd members (Debian's etcd-server) with data dirs in a temp
#      dir: lock+unlock cycles of concurrency.Mutex at each level of
#      $LEVELS: 1 client, 16 clients, 16 clients x 16 goroutines (256
#      sessions: etcd's client has no pipelining, so goroutines are its
#      requests in flight), each goroutine on a key of its own; one run of
#      16 goroutines on one shared key (shared); then the failover
#      (failover): SIGKILL the leader, time to the next grant;
#   2. one durable single latch node ("latch serve --data-dir DIR": a
#      one-node Raft cluster on disk, every change fsync'd before it is
#      answered): "latch bench --target dlock --workload cycle" at the
#      same levels (16 x 16 is --pipeline 16), and the handoff run (16
#      connections on one key); no failover (there is no survivor);
#   3. three "latch serve" nodes with data dirs in the temp dir: the same
#      levels, connections round-robin over the three nodes (--addr A,B,C);
#      the handoff run; then the same failover.
#
# latch is built from this tree. BASELINE=<git revision> measures a change:
# the script also builds latch at that revision (git archive into its temp
# dir, never into the repository) as "latch-base", starts it beside latch
# in 2. and 3. (a single node or a cluster of its own, on ports of its
# own), and runs every level on both, one right after the other: base then
# new in odd rounds, new then base in even ones (ABBA), so that the
# machine's drift and the order hit both alike. It adds a table "Before
# and after": cycles/s and server CPU per cycle of both, and the ratios
# new/base. Every node of either binary gets a data dir of its own, fresh,
# in this run's temp dir: a data dir one revision wrote is never opened by
# another (their formats may differ). The load generator and clusterbench
# are the work tree's for every server.
#
# The etcd clients are pinned to one member each, the clients spread over
# the members like latch bench's connections. Every level runs $ROUNDS
# times (every run is printed), with the servers' CPU time (user+sys,
# /proc/<pid>/stat, summed over the nodes) per cycle. The failover
# (scripts/clusterbench failover) holds locks through a survivor (a session
# with a TTL; for latch also a leased lock), keeps a request waiting for
# them on the other survivor and a lock+unlock prober on each survivor,
# kills the leader, and reports when a survivor names a new leader, the
# first grant of a lock requested after the kill, and whether the held
# locks and the session outlived the failover (and, for latch, the
# session and lease expiries counted on a survivor: both must be 0).
#
# It prints the results as Markdown tables, headed by the machine, the
# date and the commit. UPDATE_DOCS=1 also writes them into
# docs/benchmarks.md, between its lines "<!-- begin bench-cluster -->"
# and "<!-- end bench-cluster -->" (scripts/lib-docs.sh). Only a full run
# may: with --quick, LEVELS, SKIP_ETCD, SKIP_SINGLE, SKIP_CLUSTER or
# BASELINE set it stops before it starts; UPDATE_DOCS=force writes such a
# run anyway, marked partial. DOCS_FILE=<file> writes another file.
#
# Usage: scripts/bench-cluster.sh [--quick]     (about 4 minutes on 2
#   cores; with BASELINE about 6)
#   --quick: one round of 1 s per level, no shared-key runs (about a
#   minute)
#   BASELINE=main~5 SKIP_ETCD=1 LEVELS="1 16" ROUNDS=3 DURATION=5s \
#     scripts/bench-cluster.sh   (before and after at 1 x 1 and 16 x 1 on
#     the single node and the cluster, no etcd, no failover: about 3 minutes)
# Knobs (environment): ROUNDS=2 DURATION=4s WARMUP=1s BASE_PORT=23300
#   LEVELS="1 16 16x16 shared failover" (what runs: N is N connections x
#   1 in flight, NxM N connections x M in flight, run in the order given;
#   shared: the runs on one key; failover: the failovers; --quick drops
#   shared)
#   BASELINE=<git revision> (see above)
#   SKIP_ETCD=1 SKIP_SINGLE=1 SKIP_CLUSTER=1 (leave out 1., 2. or 3.)
#   OUT=<dir> (keep the raw results, one JSON a line, and the logs)
#   PROFILE=1 (a 10 s CPU profile of the latch cluster's leader during an
#   extra 16 x 16 run, into OUT or the temp dir, and its top functions
#   printed)
#   UPDATE_DOCS=1|force DOCS_FILE=<file> (see above)
#
# Needs: etcd (apt-get install etcd-server; not with SKIP_ETCD=1), Go,
# curl, jq, and git with BASELINE. It installs nothing. Everything it
# starts is killed, and its temp dir removed, on exit.
set -euo pipefail

QUICK=
[ "${1:-}" = "--quick" ] && QUICK=1
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-4s}
WARMUP=${WARMUP:-1s}
ALL_LEVELS="1 16 16x16 shared failover"
partial=()
[ -z "$QUICK" ] || partial+=(--quick)
[ -z "${LEVELS:-}" ] || [ "$LEVELS" = "$ALL_LEVELS" ] || partial+=("LEVELS=$LEVELS")
for k in SKIP_ETCD SKIP_SINGLE SKIP_CLUSTER BASELINE; do
	[ -z "${!k:-}" ] || partial+=("$k=${!k}")
done
LEVELS=${LEVELS:-$ALL_LEVELS}
if [ -n "$QUICK" ]; then
	ROUNDS=1 DURATION=1s WARMUP=500ms
	LEVELS=${LEVELS/shared/}
fi
# Below Linux's ephemeral port range (32768-60999).
BASE_PORT=${BASE_PORT:-23300}
OUT=${OUT:-}
PROFILE=${PROFILE:-}
BASELINE=${BASELINE:-}
SKIP_ETCD=${SKIP_ETCD:-}
SKIP_SINGLE=${SKIP_SINGLE:-}
SKIP_CLUSTER=${SKIP_CLUSTER:-}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib-docs.sh
source scripts/lib-docs.sh
docs_guard bench-cluster "${partial[@]}"
log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

# LEVELS: CYCLES holds "CONNS INFLIGHT" per cycle level.
CYCLES=() SHARED= FAILOVER=
for l in $LEVELS; do
	case $l in
	shared) SHARED=1 ;;
	failover) FAILOVER=1 ;;
	*)
		if [[ ! $l =~ ^([1-9][0-9]*)(x([1-9][0-9]*))?$ ]]; then
			echo "bench-cluster: LEVELS: $l is not N, NxM, shared or failover" >&2
			exit 2
		fi
		CYCLES+=("${BASH_REMATCH[1]} ${BASH_REMATCH[3]:-1}")
		;;
	esac
done
# clusterbench (a module of its own, etcd's client) drives etcd and the
# failovers.
NEED_CLUSTERBENCH=
if [ -z "$SKIP_ETCD" ] || { [ -n "$FAILOVER" ] && [ -z "$SKIP_CLUSTER" ]; }; then NEED_CLUSTERBENCH=1; fi

tools=(go curl jq)
[ -z "$SKIP_ETCD" ] && tools+=(etcd)
[ -n "$BASELINE" ] && tools+=(git)
for tool in "${tools[@]}"; do
	if ! command -v "$tool" >/dev/null; then
		case $tool in
		etcd) echo "bench-cluster: etcd is missing: apt-get install -y etcd-server (or SKIP_ETCD=1)" >&2 ;;
		*) echo "bench-cluster: $tool is missing" >&2 ;;
		esac
		exit 1
	fi
done

TMP=$(mktemp -d -t bench-cluster.XXXXXX)
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
		cp "$TMP"/*.log "$TMP"/results.jsonl "$OUT"/ 2>/dev/null || true
		cp "$TMP"/*.pprof "$OUT"/ 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building latch${NEED_CLUSTERBENCH:+ and clusterbench} into $TMP"
go build -o "$TMP/latch" ./cmd/latch
[ -z "$NEED_CLUSTERBENCH" ] || (cd scripts/clusterbench && go build -o "$TMP/clusterbench" .)
REV=$(docs_commit)
RUN_DATE=$(docs_date)
BASE_REV=
if [ -n "$BASELINE" ]; then
	BASE_REV=$(git rev-parse --verify --short "$BASELINE^{commit}")
	log "building latch at $BASELINE ($BASE_REV) as latch-base"
	mkdir "$TMP/base-src"
	git archive "$BASE_REV" | tar -x -C "$TMP/base-src"
	(cd "$TMP/base-src" && go build -o "$TMP/latch-base" ./cmd/latch)
	rm -rf "$TMP/base-src"
fi
RESULTS=$TMP/results.jsonl
: >"$RESULTS"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# record SYSTEM SETUP CASE ROUND: append the JSON on stdin, labelled.
record() {
	jq -c --arg s "$1" --arg u "$2" --arg c "$3" --arg r "$4" \
		'. + {system: $s, setup: $u, case: $c, round: ($r | tonumber)}' >>"$RESULTS"
}

# wait_until SECONDS CMD...: run CMD every 0.1 s until it succeeds.
wait_until() {
	local n=$(($1 * 10))
	shift
	for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "bench-cluster: timed out waiting for: $*" >&2
	return 1
}

# ---- 1. etcd ----
if [ -z "$SKIP_ETCD" ]; then
	ETCD_CLIENT=() ETCD_PIDS=() initial=
	for i in 1 2 3; do
		ETCD_CLIENT+=("127.0.0.1:$((BASE_PORT + i))")
		initial+="${initial:+,}e$i=http://127.0.0.1:$((BASE_PORT + 10 + i))"
	done
	for i in 1 2 3; do
		etcd --name "e$i" --data-dir "$TMP/etcd$i" \
			--listen-client-urls "http://${ETCD_CLIENT[i - 1]}" --advertise-client-urls "http://${ETCD_CLIENT[i - 1]}" \
			--listen-peer-urls "http://127.0.0.1:$((BASE_PORT + 10 + i))" \
			--initial-advertise-peer-urls "http://127.0.0.1:$((BASE_PORT + 10 + i))" \
			--initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token "bench-$$" \
			>"$TMP/etcd$i.log" 2>&1 &
		PIDS+=($!) ETCD_PIDS+=($!)
	done
	for a in "${ETCD_CLIENT[@]}"; do wait_until 30 sh -c "curl -sf http://$a/health | grep -q true"; done
	ETCD_EPS=$(IFS=,; echo "${ETCD_CLIENT[*]}")
	ETCD_PIDLIST=$(IFS=,; echo "${ETCD_PIDS[*]}")
	log "etcd $(etcd --version | head -1 | awk '{print $3}') up: $ETCD_EPS"

	for r in $(seq "$ROUNDS"); do
		for lv in "${CYCLES[@]}"; do
			set -- $lv
			log "etcd round $r: $1 x $2"
			timeout 120 "$TMP/clusterbench" etcd-cycle --endpoints "$ETCD_EPS" --conns "$1" --inflight "$2" \
				--duration "$DURATION" --warmup "$WARMUP" --server-pid "$ETCD_PIDLIST" | record etcd cluster "$1x$2" "$r"
		done
	done
	if [ -n "$SHARED" ]; then
		log "etcd: 16 goroutines on one key"
		timeout 120 "$TMP/clusterbench" etcd-cycle --endpoints "$ETCD_EPS" --conns 16 --inflight 1 --shared-key \
			--duration "$DURATION" --warmup "$WARMUP" --server-pid "$ETCD_PIDLIST" | record etcd cluster shared16 1
	fi
	if [ -n "$FAILOVER" ]; then
		log "etcd: failover"
		timeout 90 "$TMP/clusterbench" failover --system etcd --endpoints "$ETCD_EPS" --pids "$ETCD_PIDLIST" |
			record etcd cluster failover 1
	fi
	for p in "${ETCD_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	unpids "${ETCD_PIDS[@]}"
fi

# ---- latch ----
# A running latch setup (SYSTEM/SETUP: latch or latch-base, single or
# cluster) is known by its nodes' comma-separated dlock addresses, admin
# addresses, ids and pids.
declare -A L_DLOCK=() L_ADMIN=() L_IDS=() L_PIDS=()
SYSTEMS=(latch)
[ -z "$BASELINE" ] || SYSTEMS=(latch-base latch)

# start_latch SYSTEM SETUP: start a durable single node (single) or three
# nodes (cluster) of SYSTEM's binary, each with a fresh data dir, and wait
# until they have a leader. Ports: BASE_PORT + the setup's offset + 1-3
# (Raft), 11-13 (dlock), 21-23 (memcached), 31-33 (admin); etcd has 1-13.
start_latch() {
	local sys=$1 setup=$2 bin=$TMP/$1 off n=3 i dir initial= redis=() node=()
	case $sys/$setup in
	latch/cluster) off=20 ;;
	latch-base/cluster) off=60 ;;
	latch/single) off=100 n=1 ;;
	latch-base/single) off=140 n=1 ;;
	esac
	# The Redis and ZooKeeper front ends are off where the binary has them.
	"$bin" serve -h 2>&1 | grep -q -- -redis-addr && redis=(--redis-addr=)
	"$bin" serve -h 2>&1 | grep -q -- -zookeeper-addr && redis+=(--zookeeper-addr=)
	local dl=() ad=() ids=() ps=()
	for i in $(seq "$n"); do
		initial+="${initial:+,}n$i=127.0.0.1:$((BASE_PORT + off + i))"
	done
	for i in $(seq "$n"); do
		dir=$TMP/data/$sys-$setup$i
		if [ -e "$dir" ]; then
			echo "bench-cluster: data dir $dir exists: every node starts on a fresh one" >&2
			exit 1
		fi
		mkdir -p "$TMP/data"
		node=()
		[ "$setup" = cluster ] && node=(--node-id "n$i" --raft-addr "127.0.0.1:$((BASE_PORT + off + i))" --initial-cluster "$initial")
		"$bin" serve --data-dir "$dir" "${node[@]}" \
			--dlock-addr "127.0.0.1:$((BASE_PORT + off + 10 + i))" \
			--memcache-addr "127.0.0.1:$((BASE_PORT + off + 20 + i))" \
			--admin-addr "127.0.0.1:$((BASE_PORT + off + 30 + i))" "${redis[@]}" \
			>"$TMP/$sys-$setup$i.log" 2>&1 &
		PIDS+=($!) ps+=($!)
		dl+=("127.0.0.1:$((BASE_PORT + off + 10 + i))")
		ad+=("127.0.0.1:$((BASE_PORT + off + 30 + i))")
		ids+=("n$i")
	done
	for a in "${ad[@]}"; do
		wait_until 30 sh -c "curl -sf http://$a/v1/cluster | jq -e '.leader != \"\"'"
	done
	local k=$sys/$setup
	L_DLOCK[$k]=$(IFS=,; echo "${dl[*]}")
	L_ADMIN[$k]=$(IFS=,; echo "${ad[*]}")
	L_IDS[$k]=$(IFS=,; echo "${ids[*]}")
	L_PIDS[$k]=$(IFS=,; echo "${ps[*]}")
	log "$sys $setup up: ${L_DLOCK[$k]}, leader at $(leader_admin "$k")"
}

stop_latch() { # SYSTEM SETUP
	local ps p
	IFS=, read -ra ps <<<"${L_PIDS[$1/$2]}"
	for p in "${ps[@]}"; do kill "$p" 2>/dev/null || true; done
	unpids "${ps[@]}"
}

leader_admin() { # SYSTEM/SETUP: the leader's admin address
	local id ad
	IFS=, read -ra ad <<<"${L_ADMIN[$1]}"
	id=$(curl -sf "http://${ad[0]}/v1/cluster" | jq -r .leader)
	case $id in
	n[0-9]*) echo "${ad[${id#n} - 1]}" ;;
	*) echo "${ad[0]}" ;;
	esac
}

latch_bench() { # SYSTEM/SETUP CONNS PIPELINE [more flags]
	local k=$1 c=$2 p=$3
	shift 3
	timeout 120 "$TMP/latch" bench --target dlock --addr "${L_DLOCK[$k]}" --conns "$c" --pipeline "$p" \
		--duration "$DURATION" --warmup "$WARMUP" --server-pid "${L_PIDS[$k]}" --json "$@"
}

# latch_setup SETUP: 2. or 3. for every system, alternating.
latch_setup() {
	local setup=$1 s r order lv
	for s in "${SYSTEMS[@]}"; do start_latch "$s" "$setup"; done
	for r in $(seq "$ROUNDS"); do
		order=("${SYSTEMS[@]}")
		[ $((r % 2)) = 1 ] || order=($(printf '%s\n' "${SYSTEMS[@]}" | tac))
		for lv in "${CYCLES[@]}"; do
			set -- $lv
			for s in "${order[@]}"; do
				log "$s $setup round $r: $1 x $2"
				latch_bench "$s/$setup" "$1" "$2" --workload cycle | record "$s" "$setup" "$1x$2" "$r"
			done
		done
	done
	if [ -n "$SHARED" ]; then
		for s in "${SYSTEMS[@]}"; do
			log "$s $setup: 16 connections on one key (handoff)"
			latch_bench "$s/$setup" 16 1 --workload handoff | record "$s" "$setup" shared16 1
		done
	fi
	if [ -n "$PROFILE" ] && [ "$setup" = cluster ]; then
		local la prof
		la=$(leader_admin latch/cluster)
		log "latch: 16 x 16 with a 10 s CPU profile of the leader ($la)"
		curl -sf -o "$TMP/latch-leader.pprof" "http://$la/debug/pprof/profile?seconds=10" &
		prof=$!
		DURATION=12s latch_bench latch/cluster 16 16 --workload cycle | record latch cluster profiled16x16 1
		wait "$prof" || true
		go tool pprof -top -nodecount=40 "$TMP/latch" "$TMP/latch-leader.pprof" 2>/dev/null | head -50 >&2 || true
	fi
	if [ -n "$FAILOVER" ] && [ "$setup" = cluster ]; then
		for s in "${SYSTEMS[@]}"; do
			log "$s: failover"
			timeout 90 "$TMP/clusterbench" failover --system latch --dlock "${L_DLOCK[$s/$setup]}" \
				--admin "${L_ADMIN[$s/$setup]}" --ids "${L_IDS[$s/$setup]}" --pids "${L_PIDS[$s/$setup]}" |
				record "$s" "$setup" failover 1
		done
	fi
	for s in "${SYSTEMS[@]}"; do stop_latch "$s" "$setup"; done
}

[ -n "$SKIP_SINGLE" ] || latch_setup single
[ -n "$SKIP_CLUSTER" ] || latch_setup cluster

# ---- report ----
REPORT=$TMP/report.md
{
docs_header "$RUN_DATE" "$REV"
echo "etcd $(if [ -z "$SKIP_ETCD" ]; then etcd --version | head -1 | awk '{print $3}'; else echo "not run"; fi). Levels: ${LEVELS}; $ROUNDS round(s) of $DURATION after $WARMUP of warm-up."
[ -z "$BASELINE" ] || echo "latch-base: $BASELINE$([ "$BASELINE" = "$BASE_REV" ] || echo " ($BASE_REV)")."
echo "Load average (1, 5, 15 min) at the start: $LOAD_START; at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
levels_json=[]
[ ${#CYCLES[@]} = 0 ] || levels_json=$(printf '%s\n' "${CYCLES[@]}" | jq -R 'split(" ") | .[0] + "x" + .[1]' | jq -sc .)
jq -rs --argjson levels "$levels_json" --arg rev "$REV" --arg base_rev "$BASE_REV" -f /dev/stdin "$RESULTS" <<'JQ'
def k: if . == null then "-" elif . >= 1000 then ((. / 100 | round) / 10 | tostring) + "k" else (round | tostring) end;
def ms: if . == null then "-" else ((. / 10 | round) / 100 | tostring) + " ms" end;
def sec: if . == null or . < 0 then "none" else ((. / 10 | round) / 100 | tostring) + " s" end;
def n: if . == null then "-" else (round | tostring) end;
def x: if . == null then "-" else ((. * 10 | round) / 10 | tostring) + "×" end;
def x3: if . == null then "-" else ((. * 1000 | round) / 1000 | tostring) + "×" end;
def cpu: if . == null then "-" elif . >= 100 then (round | tostring) else ((. * 10 | round) / 10 | tostring) end;
def mean: map(select(. != null)) | if length == 0 then null else add / length end;
def ratio($a; $b): if $a == null or $b == null or $b == 0 then null else $a / $b end;
def runs(f): map(f) | map(if . == null then "-" else . end) | join(" / ");
def sel(s; u; c): map(select(.system == s and .setup == u and .case == c)) | sort_by(.round);
def cyc(s; c): sel(s; "cluster"; c);
def rate: if .handoff then .handoff.handoffs_per_sec else .ops_per_sec end;
def p50: if .handoff then .handoff.handoff_latency.p50_us else .latency.p50_us end;
def p99: if .handoff then .handoff.handoff_latency.p99_us else .latency.p99_us end;
def ucpu: .server_cpu.total_us_per_op;
def lvl: if . == "shared16" then "16 on one key" else sub("x"; " × ") end;
def setupname: if . == "single" then "durable single node" else "3-node cluster" end;
def sysname: if . == "latch-base" then "latch-base (\($base_rev))" else "latch (\($rev))" end;
def row: "| " + join(" | ") + " |";
. as $all
| ($levels + ["shared16"]) as $cases
| ($all | map(select(.system != "etcd")) | map(.setup) | unique | sort_by(if . == "single" then 0 else 1 end)) as $setups
| ($all | map(.system) | unique) as $systems
| ($setups | map(. as $u | $cases[] as $c | ["latch-base", "latch"][] as $s | ($all | sel($s; $u; $c)) as $m
   | select(($m | length) > 0) | {u: $u, c: $c, s: $s, m: $m})) as $lr
| (if ($lr | length) == 0 then empty else
  ("### latch lock+unlock cycles (every run: run 1 / run 2 / ...)",
  "",
  "CPU: the nodes' user+sys CPU time per cycle (per hand-off on one key) over the measured time, summed over the nodes.",
  "",
  "| setup | build | level (conns × in flight) | cycles/s | p50 | p99 | server CPU µs/cycle | errors |",
  "|---|---|---|---|---|---|---|---|",
  ($lr[] | .m as $m
   | [(.u | setupname), (.s | sysname), (.c | lvl), ($m | runs(rate | k)), ($m | runs(p50 | ms)), ($m | runs(p99 | ms)),
      ($m | runs(ucpu | cpu)), ($m | map(.errors) | add | tostring)] | row),
  "") end),
  (if ($systems | index("latch-base")) == null then empty else
  ($setups | map(. as $u | $cases[] as $c | ($all | sel("latch-base"; $u; $c)) as $b | ($all | sel("latch"; $u; $c)) as $n
   | select(($b | length) > 0 and ($n | length) > 0)
   | {u: $u, c: $c, b: $b, n: $n,
      rr: ratio($n | map(rate) | mean; $b | map(rate) | mean),
      cr: ratio($n | map(ucpu) | mean; $b | map(ucpu) | mean),
      pr: ([$b[] as $bb | $n[] | select(.round == $bb.round) | ratio(ucpu; $bb | ucpu)] | map(x3) | join(" / "))})) as $ba
  | if ($ba | length) == 0 then empty else
  ("### Before and after: latch-base (\($base_rev)) → latch (\($rev))",
  "",
  "Means over the rounds; every level ran on both builds one after the other (base first in odd rounds, new first in even ones). Ratios are new/base: above 1× for cycles/s is faster, above 1× for CPU is more work per cycle, the measure that holds on a noisy machine.",
  "",
  "| setup | level | cycles/s base | cycles/s new | new/base | CPU µs/cycle base | CPU µs/cycle new | new/base | CPU new/base per round |",
  "|---|---|---|---|---|---|---|---|---|",
  ($ba[] | [(.u | setupname), (.c | lvl), (.b | map(rate) | mean | n), (.n | map(rate) | mean | n), (.rr | x3),
     (.b | map(ucpu) | mean | cpu), (.n | map(ucpu) | mean | cpu), (.cr | x3), .pr] | row),
  "",
  (($ba | map(select(.cr != null))) as $rs | ($ba | map(select(.rr != null))) as $ts
   | if ($rs | length) == 0 then "No level has the CPU of both builds."
     else ($rs | max_by(.cr)) as $w | ($ts | min_by(.rr)) as $t
     | ($rs | map(select(.cr > 1.05)) | map((.u | setupname) + " " + (.c | lvl) + " " + (.cr | x3))) as $over
     | ($ts | map(select(.rr < 1 / 1.05)) | map((.u | setupname) + " " + (.c | lvl) + " " + (.rr | x3))) as $slow
     | "Worst CPU ratio: " + ($w.cr | x3) + " (" + ($w.u | setupname) + ", " + ($w.c | lvl) + "); worst cycles/s ratio: " + ($t.rr | x3)
       + " (" + ($t.u | setupname) + ", " + ($t.c | lvl) + "). More than 5% more CPU per cycle: "
       + (if ($over | length) == 0 then "none" else ($over | join(", ")) end)
       + "; more than 5% fewer cycles/s: " + (if ($slow | length) == 0 then "none" else ($slow | join(", ")) end) + "."
     end),
  "") end end),
  (if ($systems | index("etcd")) == null or ($all | cyc("latch"; $levels[0]) | length) == 0 then empty else
  ("### Lock+unlock cycles: etcd concurrency.Mutex vs the latch cluster (every run: run 1 / run 2 / ...)",
  "",
  "| level (conns × in flight) | etcd cycles/s | latch cycles/s | latch/etcd (means) | p50 etcd / latch | p99 etcd / latch | server CPU µs/cycle etcd / latch | errors |",
  "|---|---|---|---|---|---|---|---|",
  ($levels[] as $l | ($all | cyc("etcd"; $l)) as $e | ($all | cyc("latch"; $l)) as $m
   | [($l | lvl), ($e | runs(.ops_per_sec | k)), ($m | runs(.ops_per_sec | k)),
      ((($m | map(.ops_per_sec) | mean) / ($e | map(.ops_per_sec) | mean)) | x),
      (($e | runs(.latency.p50_us | ms)) + " — " + ($m | runs(.latency.p50_us | ms))),
      (($e | runs(.latency.p99_us | ms)) + " — " + ($m | runs(.latency.p99_us | ms))),
      (($e | runs(ucpu | if . == null then null else round end)) + " — " + ($m | runs(ucpu | if . == null then null else round end))),
      ([$e[], $m[]] | map(.errors) | add | tostring)] | row),
  (($all | cyc("etcd"; "shared16")) as $e | ($all | cyc("latch"; "shared16")) as $m
   | if ($e | length) == 0 or ($m | length) == 0 then empty else
     (["16 on one key (grants/s)", ($e | runs(rate | k)), ($m | runs(rate | k)), ((($m | map(rate) | mean) / ($e | map(rate) | mean)) | x),
       (($e | runs(.latency.p50_us | ms)) + " — " + ($m | runs(.handoff.handoff_latency.p50_us | ms))),
       (($e | runs(.latency.p99_us | ms)) + " — " + ($m | runs(.handoff.handoff_latency.p99_us | ms))), "-",
       ([$e[], $m[]] | map(.errors) | add | tostring)] | row) end),
  "") end),
  (["etcd", "latch-base", "latch"] | map(. as $s | {s: $s, f: ($all | cyc($s; "failover")[0])}) | map(select(.f != null))) as $fo
  | (if ($fo | length) == 0 then empty else
  ("### Failover: SIGKILL of the leader",
  "",
  "| measure | " + ($fo | map(if .s == "etcd" then "etcd" else .s | sysname end) | join(" | ")) + " |",
  "|---" + ($fo | map("|---") | join("")) + "|",
  (["new leader named"] + ($fo | map(.f.elected_ms | sec)) | row),
  (["first grant of a lock asked after the kill"] + ($fo | map(.f.first_grant_ms | sec)) | row),
  (["longest pause between a prober's grants"] + ($fo | map(.f.max_gap_ms | sec)) | row),
  (["held locks still held, session alive"] + ($fo | map("\(.f.held_after), \(.f.session_alive)")) | row),
  (["waiter granted after the release"] + ($fo | map("\(.f.waiter_granted)")) | row),
  (["session / lease expiries on a survivor"] + ($fo | map(if .s == "etcd" then "-" else "\(.f.session_expiries // "-") / \(.f.lease_expiries // "-")" end)) | row),
  "") end),
  (if ($systems | index("etcd")) == null or ($all | map(select(.system == "latch" and .setup == "cluster")) | length) == 0 then empty else
  ("### Targets (issue #14)",
  "",
  "| measure | etcd | latch | ratio | target | met? |",
  "|---|---|---|---|---|---|",
  (($all | cyc("latch"; "16x16")) as $m16 | ($all | cyc("etcd"; "16x16")) as $e16
   | ($all | cyc("latch"; "16x1")) as $m1 | ($all | cyc("etcd"; "16x1")) as $e1
   | ($all | cyc("latch"; "failover")[0]) as $f | ($all | cyc("etcd"; "failover")[0]) as $ef
   | ($m16 | map(.ops_per_sec) | mean) as $r16 | ($e16 | map(.ops_per_sec) | mean) as $er16
   | ($m16 | map(.latency.p99_us) | max) as $p99
   | ratio($m1 | map(.ops_per_sec) | mean; $e1 | map(.ops_per_sec) | mean) as $x16
   | (if ($m16 | length) == 0 then empty else
      (["cycles/s at 16 × 16 (mean of runs)", ($er16 | k), ($r16 | k), (ratio($r16; $er16) | x), "≥ 20k", (if $r16 >= 20000 then "yes" else "NO" end)] | row),
      (["p99 at 16 × 16 (worst run)", ($e16 | map(.latency.p99_us) | max | ms), ($p99 | ms), "-", "< 15 ms", (if $p99 < 15000 then "yes" else "NO" end)] | row) end),
     (if ($m1 | length) == 0 then empty else
      (["cycles/s at 16 connections", ($e1 | map(.ops_per_sec) | mean | k), ($m1 | map(.ops_per_sec) | mean | k), ($x16 | x), "≥ 10× etcd", (if $x16 != null and $x16 >= 10 then "yes" else "NO" end)] | row) end),
     (if $f == null then empty else
      (["first grant after the leader's SIGKILL", ($ef.first_grant_ms | sec), ($f.first_grant_ms | sec), "-", "≤ 2 s", (if $f.first_grant_ms >= 0 and $f.first_grant_ms <= 2000 then "yes" else "NO" end)] | row),
      (["leases/sessions ended by the failover", (if $ef == null then "-" elif $ef.held_after and $ef.session_alive then "0" else "some" end),
        (if $f.held_after and $f.session_alive and ($f.session_expiries // 0) == 0 and ($f.lease_expiries // 0) == 0 then "0" else "some" end), "-", "0",
        (if $f.held_after and $f.session_alive and ($f.session_expiries // 0) == 0 and ($f.lease_expiries // 0) == 0 then "yes" else "NO" end)] | row) end)),
  "") end),
  ($all | map(select(.notes)) | map("note (\(.system) failover): " + (.notes | join("; "))) | .[])
JQ
} >"$REPORT"
echo
cat "$REPORT"
[ -z "$OUT" ] || { mkdir -p "$OUT" && cp "$REPORT" "$OUT"/; }
docs_update bench-cluster "$REPORT"
log "done${OUT:+; raw results, logs and report.md in $OUT}"
