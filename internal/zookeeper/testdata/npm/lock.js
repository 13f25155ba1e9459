// The lock recipe of ZooKeeper's documentation (recipes: Locks), on
// node-zookeeper-client, run by several clients at once against one server.
//
// Usage: node lock.js HOST:PORT CLIENTS ROUNDS
//
// Each client has a session of its own. To take the lock a client creates
// an ephemeral sequential znode LOCKDIR/GUID-lock- (GUID its own), lists
// LOCKDIR's children; when its znode has the lowest sequence number it
// holds the lock, otherwise it calls exists with a watch on the znode just
// before its own and, when that znode is gone or the watch fires, lists
// again. It releases by deleting its znode. Every client takes the lock
// ROUNDS times.
//
// The clients count the holders inside the critical section (they share
// one process), where each stays for a few milliseconds of timers, so
// that a second grant would be seen. The last line on stdout is the
// summary:
//
//   node-zookeeper-client: clients=4 rounds=10 acquired=40 overlaps=0 ms=1234
//
// The exit status is 0 when every round ran and no overlap was seen, 1
// otherwise (and after 60 s, when it gives up).

'use strict';

const crypto = require('crypto');
const zookeeper = require('node-zookeeper-client');

const HOLD_MS = 3;
const LIMIT_MS = 60000;

function usage() {
    console.error('usage: node lock.js HOST:PORT CLIENTS ROUNDS');
    process.exit(2);
}

// call turns a node-zookeeper-client call with a callback into a promise of
// the callback's first result.
function call(fn, ...args) {
    return new Promise((resolve, reject) => {
        fn(...args, (err, res) => (err ? reject(err) : resolve(res)));
    });
}

function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

function connect(addr) {
    const client = zookeeper.createClient(addr, { sessionTimeout: 15000, spinDelay: 100, retries: 2 });
    return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('not connected to ' + addr + ' within 10 s')), 10000);
        client.once('connected', () => {
            clearTimeout(timer);
            resolve(client);
        });
        client.connect();
    });
}

// seq is the sequence number of a lock znode's name.
function seq(name) {
    return parseInt(name.slice(name.lastIndexOf('-lock-') + 6), 10);
}

async function lock(client, dir, guid) {
    const path = await call(client.create.bind(client), dir + '/' + guid + '-lock-',
        zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL);
    const mine = path.slice(dir.length + 1);
    for (;;) {
        const children = await call(client.getChildren.bind(client), dir);
        const before = children.filter((c) => seq(c) < seq(mine)).sort((a, b) => seq(a) - seq(b));
        if (!children.includes(mine)) {
            throw new Error('own lock znode ' + mine + ' missing from ' + children.join(','));
        }
        if (before.length === 0) {
            return path;
        }
        const prev = dir + '/' + before[before.length - 1];
        let fired;
        const watched = new Promise((resolve) => { fired = resolve; });
        const stat = await call(client.exists.bind(client), prev, (event) => fired(event));
        if (stat) {
            await watched;
        }
    }
}

async function main() {
    if (process.argv.length !== 5) {
        usage();
    }
    const addr = process.argv[2];
    const clients = parseInt(process.argv[3], 10);
    const rounds = parseInt(process.argv[4], 10);
    if (!(clients > 0 && rounds > 0)) {
        usage();
    }
    const start = Date.now();
    const dir = '/node-lock-' + process.pid + '-' + start;
    const problems = [];
    let holders = 0;
    let acquired = 0;
    let overlaps = 0;

    const conns = await Promise.all(Array.from({ length: clients }, () => connect(addr)));
    await call(conns[0].mkdirp.bind(conns[0]), dir);

    await Promise.all(conns.map(async (client, c) => {
        const guid = crypto.randomUUID();
        for (let r = 0; r < rounds; r++) {
            const path = await lock(client, dir, guid);
            holders++;
            if (holders !== 1) {
                overlaps++;
                problems.push('OVERLAP client ' + c + ' round ' + r + ': ' + holders + ' holders');
            }
            await sleep(HOLD_MS);
            holders--;
            acquired++;
            await call(client.remove.bind(client), path, -1);
        }
    }));

    for (const client of conns) {
        client.close();
    }
    for (const p of problems) {
        console.error(p);
    }
    console.log('node-zookeeper-client: clients=' + clients + ' rounds=' + rounds + ' acquired=' + acquired +
        ' overlaps=' + overlaps + ' ms=' + (Date.now() - start));
    process.exit(overlaps === 0 && acquired === clients * rounds ? 0 : 1);
}

setTimeout(() => {
    console.error('lock.js: not done within ' + LIMIT_MS / 1000 + ' s');
    process.exit(1);
}, LIMIT_MS).unref();

main().catch((err) => {
    console.error('lock.js: ' + (err && err.stack ? err.stack : err));
    process.exit(1);
});
