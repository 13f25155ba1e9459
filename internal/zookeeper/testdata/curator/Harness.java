// Harness drives Apache Curator's lock recipes (Debian's libcurator-recipes-java)
// against one ZooKeeper server and checks that they exclude.
//
// Usage: java -cp DIR:/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar \
//            Harness HOST:PORT CLIENTS ROUNDS
//
// CLIENTS clients, each with a CuratorFramework (a ZooKeeper session) of
// its own, run one phase per recipe, ROUNDS rounds each:
//
//   mutex      InterProcessMutex: at most one holder.
//   rwlock     InterProcessReadWriteLock, clients alternating reads and
//              writes: at most one writer, and no reader while a writer holds.
//   semaphore  InterProcessSemaphoreV2 with LEASES leases: at most LEASES held.
//   leader     LeaderLatch: each round a client joins the election, waits to
//              lead, then leaves (closing its latch): at most one leader.
//
// Each phase counts the holders inside the critical section in an
// AtomicInteger (the overlap detector) and sleeps there for a few
// milliseconds, so that a second grant would be seen. The last line on
// stdout is the summary:
//
//   curator: clients=4 rounds=10 mutex=40 rwlock=40 read=20 write=20 maxreaders=2
//            semaphore=40 leases=2 maxleases=2 leader=40 overlaps=0 errors=0 ms=1234
//
// (on one line). The exit status is 0 when every round of every phase ran
// and no overlap or error was seen, 1 otherwise (the overlaps and errors
// are printed on stderr), 2 on bad arguments.

