#!/usr/bin/env bash
# bench-peers.sh: latch against Debian's yrmcds and memcached, on this
# machine, under the same load, with "latch bench".
#
# It installs the peers (apt) when they are missing, builds latch, starts the
# three servers on loopback ports (yrmcds and memcached with 2 worker threads
# each), and then:
#
#   1. memory (fresh servers, one round): "hold" takes and holds $LOCKS locks
#      and reports the server's memory per lock; "idle" opens $IDLE_CONNS
#      connections and reports the memory per connection;
#   2. speed (servers restarted, $ROUNDS rounds): every case runs against
#      latch, yrmcds and memcached in turn (A B C A B C ...), so that a
#      disturbance of the machine hits every server alike;
#
# and prints the medians and latch/peer ratios as Markdown tables, headed
# by the machine, the date and the commit. Raw results (one JSON per run)
# and the report (report.md) go to $OUT.
#
# UPDATE_DOCS=1 also writes the report into docs/benchmarks.md, between
# its lines "<!-- begin bench-peers -->" and "<!-- end bench-peers -->"
# (scripts/lib-docs.sh). Only a full run may: with ONLY, SKIP_MEMORY,
# BASELINE or FROM set it stops before it starts; UPDATE_DOCS=force writes
# such a run anyway, marked partial. DOCS_FILE=<file> writes another file.
# Every run passes the server's pid (--server-pid): the speed runs report
# the server's CPU time (user+sys, from /proc/<pid>/stat) per op over the
# measured time, the measure to trust on a noisy machine, where ops/s is not.
#
# BASELINE=<git revision> measures a change: the script builds latch at that
# revision too (git archive into its temporary directory, never into the
# repository), starts it as a fourth server, "latch-base", on ports of its
# own (BASE_PORT+7 to +9), runs every case against it too, in the same
# alternation (latch, latch-base, yrmcds, memcached), and adds a table
# "Before and after": ops/s and server CPU µs/op of latch-base and latch,
# their ratios, and memcached's CPU µs/op in the same run as a yardstick.
# The load generator is the work tree's for every server.
#
# LATCH_ARGS="<flags>" adds flags to latch serve (word-split), for example
# LATCH_ARGS="--memcache-loops 2"; BASE_ARGS gives latch-base's (default:
# LATCH_ARGS; BASE_ARGS= for none), so that BASELINE=HEAD with LATCH_ARGS
# alone compares a setting on one build.
#
# Usage: scripts/bench-peers.sh            (about 8 minutes on 2 cores,
#   about 11 with BASELINE)
#   BASELINE=HEAD scripts/bench-peers.sh   (the work tree against HEAD)
# Knobs (environment): ROUNDS=3 DURATION=3s WARMUP=1s CONNS=16 LOCKS=1000000
#   IDLE_CONNS=10000 OUT=<dir> BASE_PORT=22200 SKIP_MEMORY=1 FROM="<dir>..."
#   (report over earlier runs' OUT dirs, run nothing) ONLY=<regexp
#   of case names> BASELINE=<git revision> LATCH_ARGS BASE_ARGS (see above)
#   UPDATE_DOCS=1|force DOCS_FILE=<file> (see above)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3s}
WARMUP=${WARMUP:-1s}
CONNS=${CONNS:-16}
LOCKS=${LOCKS:-1000000}
IDLE_CONNS=${IDLE_CONNS:-10000}
# Below Linux's ephemeral range (32768-60999): the thousands of client
# connections a run opens leave their ports in TIME_WAIT for a minute, and
# a server cannot listen on such a port.
BASE_PORT=${BASE_PORT:-22200}
SKIP_MEMORY=${SKIP_MEMORY:-}
ONLY=${ONLY:-.}
BASELINE=${BASELINE:-}
BASE_REV=
LATCH_ARGS=${LATCH_ARGS:-}
BASE_ARGS=${BASE_ARGS-$LATCH_ARGS}

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib-docs.sh
source scripts/lib-docs.sh

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

