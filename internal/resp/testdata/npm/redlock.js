// npm's redlock 4.2 and 5 on ioredis against a Redis server.
// Usage: node redlock.js PORT KEY_PREFIX (from the npm directory).
// Prints "ok" when every check holds.
const Redis = require("ioredis");
const Redlock4 = require("redlock4");
const Redlock5 = require("redlock5").default;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const check = (cond, what) => { if (!cond) throw new Error("failed: " + what); };
const fails = async (p) => { try { await p; return false; } catch (e) { return true; } };

(async () => {
  const port = Number(process.argv[2]), prefix = process.argv[3];
  const c = new Redis({ host: "127.0.0.1", port, lazyConnect: false });

  // redlock 4.2: lock, excluded, extend, unlock, expiry.
  const r4 = new Redlock4([c], { retryCount: 0 });
  const k4 = prefix + "r4";
  const l = await r4.lock(k4, 1000);
  check(await fails(r4.lock(k4, 1000)), "4.2: a second lock is excluded");
  const l2 = await l.extend(5000);
  check((await c.pttl(k4)) > 4000, "4.2: extend");
  await l2.unlock();
  check((await c.get(k4)) === null, "4.2: unlock");
  await r4.lock(k4, 200);
  check(await fails(r4.lock(k4, 1000)), "4.2: held until its lease ends");
  await sleep(300);
  const l3 = await r4.lock(k4, 1000);
  await l3.unlock();

  // redlock 5: multi-key acquire, excluded, extend, release, expiry.
  const r5 = new Redlock5([c], { retryCount: 0 });
  const a = prefix + "r5a", b = prefix + "r5b";
  const m = await r5.acquire([a, b], 1000);
  check(await fails(r5.acquire([b], 1000)), "5: a second lock is excluded");
  const m2 = await m.extend(5000);
  check((await c.pttl(a)) > 4000 && (await c.pttl(b)) > 4000, "5: extend");
  await m2.release();
  check((await c.exists(a, b)) === 0, "5: release");
  await r5.acquire([a], 200);
  check(await fails(r5.acquire([a, b], 1000)), "5: all or nothing");
  check((await c.exists(b)) === 0, "5: a failed acquire takes nothing");
  await sleep(300);
  const m3 = await r5.acquire([a, b], 1000);
  await m3.release();
  c.disconnect();
  console.log("ok");
})().catch((e) => { console.error(e); process.exit(1); });
