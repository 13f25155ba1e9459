"""A kazoo lock contender for cmd/latch's TestClusterZooKeeperFailover.

Usage: /usr/bin/python3 zk_locker.py NAME HOSTS LOCKPATH REFEREE HOLD_MS TIMEOUT_MS

It opens one kazoo session, of timeout TIMEOUT_MS, on HOSTS (comma-separated host:port, tried in
the order given: randomize_hosts is off), then takes kazoo.recipe.lock.Lock
on LOCKPATH again and again. Each time it holds the lock it tells the
test's referee (a TCP host:port, one line a message, one line an answer):
"BEGIN NAME" once it holds it, "END NAME" before it lets go, each answered
before it goes on, so that the referee sees every hold within the real
one. The answer to END is "OK" (go on) or "STOP" (release and finish).

The lock recognizes go-zookeeper's contenders too ("-lock-" names, its
extra_lock_patterns), as go-zookeeper's Lock recognizes kazoo's: both kinds
contend for the same lock.

When it finishes it prints one JSON line: its name, the rounds it held the
lock, its session id when it started and when it finished, and every
connection state its listener saw (kazoo's LOST would mean the session
expired). It exits 0 unless something failed.
"""

import json
import socket
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.recipe.lock import Lock


def main():
    name, hosts, path, referee, hold_ms, timeout_ms = sys.argv[1:7]
    hold = int(hold_ms) / 1000.0
    states = []
    states_mu = threading.Lock()

    def listener(state):
        with states_mu:
            states.append("%s@%.3f" % (state, time.monotonic()))

    client = KazooClient(
        hosts=hosts,
        timeout=int(timeout_ms) / 1000.0,
        randomize_hosts=False,
        connection_retry=dict(max_tries=-1, delay=0.05, max_delay=0.5),
    )
    client.add_listener(listener)
    client.start(timeout=15)
    session = client.client_id[0]

    host, port = referee.rsplit(":", 1)
    ref = socket.create_connection((host, int(port)), timeout=60)
    rf = ref.makefile("rw", newline="\n")

    def tell(what):
        rf.write("%s %s\n" % (what, name))
        rf.flush()
        answer = rf.readline().strip()
        if answer not in ("OK", "STOP"):
            raise RuntimeError("referee answered %r to %s" % (answer, what))
        return answer

    lock = Lock(client, path, identifier=name, extra_lock_patterns=["-lock-"])
    rounds = 0
    while True:
        lock.acquire(timeout=30)
        if not lock.is_acquired:
            raise RuntimeError("lock not acquired in 30 s")
        tell("BEGIN")
        time.sleep(hold)
        answer = tell("END")
        lock.release()
        rounds += 1
        if answer == "STOP":
            break

    end_session = client.client_id[0] if client.client_id else None
    with states_mu:
        seen = list(states)  # before stop, which closes the session: LOST
    client.remove_listener(listener)
    client.stop()
    client.close()
    print(json.dumps({
        "name": name,
        "rounds": rounds,
        "session_start": session,
        "session_end": end_session,
        "states": seen,
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
