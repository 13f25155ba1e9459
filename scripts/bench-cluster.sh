#!/usr/bin/env bash
# bench-cluster.sh: a 3-node latch cluster against a 3-member etcd cluster
# (etcd's concurrency.Mutex), on this machine, on loopback, in one run
# (issue #14). A manual benchmark: not run by CI.
#
#   1. three etcd members (Debian's etcd-server) with data dirs in a temp
#      dir: lock+unlock cycles of concurrency.Mutex at 1 client, 16 clients,
#      and 16 clients x 16 goroutines (256 sessions: etcd's client has no
#      pipelining, so goroutines are its requests in flight), each goroutine
#      on a key of its own; one run of 16 goroutines on one shared key; then
#      the failover: SIGKILL the leader, time to the next grant;
#   2. three "latch serve" nodes (built from this tree) with data dirs in
#      the temp dir: "latch bench --target dlock --workload cycle" at 1,
#      16 and 16 x 16 (--pipeline 16), connections round-robin over the
#      three nodes (--addr A,B,C); one handoff run (16 connections on one
#      key); then the same failover.
#
# The etcd clients are pinned to one member each, the clients spread over
# the members like latch bench's connections. Every level runs $ROUNDS
# times (both runs are printed), with the members' CPU time (user+sys,
# /proc/<pid>/stat, summed over the three) per cycle. The failover
# (scripts/clusterbench failover) holds locks through a survivor (a session
# with a TTL; for latch also a leased lock), keeps a request waiting for
# them on the other survivor and a lock+unlock prober on each survivor,
# kills the leader, and reports when a survivor names a new leader, the
# first grant of a lock requested after the kill, and whether the held
# locks and the session outlived the failover (and, for latch, the
# session and lease expiries counted on a survivor: both must be 0).
#
# Usage: scripts/bench-cluster.sh [--quick]
#   --quick: one round of 1 s per level, no shared-key runs (under a minute)
# Knobs (environment): ROUNDS=2 DURATION=4s WARMUP=1s BASE_PORT=23300
#   OUT=<dir> (keep the raw results, one JSON a line, and the logs)
#   PROFILE=1 (a 10 s CPU profile of the latch leader during an extra
#   16 x 16 run, into OUT or the temp dir, and its top functions printed)
#
# Needs: etcd (apt-get install etcd-server), Go, curl, jq. It installs
# nothing. Everything it starts is killed, and its temp dir removed, on
# exit.
set -euo pipefail

QUICK=
[ "${1:-}" = "--quick" ] && QUICK=1
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-4s}
WARMUP=${WARMUP:-1s}
if [ -n "$QUICK" ]; then ROUNDS=1 DURATION=1s WARMUP=500ms; fi
# Below Linux's ephemeral port range (32768-60999).
BASE_PORT=${BASE_PORT:-23300}
OUT=${OUT:-}
PROFILE=${PROFILE:-}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

for tool in etcd go curl jq; do
	if ! command -v "$tool" >/dev/null; then
		case $tool in
		etcd) echo "bench-cluster: etcd is missing: apt-get install -y etcd-server" >&2 ;;
		*) echo "bench-cluster: $tool is missing" >&2 ;;
		esac
		exit 1
	fi
done

TMP=$(mktemp -d -t bench-cluster.XXXXXX)
PIDS=()
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

log "building latch and clusterbench into $TMP"
go build -o "$TMP/latch" ./cmd/latch
(cd scripts/clusterbench && go build -o "$TMP/clusterbench" .)
RESULTS=$TMP/results.jsonl
: >"$RESULTS"

# record SYSTEM CASE ROUND: append the JSON on stdin, labelled.
record() {
	jq -c --arg s "$1" --arg c "$2" --arg r "$3" '. + {system: $s, case: $c, round: ($r | tonumber)}' >>"$RESULTS"
}

# wait_until SECONDS CMD...: run CMD every 0.1 s until it succeeds.
wait_until() {
	local n=$(($1 * 10))
	shift
	for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "bench-cluster: timed out waiting for: $*" >&2
	return 1
}

LEVELS=("1 1" "16 1" "16 16") # conns, in flight per connection

# ---- etcd ----
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
	for lv in "${LEVELS[@]}"; do
		set -- $lv
		log "etcd round $r: $1 x $2"
		timeout 120 "$TMP/clusterbench" etcd-cycle --endpoints "$ETCD_EPS" --conns "$1" --inflight "$2" \
			--duration "$DURATION" --warmup "$WARMUP" --server-pid "$ETCD_PIDLIST" | record etcd "$1x$2" "$r"
	done
done
if [ -z "$QUICK" ]; then
	log "etcd: 16 goroutines on one key"
	timeout 120 "$TMP/clusterbench" etcd-cycle --endpoints "$ETCD_EPS" --conns 16 --inflight 1 --shared-key \
		--duration "$DURATION" --warmup "$WARMUP" --server-pid "$ETCD_PIDLIST" | record etcd shared16 1