import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class Harness {
    static final int LEASES = 2;
    static final long WAIT_S = 20; // one acquisition's bound
    static final long PHASE_S = 60; // one phase's bound
    static final long HOLD_MS = 3; // time inside a critical section

    static final Queue<String> problems = new ConcurrentLinkedQueue<>();
    static final AtomicInteger overlaps = new AtomicInteger();
    static final AtomicInteger errors = new AtomicInteger();

    interface Round {
        void run(int client, int round) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Harness HOST:PORT CLIENTS ROUNDS");
            System.exit(2);
        }
        String connect = args[0];
        int clients = Integer.parseInt(args[1]);
        int rounds = Integer.parseInt(args[2]);
        String base = "/curator-harness-" + System.nanoTime();
        long start = System.nanoTime();

        CuratorFramework[] cf = new CuratorFramework[clients];
        for (int i = 0; i < clients; i++) {
            cf[i] = CuratorFrameworkFactory.newClient(connect, 15000, 10000,
                    new ExponentialBackoffRetry(100, 3));
            cf[i].start();
            if (!cf[i].blockUntilConnected(10, TimeUnit.SECONDS)) {
                System.err.println("client " + i + ": not connected to " + connect + " within 10 s");
                System.exit(1);
            }
        }

        // mutex
        AtomicInteger holders = new AtomicInteger();
        InterProcessMutex[] mutex = new InterProcessMutex[clients];
        for (int i = 0; i < clients; i++) {
            mutex[i] = new InterProcessMutex(cf[i], base + "/mutex");
        }
        int mutexDone = phase("mutex", clients, rounds, (c, r) -> {
            if (!mutex[c].acquire(WAIT_S, TimeUnit.SECONDS)) {
                throw new Exception("not acquired within " + WAIT_S + " s");
            }
            try {
                hold("mutex", c, r, holders.incrementAndGet(), 1);
            } finally {
                holders.decrementAndGet();
                mutex[c].release();
            }
        });

        // rwlock
        AtomicInteger writers = new AtomicInteger();
        AtomicInteger readers = new AtomicInteger();
        AtomicInteger reads = new AtomicInteger();
        AtomicInteger writes = new AtomicInteger();
        AtomicInteger maxReaders = new AtomicInteger();
        InterProcessReadWriteLock[] rw = new InterProcessReadWriteLock[clients];
        for (int i = 0; i < clients; i++) {
            rw[i] = new InterProcessReadWriteLock(cf[i], base + "/rwlock");
        }
        int rwDone = phase("rwlock", clients, rounds, (c, r) -> {
            boolean write = (c + r) % 2 == 0;
            InterProcessMutex lock = write ? rw[c].writeLock() : rw[c].readLock();
            if (!lock.acquire(WAIT_S, TimeUnit.SECONDS)) {
                throw new Exception((write ? "write" : "read") + " lock not acquired within " + WAIT_S + " s");
            }
            try {
                if (write) {
                    writes.incrementAndGet();
                    int w = writers.incrementAndGet();
                    try {
                        int rd = readers.get();
                        if (rd != 0) {
                            overlap("rwlock", c, r, "writer while " + rd + " readers hold");
                        }
                        hold("rwlock writer", c, r, w, 1);
                    } finally {
                        writers.decrementAndGet();
                    }
                } else {
                    reads.incrementAndGet();
                    int rd = readers.incrementAndGet();
                    maxReaders.accumulateAndGet(rd, Math::max);
                    try {
                        int w = writers.get();
                        if (w != 0) {
                            overlap("rwlock", c, r, "reader while " + w + " writers hold");
                        }
                        Thread.sleep(HOLD_MS);
                        w = writers.get();
                        if (w != 0) {
                            overlap("rwlock", c, r, "reader while " + w + " writers hold");
                        }
                    } finally {
                        readers.decrementAndGet();
                    }
                }
            } finally {
                lock.release();
            }
        });

        // semaphore
        AtomicInteger leases = new AtomicInteger();
        AtomicInteger maxLeases = new AtomicInteger();
        InterProcessSemaphoreV2[] sem = new InterProcessSemaphoreV2[clients];
        for (int i = 0; i < clients; i++) {
            sem[i] = new InterProcessSemaphoreV2(cf[i], base + "/semaphore", LEASES);
        }
        int semDone = phase("semaphore", clients, rounds, (c, r) -> {
            Lease lease = sem[c].acquire(WAIT_S, TimeUnit.SECONDS);
            if (lease == null) {
                throw new Exception("no lease within " + WAIT_S + " s");
            }
            try {
                int n = leases.incrementAndGet();
                maxLeases.accumulateAndGet(n, Math::max);
                hold("semaphore", c, r, n, LEASES);
            } finally {
                leases.decrementAndGet();
                sem[c].returnLease(lease);
            }
        });

        // leader
        AtomicInteger leaders = new AtomicInteger();
        int leaderDone = phase("leader", clients, rounds, (c, r) -> {
            LeaderLatch latch = new LeaderLatch(cf[c], base + "/leader", "client-" + c);
            latch.start();
            try {
                if (!latch.await(WAIT_S, TimeUnit.SECONDS)) {
                    throw new Exception("not leader within " + WAIT_S + " s");
                }
                try {
                    hold("leader", c, r, leaders.incrementAndGet(), 1);
                    if (!latch.hasLeadership()) {
                        overlap("leader", c, r, "leadership lost while leading");
                    }
                } finally {
                    leaders.decrementAndGet();
                }
            } finally {
                latch.close();
            }
        });

        for (CuratorFramework f : cf) {
            f.close();
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        for (String p : problems) {
            System.err.println(p);
        }
        int want = clients * rounds;
        boolean ok = overlaps.get() == 0 && errors.get() == 0 && mutexDone == want && rwDone == want
                && semDone == want && leaderDone == want;
        System.out.println("curator: clients=" + clients + " rounds=" + rounds
                + " mutex=" + mutexDone
                + " rwlock=" + rwDone + " read=" + reads.get() + " write=" + writes.get()
                + " maxreaders=" + maxReaders.get()
                + " semaphore=" + semDone + " leases=" + LEASES + " maxleases=" + maxLeases.get()
                + " leader=" + leaderDone
                + " overlaps=" + overlaps.get() + " errors=" + errors.get() + " ms=" + ms);
        System.exit(ok ? 0 : 1);
    }

    // hold checks that n holders, the caller included, are at most max,
    // then stays in the critical section for HOLD_MS.
    static void hold(String what, int c, int r, int n, int max) throws InterruptedException {
        if (n > max) {
            overlap(what, c, r, n + " holders, at most " + max + " allowed");
        }
        Thread.sleep(HOLD_MS);
    }

    static void overlap(String what, int c, int r, String msg) {
        overlaps.incrementAndGet();
        problems.add("OVERLAP " + what + " client " + c + " round " + r + ": " + msg);
    }

    // phase runs rounds rounds of body on each of clients threads and
    // returns the number of rounds that completed.
    static int phase(String name, int clients, int rounds, Round body) throws InterruptedException {
        AtomicInteger done = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            final int c = i;
            Thread t = new Thread(() -> {
                for (int r = 0; r < rounds; r++) {
                    try {
                        body.run(c, r);
                        done.incrementAndGet();
                    } catch (Exception e) {
                        errors.incrementAndGet();
                        problems.add("ERROR " + name + " client " + c + " round " + r + ": " + e);
                        return;
                    }
                }
            }, name + "-" + i);
            t.setDaemon(true);
            threads.add(t);
            t.start();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(PHASE_S);
        for (Thread t : threads) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            if (left > 0) {
                t.join(left);
            }
            if (t.isAlive()) {
                errors.incrementAndGet();
                problems.add("ERROR " + name + ": " + t.getName() + " still running after " + PHASE_S + " s");
            }
        }
        return done.get();
    }
}
