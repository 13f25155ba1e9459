// npm's redis-semaphore 5.8 on ioredis against a Redis server: Mutex
// (acquire, refresh, release), and Mutex, Semaphore and MultiSemaphore
// under contention from async tasks, each with its own connection: never
// more holders than the limit. Its scripts are not latch's known lock
// scripts: they run in Lua.
// Usage: node semaphore.js PORT KEY_PREFIX (from the npm directory).
// Prints "ok" when every check holds.
const Redis = require("ioredis");
const { Mutex, Semaphore, MultiSemaphore } = require("redis-semaphore");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const check = (cond, what) => { if (!cond) throw new Error("failed: " + what); };

(async () => {
  const port = Number(process.argv[2]), prefix = process.argv[3];
  const clients = [];
  const client = () => { const c = new Redis({ host: "127.0.0.1", port }); clients.push(c); return c; };
  const c = client();
  const opts = { lockTimeout: 2000, acquireTimeout: 20000, retryInterval: 5, refreshInterval: 0 };

  // Mutex: acquire, excluded, refresh keeps it, release frees it.
  const key = prefix + "mutex";
  const m1 = new Mutex(c, key, { ...opts, refreshInterval: 300 });
  await m1.acquire();
  check(m1.isAcquired, "mutex acquired");
  const m2 = new Mutex(c, key, { ...opts, acquireAttemptsLimit: 1 });
  check(!(await m2.tryAcquire()), "a second mutex is excluded");
  await sleep(2500); // past lockTimeout: only the refreshes keep it
  check(!(await m2.tryAcquire()), "refreshed mutex still held");
  check((await c.pttl("mutex:" + key)) > 1000, "refresh renews the lease");
  await m1.release();
  check((await c.exists("mutex:" + key)) === 0, "release frees the key");
  check(await m2.tryAcquire(), "acquired after release");
  await m2.release();

  // contend runs tasks that each take make()'s lock rounds times, and
  // returns the most holders seen at once; weight is a holder's count.
  const contend = async (tasks, rounds, weight, make) => {
    let holders = 0, most = 0;
    await Promise.all([...Array(tasks).keys()].map(async () => {
      const cc = client();
      for (let i = 0; i < rounds; i++) {
        const lock = make(cc);
        await lock.acquire();
        holders += weight;
        most = Math.max(most, holders);
        await sleep(3);
        holders -= weight;
        await lock.release();
      }
    }));
    return most;
  };
  let most = await contend(5, 6, 1, (cc) => new Mutex(cc, prefix + "cm", opts));
  check(most === 1, "mutex: at most one holder, saw " + most);
  most = await contend(6, 6, 1, (cc) => new Semaphore(cc, prefix + "cs", 3, opts));
  check(most <= 3 && most >= 2, "semaphore of 3: holders at most 3, saw " + most);
  most = await contend(6, 5, 2, (cc) => new MultiSemaphore(cc, prefix + "cms", 5, 2, opts));
  check(most <= 5 && most >= 4, "multi-semaphore of 5, 2 permits each: at most 4 held, saw " + most);
  check((await c.exists("semaphore:" + prefix + "cs", "semaphore:" + prefix + "cms", "mutex:" + prefix + "cm")) === 0, "all released");
  for (const x of clients) x.disconnect();
  console.log("ok");
})().catch((e) => { console.log(e.stack || String(e)); process.exit(1); });