fi
log "etcd: failover"
timeout 90 "$TMP/clusterbench" failover --system etcd --endpoints "$ETCD_EPS" --pids "$ETCD_PIDLIST" | record etcd failover 1
for p in "${ETCD_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${ETCD_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done

# ---- latch ----
RAFT=() DLOCK=() ADMIN=() IDS=() LATCH_PIDS=() initial=
for i in 1 2 3; do
	RAFT+=("127.0.0.1:$((BASE_PORT + 20 + i))")
	DLOCK+=("127.0.0.1:$((BASE_PORT + 30 + i))")
	ADMIN+=("127.0.0.1:$((BASE_PORT + 50 + i))")
	IDS+=("n$i")
	initial+="${initial:+,}n$i=127.0.0.1:$((BASE_PORT + 20 + i))"
done
for i in 1 2 3; do
	"$TMP/latch" serve --data-dir "$TMP/latch$i" --node-id "n$i" --raft-addr "${RAFT[i - 1]}" \
		--initial-cluster "$initial" \
		--dlock-addr "${DLOCK[i - 1]}" --memcache-addr "127.0.0.1:$((BASE_PORT + 40 + i))" \
		--admin-addr "${ADMIN[i - 1]}" --redis-addr= \
		>"$TMP/latch$i.log" 2>&1 &
	PIDS+=($!) LATCH_PIDS+=($!)
done
for a in "${ADMIN[@]}"; do
	wait_until 30 sh -c "curl -sf http://$a/v1/cluster | jq -e '.leader != \"\"'"
done
DLOCK_ADDRS=$(IFS=,; echo "${DLOCK[*]}")
LATCH_PIDLIST=$(IFS=,; echo "${LATCH_PIDS[*]}")
leader_admin() {
	local id
	id=$(curl -sf "http://${ADMIN[0]}/v1/cluster" | jq -r .leader)
	echo "${ADMIN[${id#n} - 1]}"
}
log "latch cluster up: $DLOCK_ADDRS, leader at $(leader_admin)"

latch_bench() { # CONNS PIPELINE [more flags]
	local c=$1 p=$2
	shift 2
	timeout 120 "$TMP/latch" bench --target dlock --addr "$DLOCK_ADDRS" --conns "$c" --pipeline "$p" \
		--duration "$DURATION" --warmup "$WARMUP" --server-pid "$LATCH_PIDLIST" --json "$@"
}
for r in $(seq "$ROUNDS"); do
	for lv in "${LEVELS[@]}"; do
		set -- $lv
		log "latch round $r: $1 x $2"
		latch_bench "$1" "$2" --workload cycle | record latch "$1x$2" "$r"
	done
done
if [ -z "$QUICK" ]; then
	log "latch: 16 connections on one key (handoff)"
	latch_bench 16 1 --workload handoff | record latch shared16 1
fi
if [ -n "$PROFILE" ]; then
	la=$(leader_admin)
	log "latch: 16 x 16 with a 10 s CPU profile of the leader ($la)"
	curl -sf -o "$TMP/latch-leader.pprof" "http://$la/debug/pprof/profile?seconds=10" &
	prof=$!
	DURATION=12s latch_bench 16 16 --workload cycle | record latch profiled16x16 1
	wait "$prof" || true
	go tool pprof -top -nodecount=40 "$TMP/latch" "$TMP/latch-leader.pprof" 2>/dev/null | head -50 >&2 || true
fi
log "latch: failover"
timeout 90 "$TMP/clusterbench" failover --system latch --dlock "$DLOCK_ADDRS" \
	--admin "$(IFS=,; echo "${ADMIN[*]}")" --ids "$(IFS=,; echo "${IDS[*]}")" --pids "$LATCH_PIDLIST" |
	record latch failover 1

