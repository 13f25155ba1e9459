"""Debian's python3-redis against a Redis server: redis.lock.Lock and the
classic SETNX + EXPIRE recipe released through a WATCHed pipeline.
Usage: redis_py_lock.py PORT KEY_PREFIX. Prints "ok" when every check holds."""
import sys
import time
import uuid

import redis

port, prefix = int(sys.argv[1]), sys.argv[2]
r = redis.Redis(host="127.0.0.1", port=port)
r2 = redis.Redis(host="127.0.0.1", port=port)
name = prefix + "pylock"


def check(cond, what):
    if not cond:
        raise SystemExit("failed: " + what)


# Lock: acquire, exclusion, owned, extend (add and replace), reacquire, release.
a = r.lock(name, timeout=5, blocking_timeout=0.1)
check(a.acquire(), "acquire")
b = r2.lock(name, timeout=5, sleep=0.05, blocking_timeout=0.3)
check(not b.acquire(), "a second lock is excluded")
check(a.owned() and not b.owned(), "owned")
check(a.locked(), "locked")
check(a.extend(10), "extend")
check(10000 < r.pttl(name) <= 15000, "extend adds to the lease left: %d" % r.pttl(name))
check(a.extend(3, replace_ttl=True), "extend replace")
check(r.pttl(name) <= 3000, "extend replaces the lease")
check(a.reacquire(), "reacquire")
a.release()
check(not a.owned() and r.get(name) is None, "release")

# Blocking: a waiter polls and gets the lock when the holder's lease ends;
# the holder then cannot release it.
c = r.lock(name, timeout=0.3)
check(c.acquire(), "acquire with a short lease")
d = r2.lock(name, timeout=5, sleep=0.05, blocking_timeout=5)
t0 = time.monotonic()
check(d.acquire(), "blocking acquire after the lease ends")
check(time.monotonic() - t0 < 3, "blocking acquire took too long")
try:
    c.release()
    raise SystemExit("failed: released a lock it had lost")
except redis.exceptions.LockNotOwnedError:
    pass
d.release()

# A lock without a timeout has no lease.
e = r.lock(name)
check(e.acquire(blocking=False), "acquire without timeout")
check(r.pttl(name) == -1, "no lease")
e.release()

# The classic recipe: SETNX + EXPIRE with a uuid, released through WATCH,
# GET, compare, MULTI, DEL, EXEC.
tok = uuid.uuid4().hex
check(r.setnx(name, tok), "setnx")
check(r.expire(name, 10), "expire")
check(not r2.setnx(name, "other"), "setnx excluded")


def release(conn, name, tok):
    with conn.pipeline() as p:
        while True:
            try:
                p.watch(name)
                if p.get(name) != tok.encode():
                    p.unwatch()
                    return False
                p.multi()
                p.delete(name)
                p.execute()
                return True
            except redis.WatchError:
                continue


check(not release(r2, name, "not-the-token"), "release by another token")
check(release(r2, name, tok), "release by the token, on another connection")
check(r.get(name) is None, "released")

# EXEC after the watched key changed answers nil: nothing applies.
check(r.set(name, "x", nx=True, px=10000), "set nx px")
p = r.pipeline()
p.watch(name)
p.multi()
p.delete(name)
check(r2.pexpire(name, 20000), "pexpire from elsewhere")
try:
    p.execute()
    raise SystemExit("failed: EXEC applied after its watched key changed")
except redis.WatchError:
    pass
check(r.get(name) == b"x", "the transaction did not apply")
r.delete(name)
print("ok")