# report_tables FILE...: the Markdown tables of the results in FILEs (one
# JSON object a line, as results.jsonl holds), medians over every round.
report_tables() {
	cat "$@" | jq -rs "$REPORT_JQ"
}
REPORT_JQ=$(cat <<'JQ'
def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def rate: if .handoff then .handoff.handoffs_per_sec else .ops_per_sec end;
def p99: if .handoff then .handoff.handoff_latency.p99_us else .latency.p99_us end;
def k: if . == null then "-" elif . >= 1000000 then ((. / 10000 | round) / 100 | tostring) + "M" elif . >= 1000 then ((. / 100 | round) / 10 | tostring) + "k" else (round | tostring) end;
def us: if . == null then "-" elif . >= 10000 then ((. / 100 | round) / 10 | tostring) + " ms" else (round | tostring) + " µs" end;
def x: if . == null then "-" else ((. * 100 | round) / 100 | tostring) + "×" end;
def bytes: if . == null or . < 0 then "-" else (round | tostring) + " B" end;
def ratio($a; $b): if $a == null or $b == null or $b == 0 then null else $a / $b end;
def cpu: if . == null then "-" else ((. * 100 | round) / 100 | tostring) end;
def row: "| " + join(" | ") + " |";
def order: if startswith("cycle-dlock") then 1 elif startswith("cycle") then 0 elif startswith("getset") then 2 elif startswith("handoff-dlock") then 4 else 3 end;

(map(select(.memory | not)) | group_by(.case) | map({key: .[0].case, value: (group_by(.server) | map({key: .[0].server, value: {
	rate: (map(rate) | median), p99: (map(p99) | median), errors: (map(.errors) | add), recipe: .[0].recipe,
	wait99: (map(.handoff.wait.p99_us // empty) | median), fair: (map(.handoff.fairness // empty) | median),
	polls: (map(.handoff.wasted_polls_per_sec // empty) | median),
	cpu: (map(.server_cpu.total_us_per_op // empty) | median), rev: .[0].rev}}) | from_entries)}) | from_entries) as $m
| ([$m["handoff-text"], $m["handoff-binary"]] | map(select(. != null) | .yrmcds.rate, .memcached.rate) | max) as $bestpoll
| "### Throughput and p99 latency (medians)",
  "",
  "Ops/s: lock+unlock cycles for cycle, requests for getset, hand-offs for handoff. The recipe is the memcached lock recipe: yrmcds's lock/unlock (lock) or add+delete (add). CPU: the server's user+sys CPU time per op over the measured time.",
  "",
  "| case | latch | yrmcds | memcached | latch/yrmcds | latch/memcached | p99 latch / yrmcds / memcached | CPU µs/op latch / yrmcds / memcached | errors |",
  "|---|---|---|---|---|---|---|---|---|",
  ($m | to_entries | sort_by((.key | order), .key)[]
   | .key as $c | .value as $v
   | if ($c | test("dlock")) then
       (if ($c | startswith("handoff")) then $bestpoll else $m[$c | sub("dlock"; "binary")].memcached.rate end) as $ref
       | (if ($c | startswith("handoff")) then "best polling recipe: " else "memcached binary add+delete: " end) as $lbl
       | [$c, ($v.latch.rate | k), "-", $lbl + ($ref | k), "-", (ratio($v.latch.rate; $ref) | x), ($v.latch.p99 | us), ($v.latch.cpu | cpu), ($v.latch.errors | tostring)] | row
     else
       [$c, ($v.latch.rate | k), ($v.yrmcds.rate | k), ($v.memcached.rate | k) + (if $v.memcached.recipe then " (" + $v.memcached.recipe + ")" else "" end),
        (ratio($v.latch.rate; $v.yrmcds.rate) | x), (ratio($v.latch.rate; $v.memcached.rate) | x),
        ([$v.latch.p99, $v.yrmcds.p99, $v.memcached.p99] | map(us) | join(" / ")),
        ([$v.latch.cpu, $v.yrmcds.cpu, $v.memcached.cpu] | map(cpu) | join(" / ")),
        ([$v.latch.errors, $v.yrmcds.errors, $v.memcached.errors] | add | tostring)] | row
     end),
  "",
  ($m | to_entries | map(select(.value["latch-base"])) | sort_by((.key | order), .key)) as $ba
  | (if ($ba | length) == 0 then empty else
  ("### Before and after: latch-base (\($ba[0].value["latch-base"].rev // "?")) → latch (\($ba[0].value.latch.rev // "?"))",
  "",
  "Medians of the same runs; CPU is the server's user+sys CPU per op, the measure that holds on a noisy machine. Ratios are after/before: above 1× for ops/s is faster, above 1× for CPU is more work per op. memcached's CPU per op in the same runs is the yardstick (dlock cases have none).",
  "",
  "| case | ops/s latch-base | ops/s latch | ratio | CPU µs/op latch-base | CPU µs/op latch | CPU ratio (after/before) | CPU µs/op memcached |",
  "|---|---|---|---|---|---|---|---|",
  ($ba[] | .key as $c | .value as $v
   | [$c, ($v["latch-base"].rate | k), ($v.latch.rate | k), (ratio($v.latch.rate; $v["latch-base"].rate) | x),
      ($v["latch-base"].cpu | cpu), ($v.latch.cpu | cpu), (ratio($v.latch.cpu; $v["latch-base"].cpu) | x), ($v.memcached.cpu | cpu)] | row),
  "",
  ($ba | map({c: .key, r: ratio(.value.latch.cpu; .value["latch-base"].cpu)}) | map(select(.r != null)) as $rs
   | if ($rs | length) == 0 then "No case has the CPU of both."
     else ($rs | max_by(.r)) as $w | (map(select(.r > 1.05)) | map(.c + " " + (.r | x))) as $over
     | "Worst CPU ratio: " + ($w.r | x) + " (" + $w.c + "); cases more than 5% slower in server CPU per op: "
       + (if ($over | length) == 0 then "none" else ($over | join(", ")) end) + "."
     end),
  "")
  end),
  "### Contention: every connection on one key",
  "",
  "| case | server | hand-offs/s | hand-off p99 | wait p99 | fairness max/min | wasted polls/s |",
  "|---|---|---|---|---|---|---|",
  ($m | to_entries | map(select(.key | startswith("handoff"))) | sort_by(.key | order)[] | .key as $c | .value | to_entries[]
   | [$c, .key, (.value.rate | k), (.value.p99 | us), (.value.wait99 | us), (.value.fair | if . == null then "-" else (. * 1000 | round) / 1000 | tostring end), (.value.polls | k)] | row),
  "",
  (map(select(.memory)) as $mem | if ($mem | length) == 0 then empty else
  ("### Memory",
  "",
  "| case | server | held | RSS per unit | Go heap per unit | per lock, item excluded: RSS / Go heap |",
  "|---|---|---|---|---|---|",
  ($mem[] | [.case, .server + (if .recipe then " (" + .recipe + ")" else "" end),
     (if .workload == "hold" then (.memory.locks | tostring) + " locks" else (.memory.conns | tostring) + " conns" end),
     (.memory.per_unit_rss_bytes | bytes), (.memory.per_unit_heap_bytes | bytes),
     (if .memory.items then (.memory.per_lock_only_rss_bytes | bytes) + " / " + (.memory.per_lock_only_heap_bytes | bytes) else "-" end)] | row))
  end)
JQ
)

# FROM: report over earlier runs' results and run nothing.
if [ -n "${FROM:-}" ]; then
	if [ -n "${UPDATE_DOCS:-}" ]; then
		echo "bench-peers: FROM reports earlier runs, whose machine and commit it does not know: not with UPDATE_DOCS" >&2
		exit 2
	fi
	files=()
	for d in $FROM; do files+=("$d/results.jsonl"); done
	echo "Medians over the rounds of: $FROM."
	echo
	report_tables "${files[@]}"
	exit 0
fi

partial=()
[ "$ONLY" = . ] || partial+=("ONLY=$ONLY")
[ -z "$SKIP_MEMORY" ] || partial+=(SKIP_MEMORY)
[ -z "$BASELINE" ] || partial+=("BASELINE=$BASELINE")
[ -z "$LATCH_ARGS$BASE_ARGS" ] || partial+=("LATCH_ARGS=$LATCH_ARGS BASE_ARGS=$BASE_ARGS")
docs_guard bench-peers "${partial[@]}"

WORK=$(mktemp -d /tmp/latch-bench.XXXXXX)
OUT=${OUT:-$WORK/results}
mkdir -p "$OUT"
: >"$OUT/results.jsonl"

# --- peers and tools -------------------------------------------------------
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
missing=()
for p in yrmcds memcached jq; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The installed packages' own services are not the ones measured.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

log "building latch"
go build -o "$WORK/latch" ./cmd/latch
LATCH=$WORK/latch
REV=$(docs_commit)
RUN_DATE=$(docs_date)
if [ -n "$BASELINE" ]; then
	BASE_REV=$(git rev-parse --verify --short "$BASELINE^{commit}")
	log "building latch at $BASELINE ($BASE_REV) as latch-base"
	mkdir -p "$WORK/base"
	git archive "$BASE_REV" | tar -x -C "$WORK/base"
	(cd "$WORK/base" && go build -o "$WORK/latch-base" ./cmd/latch)
	rm -rf "$WORK/base"
fi

# --- servers -----------------------------------------------------------------
P_LATCH_MC=$((BASE_PORT + 1))
P_LATCH_DLOCK=$((BASE_PORT + 2))
P_LATCH_ADMIN=$((BASE_PORT + 3))
P_YRMCDS=$((BASE_PORT + 4))
P_YRMCDS_REPL=$((BASE_PORT + 5))
P_MEMCACHED=$((BASE_PORT + 6))
P_BASE_MC=$((BASE_PORT + 7))
P_BASE_DLOCK=$((BASE_PORT + 8))
P_BASE_ADMIN=$((BASE_PORT + 9))

declare -A PID=()

wait_port() {
	for _ in $(seq 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	log "nothing listens on port $1"
	return 1
}

start_latch() { # NAME BINARY MEMCACHE_PORT DLOCK_PORT ADMIN_PORT [FLAGS...]
	# The Redis and ZooKeeper front ends are off: both builds would want
	# their default ports.
	local redis=()
	"$2" serve -h 2>&1 | grep -q -- -redis-addr && redis=(--redis-addr=)
	"$2" serve -h 2>&1 | grep -q -- -zookeeper-addr && redis+=(--zookeeper-addr=)
	"$2" serve --memcache-addr "127.0.0.1:$3" --dlock-addr "127.0.0.1:$4" \
		--admin-addr "127.0.0.1:$5" --log-level warn "${redis[@]}" \
		--memcache-max-conns 20000 --dlock-max-conns 20000 "${@:6}" >>"$WORK/$1.log" 2>&1 &
	PID[$1]=$!
}

start_servers() {
	# shellcheck disable=SC2086 # the flags are words
	start_latch latch "$LATCH" "$P_LATCH_MC" "$P_LATCH_DLOCK" "$P_LATCH_ADMIN" $LATCH_ARGS
	local ports=("$P_LATCH_MC" "$P_LATCH_DLOCK" "$P_LATCH_ADMIN" "$P_YRMCDS" "$P_MEMCACHED")
	if [ -n "$BASELINE" ]; then
		# shellcheck disable=SC2086
		start_latch latch-base "$WORK/latch-base" "$P_BASE_MC" "$P_BASE_DLOCK" "$P_BASE_ADMIN" $BASE_ARGS
		ports+=("$P_BASE_MC" "$P_BASE_DLOCK" "$P_BASE_ADMIN")
	fi
	mkdir -p "$WORK/yrmcds"
	cat >"$WORK/yrmcds.conf" <<CONF
virtual_ip = "127.0.0.1"
port = $P_YRMCDS
repl_port = $P_YRMCDS_REPL
temp_dir = "$WORK/yrmcds"
log.threshold = error
log.file = "$WORK/yrmcds.log"
workers = 2
max_connections = 0
memory_limit = 1024M
CONF
	/usr/sbin/yrmcdsd -f "$WORK/yrmcds.conf" >>"$WORK/yrmcds.out" 2>&1 &
	PID[yrmcds]=$!
	local user=()
	[ "$(id -u)" = 0 ] && user=(-u root)
	/usr/bin/memcached -l 127.0.0.1 -p "$P_MEMCACHED" -U 0 -t 2 -m 1024 -c 20000 "${user[@]}" >"$WORK/memcached.log" 2>&1 &
	PID[memcached]=$!
	for p in "${ports[@]}"; do wait_port "$p"; done
}

stop_servers() {
	for s in "${!PID[@]}"; do
		kill "${PID[$s]}" 2>/dev/null || true
		wait "${PID[$s]}" 2>/dev/null || true
		unset "PID[$s]"
	done
}
trap stop_servers EXIT

addr_of() { # server target
	case "$1/$2" in
	latch/dlock) echo "127.0.0.1:$P_LATCH_DLOCK" ;;
	latch/*) echo "127.0.0.1:$P_LATCH_MC" ;;
	latch-base/dlock) echo "127.0.0.1:$P_BASE_DLOCK" ;;
	latch-base/*) echo "127.0.0.1:$P_BASE_MC" ;;
	yrmcds/*) echo "127.0.0.1:$P_YRMCDS" ;;
	memcached/*) echo "127.0.0.1:$P_MEMCACHED" ;;
	esac
}

# run CASE SERVER ROUND TARGET [latch bench flags...]: one run, its JSON
# result appended to results.jsonl with the case, server and round.
run() {
	local case=$1 server=$2 round=$3 target=$4
	shift 4
	local file="$OUT/$case.$server.$round.json" extra=() rev=
	case $server in
	latch) extra=(--admin "127.0.0.1:$P_LATCH_ADMIN") rev=$REV ;;
	latch-base) extra=(--admin "127.0.0.1:$P_BASE_ADMIN") rev=$BASE_REV ;;
	esac
	if ! "$LATCH" bench --json --target "$target" --addr "$(addr_of "$server" "$target")" \
		--server-pid "${PID[$server]}" "${extra[@]}" "$@" >"$file" 2>"$file.err"; then
		log "  $case $server round $round: $(tail -1 "$file.err")"
	fi
	[ -s "$file" ] || return 0
	jq -c --arg case "$case" --arg server "$server" --argjson round "$round" --arg rev "$rev" \
		'. + {case: $case, server: $server, round: $round} + (if $rev == "" then {} else {rev: $rev} end)' \
		"$file" >>"$OUT/results.jsonl"
	log "  $case $server: $(jq -r 'if .memory then "\(.memory.per_unit_rss_bytes|floor) B/unit RSS"
		elif .handoff then "\(.handoff.handoffs_per_sec) hand-offs/s"
		else "\(.ops_per_sec) ops/s" end
		+ (if .server_cpu then ", CPU \(.server_cpu.total_us_per_op) µs/op" else "" end)
		+ ", errors \(.errors)"' "$file")"
}

# --- 1. memory ---------------------------------------------------------------
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
# Every memory case gets fresh servers: a Go heap keeps its grown maps and
# its RSS shrinks late, so a server that has run another case would skew
# the difference.
mem() { # CASE SERVER TARGET [flags...]
	start_servers
	run "$1" "$2" 1 "${@:3}"
	stop_servers
}
if [ -z "$SKIP_MEMORY" ]; then
	log "memory: $IDLE_CONNS idle connections, then hold $LOCKS locks (fresh servers each)"
	mem idle-memcache latch memcache-text --workload idle --conns "$IDLE_CONNS"
	mem idle-dlock latch dlock --workload idle --conns "$IDLE_CONNS"
	if [ -n "$BASELINE" ]; then
		mem idle-memcache latch-base memcache-text --workload idle --conns "$IDLE_CONNS"
		mem idle-dlock latch-base dlock --workload idle --conns "$IDLE_CONNS"
	fi
	mem idle-memcache yrmcds memcache-text --workload idle --conns "$IDLE_CONNS"
	mem idle-memcache memcached memcache-text --workload idle --conns "$IDLE_CONNS"
	hold=(--workload hold --locks "$LOCKS" --conns "$CONNS" --pipeline 64)
	mem hold-text latch memcache-text "${hold[@]}"
	mem hold-dlock latch dlock "${hold[@]}"
	if [ -n "$BASELINE" ]; then
		mem hold-text latch-base memcache-text "${hold[@]}"
		mem hold-dlock latch-base dlock "${hold[@]}"
	fi
	mem hold-text yrmcds memcache-text "${hold[@]}"
	mem hold-text memcached memcache-text "${hold[@]}"
fi

# --- 2. speed ----------------------------------------------------------------
# name target workload pipeline
CASES=(
	"cycle-text-p1 memcache-text cycle 1"
	"cycle-text-p16 memcache-text cycle 16"
	"cycle-binary-p1 memcache-binary cycle 1"
	"cycle-binary-p16 memcache-binary cycle 16"
	"getset-text-p1 memcache-text getset 1"
	"getset-text-p16 memcache-text getset 16"
	"getset-binary-p1 memcache-binary getset 1"
	"getset-binary-p16 memcache-binary getset 16"
	"handoff-text memcache-text handoff 1"
	"handoff-binary memcache-binary handoff 1"
	"cycle-dlock-p1 dlock cycle 1"
	"cycle-dlock-p16 dlock cycle 16"
	"handoff-dlock dlock handoff 1"
)
log "speed: $ROUNDS rounds of ${#CASES[@]} cases, $DURATION each after $WARMUP of warm-up, $CONNS connections"
start_servers
for round in $(seq "$ROUNDS"); do
	log "round $round"
	for c in "${CASES[@]}"; do
		read -r name target workload pipeline <<<"$c"
		[[ $name =~ $ONLY ]] || continue
		latches=(latch)
		[ -n "$BASELINE" ] && latches+=(latch-base)
		servers=("${latches[@]}" yrmcds memcached)
		[ "$target" = dlock ] && servers=("${latches[@]}")
		for s in "${servers[@]}"; do
			run "$name" "$s" "$round" "$target" --workload "$workload" --pipeline "$pipeline" \
				--conns "$CONNS" --duration "$DURATION" --warmup "$WARMUP"
		done
	done
done
stop_servers

# --- report ------------------------------------------------------------------
version_of() { dpkg-query -W -f '${Version}' "$1" 2>/dev/null || echo "?"; }
{
	docs_header "$RUN_DATE" "$REV"
	echo "yrmcds $(version_of yrmcds) (workers = 2), memcached $(version_of memcached) (-t 2 -c 20000), latch with its defaults but --memcache-max-conns 20000 --dlock-max-conns 20000."
	echo "$CONNS connections, $DURATION per run after $WARMUP of warm-up; medians of $ROUNDS round(s)."
	[ -z "$BASELINE" ] || echo "latch-base: $BASELINE$([ "$BASELINE" = "$BASE_REV" ] || echo " ($BASE_REV)")."
	[ -z "$LATCH_ARGS" ] || echo "latch's extra flags: $LATCH_ARGS."
	[ -z "$BASELINE" ] || [ -z "$BASE_ARGS" ] || echo "latch-base's extra flags: $BASE_ARGS."
	echo "Load average (1, 5, 15 min) at the start: $LOAD_START; at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	report_tables "$OUT/results.jsonl"
} >"$OUT/report.md"
echo
cat "$OUT/report.md"
echo
echo "Raw results and this report: $OUT"
docs_update bench-peers "$OUT/report.md"