# ---- report ----
jq -rs -f /dev/stdin "$RESULTS" <<'JQ'
def k: if . == null then "-" elif . >= 1000 then ((. / 100 | round) / 10 | tostring) + "k" else (round | tostring) end;
def ms: if . == null then "-" else ((. / 10 | round) / 100 | tostring) + " ms" end;
def sec: if . == null or . < 0 then "none" else ((. / 10 | round) / 100 | tostring) + " s" end;
def x: if . == null then "-" else ((. * 10 | round) / 10 | tostring) + "×" end;
def mean: if length == 0 then null else add / length end;
def runs(f): map(f) | map(if . == null then "-" else . end) | join(" / ");
def cyc(s; c): map(select(.system == s and .case == c)) | sort_by(.round);
def rate: if .handoff then .handoff.handoffs_per_sec else .ops_per_sec end;
def row: "| " + join(" | ") + " |";
. as $all
| ["1x1", "16x1", "16x16"] as $levels
| "### Lock+unlock cycles: etcd concurrency.Mutex vs latch dlock (every run: run 1 / run 2)",
  "",
  "| level (conns × in flight) | etcd cycles/s | latch cycles/s | latch/etcd (means) | p50 etcd / latch | p99 etcd / latch | server CPU µs/cycle etcd / latch | errors |",
  "|---|---|---|---|---|---|---|---|",
  ($levels[] as $l | ($all | cyc("etcd"; $l)) as $e | ($all | cyc("latch"; $l)) as $m
   | [$l, ($e | runs(.ops_per_sec | k)), ($m | runs(.ops_per_sec | k)),
      ((($m | map(.ops_per_sec) | mean) / ($e | map(.ops_per_sec) | mean)) | x),
      (($e | runs(.latency.p50_us | ms)) + " — " + ($m | runs(.latency.p50_us | ms))),
      (($e | runs(.latency.p99_us | ms)) + " — " + ($m | runs(.latency.p99_us | ms))),
      (($e | runs(.server_cpu.total_us_per_op | if . == null then null else round end)) + " — " + ($m | runs(.server_cpu.total_us_per_op | if . == null then null else round end))),
      ([$e[], $m[]] | map(.errors) | add | tostring)] | row),
  (($all | cyc("etcd"; "shared16")) as $e | ($all | cyc("latch"; "shared16")) as $m
   | if ($e | length) == 0 then empty else
     (["16 on one key (grants/s)", ($e | runs(rate | k)), ($m | runs(rate | k)), ((($m | map(rate) | mean) / ($e | map(rate) | mean)) | x),
       (($e | runs(.latency.p50_us | ms)) + " — " + ($m | runs(.handoff.handoff_latency.p50_us | ms))),
       (($e | runs(.latency.p99_us | ms)) + " — " + ($m | runs(.handoff.handoff_latency.p99_us | ms))), "-",
       ([$e[], $m[]] | map(.errors) | add | tostring)] | row) end),
  "",
  "### Failover: SIGKILL of the leader",
  "",
  "| measure | etcd | latch |",
  "|---|---|---|",
  (($all | cyc("etcd"; "failover")[0]) as $e | ($all | cyc("latch"; "failover")[0]) as $m
   | (["new leader named", ($e.elected_ms | sec), ($m.elected_ms | sec)] | row),
     (["first grant of a lock asked after the kill", ($e.first_grant_ms | sec), ($m.first_grant_ms | sec)] | row),
     (["longest pause between a prober's grants", ($e.max_gap_ms | sec), ($m.max_gap_ms | sec)] | row),
     (["held locks still held, session alive", "\($e.held_after), \($e.session_alive)", "\($m.held_after), \($m.session_alive)"] | row),
     (["waiter granted after the release", "\($e.waiter_granted)", "\($m.waiter_granted)"] | row),
     (["session / lease expiries on a survivor", "-", "\($m.session_expiries // "-") / \($m.lease_expiries // "-")"] | row)),
  "",
  "### Targets (issue #14)",
  "",
  "| measure | etcd | latch | ratio | target | met? |",
  "|---|---|---|---|---|---|",
  (($all | cyc("latch"; "16x16")) as $m16 | ($all | cyc("etcd"; "16x16")) as $e16
   | ($all | cyc("latch"; "16x1")) as $m1 | ($all | cyc("etcd"; "16x1")) as $e1
   | ($all | cyc("latch"; "failover")[0]) as $f | ($all | cyc("etcd"; "failover")[0]) as $ef
   | ($m16 | map(.ops_per_sec) | mean) as $r16 | ($e16 | map(.ops_per_sec) | mean) as $er16
   | ($m16 | map(.latency.p99_us) | max) as $p99
   | (($m1 | map(.ops_per_sec) | mean) / ($e1 | map(.ops_per_sec) | mean)) as $x16
   | (["cycles/s at 16 × 16 (mean of runs)", ($er16 | k), ($r16 | k), (($r16 / $er16) | x), "≥ 20k", (if $r16 >= 20000 then "yes" else "NO" end)] | row),
     (["p99 at 16 × 16 (worst run)", ($e16 | map(.latency.p99_us) | max | ms), ($p99 | ms), "-", "< 15 ms", (if $p99 < 15000 then "yes" else "NO" end)] | row),
     (["cycles/s at 16 connections", ($e1 | map(.ops_per_sec) | mean | k), ($m1 | map(.ops_per_sec) | mean | k), ($x16 | x), "≥ 10× etcd", (if $x16 >= 10 then "yes" else "NO" end)] | row),
     (["first grant after the leader's SIGKILL", ($ef.first_grant_ms | sec), ($f.first_grant_ms | sec), "-", "≤ 2 s", (if $f.first_grant_ms >= 0 and $f.first_grant_ms <= 2000 then "yes" else "NO" end)] | row),
     (["leases/sessions ended by the failover", (if $ef.held_after and $ef.session_alive then "0" else "some" end),
       (if $f.held_after and $f.session_alive and ($f.session_expiries // 0) == 0 and ($f.lease_expiries // 0) == 0 then "0" else "some" end), "-", "0",
       (if $f.held_after and $f.session_alive and ($f.session_expiries // 0) == 0 and ($f.lease_expiries // 0) == 0 then "yes" else "NO" end)] | row)),
  "",
  ($all | map(select(.notes)) | map("note (\(.system) failover): " + (.notes | join("; "))) | .[])
JQ
log "done${OUT:+; raw results and logs in $OUT}"
