#!/usr/bin/env bash
# bench-redis.sh: latch's Redis front end against Debian's redis-server, on
# this machine, under the same load, with redis-benchmark.
#
# It builds latch, starts it (Redis front end only besides its defaults'
# off) and redis-server (no persistence) on loopback ports, loads the
# compare-and-delete script of the Redis documentation on both, and a
# one-word variant of it (UNLINK for DEL) that latch's table of known lock
# scripts does not know, so that latch runs it in Lua, and runs, against
# each server in turn, with $CONNS connections and $REQS requests:
#
#   acquire: SET lock:__rand_int__ <value> NX PX 10000
#   release: EVALSHA <compare-and-delete> 1 lock:__rand_int__ <value>
#   acquire, again
#   release-lua: EVALSHA <the variant> 1 lock:__rand_int__ <value>
#
# over $KEYS random keys, unpipelined (-P 1) and with $PIPE in flight per
# connection (-P $PIPE). Each row gives requests/s (redis-benchmark's) and
# the server's CPU time (user+sys from /proc/<pid>/stat) per request, and
# a lock cycle (one acquire and one release) per second for both, with
# the latch/redis ratio, for the known script and for the variant. Both servers get the same sequence of runs (an
# acquire run, then a release run, at each depth), alternately. ROUNDS
# repeats the whole table (the servers keep running: a round starts with
# the keys the previous one left) and ends with each round's cycle ratios,
# to show the machine's noise. The tables are headed by the machine, the
# date and the commit.
#
# UPDATE_DOCS=1 also writes them into docs/benchmarks.md, between its
# lines "<!-- begin bench-redis -->" and "<!-- end bench-redis -->"
# (scripts/lib-docs.sh). Not with LATCH_BIN, whose commit the script does
# not know: then it stops before it starts, unless UPDATE_DOCS=force,
# which writes the run marked partial. DOCS_FILE=<file> writes another
# file.
#
# Usage: scripts/bench-redis.sh          (about a minute per round)
#   UPDATE_DOCS=1 ROUNDS=5 scripts/bench-redis.sh
# Knobs (environment): CONNS=16 PIPE=16 REQS=200000 KEYS=100000 PORT=23379 ROUNDS=1
# LATCH_BIN=path runs that latch binary instead of building this tree's.
# UPDATE_DOCS=1|force DOCS_FILE=<file> (see above)
set -euo pipefail

CONNS=${CONNS:-16}
PIPE=${PIPE:-16}
REQS=${REQS:-200000}
KEYS=${KEYS:-100000}
PORT=${PORT:-23379}
ROUNDS=${ROUNDS:-1}
LPORT=$((PORT + 1))

cd "$(dirname "$0")/.."
# shellcheck source=lib-docs.sh
source scripts/lib-docs.sh
partial=()
[ -z "${LATCH_BIN:-}" ] || partial+=("LATCH_BIN=$LATCH_BIN")
docs_guard bench-redis "${partial[@]}"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

if [ -n "${LATCH_BIN:-}" ]; then
	cp "$LATCH_BIN" "$tmp/latch"
	REV="$LATCH_BIN"
else
	go build -o "$tmp/latch" ./cmd/latch
	REV=$(docs_commit)
fi
RUN_DATE=$(docs_date)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
# The report: what is printed, also kept for docs_update.
report=$tmp/report.md
emit() { tee -a "$report"; }
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
	--protected-mode no --dir "$tmp" --logfile "$tmp/redis.log" &
pids+=($!)
rpid=$!
"$tmp/latch" serve --redis-addr="127.0.0.1:$LPORT" --memcache-addr= --dlock-addr= --zookeeper-addr= --admin-addr= \
	--log-level=warn 2>"$tmp/latch.log" &
pids+=($!)
lpid=$!
for p in "$PORT" "$LPORT"; do
	for _ in $(seq 100); do redis-cli -p "$p" PING >/dev/null 2>&1 && break; sleep 0.05; done
done

script='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
sha=$(redis-cli -p "$PORT" SCRIPT LOAD "$script")
lsha=$(redis-cli -p "$LPORT" SCRIPT LOAD "$script")
[ "$sha" = "$lsha" ] || { echo "SCRIPT LOAD: redis $sha, latch $lsha" >&2; exit 1; }
variant='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("unlink",KEYS[1]) else return 0 end'
vsha=$(redis-cli -p "$PORT" SCRIPT LOAD "$variant")
lvsha=$(redis-cli -p "$LPORT" SCRIPT LOAD "$variant")
[ "$vsha" = "$lvsha" ] || { echo "SCRIPT LOAD: redis $vsha, latch $lvsha" >&2; exit 1; }

# cpu PID: the process's user+sys clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# run NAME PORT PID PIPE ARGS...: prints "rps cpu_us_per_req".
run() {
	local port=$1 pid=$2 pipe=$3
	shift 3
	local c0 c1 out rps
	c0=$(cpu "$pid")
	out=$(redis-benchmark -p "$port" -c "$CONNS" -n "$REQS" -r "$KEYS" -P "$pipe" -q "$@" 2>&1 | tr '\r' '\n' | grep 'requests per second' | tail -1)
	c1=$(cpu "$pid")
	rps=$(echo "$out" | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
	echo "$rps $(awk -v d=$((c1 - c0)) -v hz="$hz" -v n="$REQS" 'BEGIN{printf "%.2f", d/hz*1e6/n}')"
}

# table ROUND: one round's table; its cycle ratios are added to $ratios.
ratios=()
table() {
	local round=$1 pipe kind r l
	printf '%s\n' "| case | in flight | redis req/s | latch req/s | latch/redis | redis CPU µs/req | latch CPU µs/req |" "|---|---|---|---|---|---|---|" | emit
	declare -A R L
	for pipe in 1 "$PIPE"; do
		for kind in acquire release acquire-again release-lua; do
			case $kind in
			acquire*) args=(SET lock:__rand_int__ owner-value-0123456789 NX PX 10000) ;;
			release) args=(EVALSHA "$sha" 1 lock:__rand_int__ owner-value-0123456789) ;;
			release-lua) args=(EVALSHA "$vsha" 1 lock:__rand_int__ owner-value-0123456789) ;;
			esac
			# Alternate which server goes first, round by round.
			if [ $((round % 2)) = 1 ]; then
				r=$(run "$PORT" "$rpid" "$pipe" "${args[@]}")
				l=$(run "$LPORT" "$lpid" "$pipe" "${args[@]}")
			else
				l=$(run "$LPORT" "$lpid" "$pipe" "${args[@]}")
				r=$(run "$PORT" "$rpid" "$pipe" "${args[@]}")
			fi
			R[$kind$pipe]=${r%% *}
			L[$kind$pipe]=${l%% *}
			awk -v k="$kind" -v p="$pipe" -v r="$r" -v l="$l" 'BEGIN{split(r,a," "); split(l,b," ");
				printf "| %s | %d | %.0f | %.0f | %.2fx | %s | %s |\n", k, p, a[1], b[1], b[1]/a[1], a[2], b[2]}' | emit
		done
		local line
		line=$(awk -v p="$pipe" -v ra="${R[acquire$pipe]}" -v rr="${R[release$pipe]}" -v la="${L[acquire$pipe]}" -v lr="${L[release$pipe]}" \
			'BEGIN{rc=1/(1/ra+1/rr); lc=1/(1/la+1/lr); printf "| cycle (acquire + release) | %d | %.0f | %.0f | %.2fx | | |\n", p, rc, lc, lc/rc}')
		echo "$line" | emit
		ratios+=("$pipe $(echo "$line" | awk -F'|' '{gsub(/ /, "", $6); print $6}')")
		line=$(awk -v p="$pipe" -v ra="${R[acquire-again$pipe]}" -v rr="${R[release-lua$pipe]}" -v la="${L[acquire-again$pipe]}" -v lr="${L[release-lua$pipe]}" \
			'BEGIN{rc=1/(1/ra+1/rr); lc=1/(1/la+1/lr); printf "| cycle (acquire + release-lua) | %d | %.0f | %.0f | %.2fx | | |\n", p, rc, lc, lc/rc}')
		echo "$line" | emit
		ratios+=("lua$pipe $(echo "$line" | awk -F'|' '{gsub(/ /, "", $6); print $6}')")
	done
}

{
	docs_header "$RUN_DATE" "$REV"
	echo "redis-server $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'), no persistence; redis-benchmark, $CONNS connections, $REQS requests over $KEYS keys, 1 and $PIPE in flight; $ROUNDS round(s)."
	echo "Load average (1, 5, 15 min) at the start: $LOAD_START."
	echo
} | emit
for round in $(seq "$ROUNDS"); do
	[ "$ROUNDS" = 1 ] || printf 'Round %s\n\n' "$round" | emit
	table "$round"
	echo | emit
done
if [ "$ROUNDS" != 1 ]; then
	for pipe in 1 "$PIPE" lua1 "lua$PIPE"; do
		case $pipe in
		lua*) line="- cycle with the variant (Lua) latch/redis, ${pipe#lua} in flight, by round:" ;;
		*) line="- cycle latch/redis, $pipe in flight, by round:" ;;
		esac
		for x in "${ratios[@]}"; do
			[ "${x%% *}" = "$pipe" ] && line+=" ${x#* }"
		done
		echo "$line" | emit
	done
	echo | emit
fi
echo "Load average (1, 5, 15 min) at the end: $(cut -d' ' -f1-3 /proc/loadavg)." | emit
docs_update bench-redis "$report"
