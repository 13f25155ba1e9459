package lazyfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/latchd/latch/internal/vfs"
)

// mountT mounts a lazyfs over a new backing directory and returns it; the
// test's end unmounts it. It fails (rather than skip) without root or
// /dev/fuse: CI runs as root, with FUSE.
func mountT(t *testing.T) *FS {
	t.Helper()
	return mountOpts(t, Options{})
}

func mountOpts(t *testing.T, opts Options) *FS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("lazyfs: needs root, to mount a FUSE file system")
	}
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "disk"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Mount(backing, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	return f
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data to a new file at path, syncs it and, with dir,
// its directory.
func writeFile(t *testing.T, path string, data []byte, dir bool) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if dir {
		syncDir(t, filepath.Dir(path))
	}
}

func crash(t *testing.T, f *FS, rng *rand.Rand) {
	t.Helper()
	if err := f.Crash(rng); err != nil {
		t.Fatal(err)
	}
}

func wantFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes %.40q, want %d bytes %.40q", path, len(got), got, len(want), want)
	}
}

func wantMissing(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: %v, want it missing", path, err)
	}
}

func TestWriteSyncWriteCrash(t *testing.T) {
	f := mountT(t)
	p := filepath.Join(f.Mountpoint(), "log")
	writeFile(t, p, []byte("synced,"), true)
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt(bytes.Repeat([]byte("lost,"), 300), 7); err != nil {
		t.Fatal(err)
	}
	// Overwrites in the synced part, too.
	if _, err := w.WriteAt([]byte("SYN"), 0); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if files, _ := f.Unsynced(); !slices.Equal(files, []string{"log"}) {
		t.Fatalf("files unsynced: %q, want log", files)
	}
	crash(t, f, nil)
	wantFile(t, p, []byte("synced,"))

	// A write synced by fdatasync stays.
	w, err = os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt([]byte("kept"), 7); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fdatasync(int(w.Fd())); err != nil {
		t.Fatal(err)
	}
	w.Close()
	crash(t, f, nil)
	wantFile(t, p, []byte("synced,kept"))
}

func TestCreateWithoutDirSyncCrash(t *testing.T) {
	f := mountT(t)
	p := filepath.Join(f.Mountpoint(), "new")
	writeFile(t, p, []byte("data"), false)
	crash(t, f, nil)
	wantMissing(t, p)
	if files, ops := f.Unsynced(); len(files)+len(ops) != 0 {
		t.Fatalf("unsynced after a crash: %q, %q", files, ops)
	}

	// With its directory synced, it stays; in a new directory, that
	// directory's entry must be synced too.
	writeFile(t, p, []byte("data"), true)
	sub := filepath.Join(f.Mountpoint(), "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sub, "f"), []byte("x"), true)
	crash(t, f, nil)
	wantFile(t, p, []byte("data"))
	wantMissing(t, sub)
}

func TestRenameCrash(t *testing.T) {
	f := mountT(t)
	mnt := f.Mountpoint()
	p, tmp := filepath.Join(mnt, "meta"), filepath.Join(mnt, "meta.tmp")
	writeFile(t, p, []byte("old"), true)
	writeFile(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	wantFile(t, p, []byte("new"))
	crash(t, f, nil)
	wantFile(t, p, []byte("old"))
	wantFile(t, tmp, []byte("new"))

	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	crash(t, f, nil)
	wantFile(t, p, []byte("new"))
	wantMissing(t, tmp)
}

func TestRemoveCrash(t *testing.T) {
	f := mountT(t)
	mnt := f.Mountpoint()
	p, d := filepath.Join(mnt, "f"), filepath.Join(mnt, "d")
	writeFile(t, p, []byte("content"), true)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(d); err != nil {
		t.Fatal(err)
	}
	wantMissing(t, p)
	crash(t, f, nil)
	wantFile(t, p, []byte("content"))
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		t.Fatalf("%s: %v, want a directory", d, err)
	}

	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	crash(t, f, nil)
	wantMissing(t, p)
	if names, _ := os.ReadDir(f.trash); len(names) != 0 {
		t.Fatalf("the trash holds %d entries after a crash", len(names))
	}
}

func TestTruncateCrash(t *testing.T) {
	f := mountT(t)
	p := filepath.Join(f.Mountpoint(), "f")
	data := make([]byte, 5000)
	for i := range data {
		data[i] = byte(i)
	}
	writeFile(t, p, data, true)
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 8000); err != nil {
		t.Fatal(err)
	}
	crash(t, f, nil)
	wantFile(t, p, data)

	// O_TRUNC too.
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("short"))
	w.Close()
	crash(t, f, nil)
	wantFile(t, p, data)
}

// A torn crash leaves each sector written since the sync old or new, and
// the file's size old or new.
func TestTornCrash(t *testing.T) {
	f := mountT(t)
	p := filepath.Join(f.Mountpoint(), "f")
	const sectors = 64
	old := bytes.Repeat([]byte{'o'}, sectors/2*sectorSize)
	rng := rand.New(rand.NewPCG(1, 2))
	var sizes []int
	for range 20 {
		writeFile(t, p, old, true)
		w, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteAt(bytes.Repeat([]byte{'n'}, sectors*sectorSize), 0); err != nil {
			t.Fatal(err)
		}
		w.Close()
		crash(t, f, rng)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(old) && len(got) != sectors*sectorSize {
			t.Fatalf("size %d, want %d or %d", len(got), len(old), sectors*sectorSize)
		}
		sizes = append(sizes, len(got))
		var kinds []byte
		for s := 0; s < len(got); s += sectorSize {
			sec := got[s : s+sectorSize]
			c := sec[0]
			if bytes.Count(sec, sec[:1]) != sectorSize || c != 'o' && c != 'n' && c != 0 || c == 'o' && s >= len(old) || c == 0 && s < len(old) {
				t.Fatalf("sector %d is %.20q...", s/sectorSize, sec)
			}
			if !slices.Contains(kinds, c) {
				kinds = append(kinds, c)
			}
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		syncDir(t, f.Mountpoint())
	}
	slices.Sort(sizes)
	if sizes[0] == sizes[len(sizes)-1] {
		t.Errorf("every torn crash left size %d", sizes[0])
	}
}

// flock is the kernel's, on the mount: a second lock is refused while the
// first is held, and given once it is released.
func TestFlock(t *testing.T) {
	f := mountT(t)
	p := filepath.Join(f.Mountpoint(), "lock")
	a, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := unix.Flock(int(a.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(b.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != unix.EWOULDBLOCK {
		t.Fatalf("second flock: %v, want EWOULDBLOCK", err)
	}
	a.Close()
	if err := unix.Flock(int(b.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("flock after the holder closed: %v", err)
	}
}

// syncfs(2) on a FUSE mount does not reach the file system (the kernel
// sends FUSE_SYNCFS to virtiofs only): what it would have synced stays
// unsynced, and a crash loses it. If this fails, the kernel now asks, and
// lazyfs should answer it.
func TestSyncfsNotSeen(t *testing.T) {
	f := mountT(t)
	p := filepath.Join(f.Mountpoint(), "f")
	writeFile(t, p, []byte("synced"), true)
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write([]byte(",unsynced")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Syncfs(int(w.Fd())); err != nil {
		t.Fatal(err)
	}
	if files, _ := f.Unsynced(); len(files) != 1 {
		t.Fatalf("files unsynced after syncfs: %q, want f (syncfs not seen)", files)
	}
}

// vfs.OS.SyncAll, which a node runs at its start before it trusts its
// data dir, fsyncs each file and directory after its syncfs: lazyfs sees
// that, and a crash then loses nothing.
func TestSyncAll(t *testing.T) {
	f := mountT(t)
	mnt := f.Mountpoint()
	sub := filepath.Join(mnt, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(mnt, "a"), filepath.Join(sub, "b")} {
		if err := os.WriteFile(p, []byte("unsynced"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := vfs.OS.SyncAll(mnt); err != nil {
		t.Fatal(err)
	}
	if files, ops := f.Unsynced(); len(files)+len(ops) != 0 {
		t.Fatalf("unsynced after SyncAll: %q, %q", files, ops)
	}
	crash(t, f, nil)
	wantFile(t, filepath.Join(mnt, "a"), []byte("unsynced"))
	wantFile(t, filepath.Join(sub, "b"), []byte("unsynced"))
}

// mmapEnv, set, makes TestMmap the helper process that maps the file it
// names: the process that serves a mount must not touch its files through
// mmap, whose page faults the Go runtime cannot preempt, so that a garbage
// collection waits for a fault that waits for the stopped server.
const mmapEnv = "LAZYFS_TEST_MMAP"

// A file on lazyfs can be mapped, and the mapping sees what is written
// through the file (the kernel's page cache, as bbolt uses it: reads
// through a read-only shared mapping, writes with pwrite), before a crash
// and after.
func TestMmap(t *testing.T) {
	if p := os.Getenv(mmapEnv); p != "" {
		mmapHelper(t, p, os.Getenv(mmapEnv+"_WANT"))
		return
	}
	f := mountT(t)
	p := filepath.Join(f.Mountpoint(), "mapped")
	run := func(want string) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestMmap$", "-test.v")
		cmd.Env = append(os.Environ(), mmapEnv+"="+p, mmapEnv+"_WANT="+want)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mmap helper: %v\n%s", err, out)
		}
	}
	writeFile(t, p, bytes.Repeat([]byte{'s'}, 3*4096), true)
	run("s")
	crash(t, f, nil)
	run("s")
}

// mmapHelper maps the file at p, which must hold only byte want[0],
// writes through the file and reads it back through the mapping.
func mmapHelper(t *testing.T, p, want string) {
	fd, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(fd.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if bytes.Count(m, []byte(want)) != len(m) {
		t.Fatalf("the mapping holds %.20q..., want only %q", m, want)
	}
	// A whole page and a part of one, written through the file.
	if _, err := fd.WriteAt(bytes.Repeat([]byte{'n'}, 4096+100), 4096); err != nil {
		t.Fatal(err)
	}
	if m[4095] != want[0] || m[4096] != 'n' || m[8191] != 'n' || m[8196] != 'n' || m[8196+100] != want[0] {
		t.Fatalf("the mapping does not see the write: %q %q %q %q %q", m[4095], m[4096], m[8191], m[8196], m[8196+100])
	}
}

// A sync makes nothing durable until its delay has passed.
func TestSyncDelay(t *testing.T) {
	f := mountOpts(t, Options{SyncDelay: 300 * time.Millisecond})
	w, err := os.Create(filepath.Join(f.Mountpoint(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	synced := make(chan error, 1)
	start := time.Now()
	go func() { synced <- w.Sync() }()
	time.Sleep(100 * time.Millisecond)
	if files, _ := f.Unsynced(); len(files) != 1 {
		t.Fatalf("files unsynced during the sync: %q, want f", files)
	}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("the sync took %v", d)
	}
	if files, _ := f.Unsynced(); len(files) != 0 {
		t.Fatalf("files unsynced after the sync: %q", files)
	}
}

// A cut during a sync fails it, and the crash then loses what it would
// have made durable.
func TestCutDuringSync(t *testing.T) {
	f := mountOpts(t, Options{SyncDelay: 300 * time.Millisecond})
	p := filepath.Join(f.Mountpoint(), "f")
	writeFile(t, p, []byte("synced"), true)
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt([]byte("SYNCED"), 0); err != nil {
		t.Fatal(err)
	}
	synced := make(chan error, 1)
	go func() { synced <- w.Sync() }()
	time.Sleep(100 * time.Millisecond)
	f.Cut()
	if err := <-synced; !errors.Is(err, syscall.EIO) {
		t.Fatalf("a sync cut short: %v, want EIO", err)
	}
	if _, err := w.WriteAt([]byte("x"), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a write after the cut: %v, want EIO", err)
	}
	w.Close()
	crash(t, f, nil)
	wantFile(t, p, []byte("synced"))
}

// A crash while a file is still open detaches the old mount, whose file
// then refuses every change: the undo is not raced.
func TestCrashWhileBusy(t *testing.T) {
	defer func(d time.Duration) { busyWait = d }(busyWait)
	busyWait = 300 * time.Millisecond
	f := mountT(t)
	p := filepath.Join(f.Mountpoint(), "f")
	writeFile(t, p, []byte("synced"), true)
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	crash(t, f, nil)
	if _, err := w.WriteAt([]byte("late"), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a write through the detached mount: %v, want EIO", err)
	}
	w.Close()
	wantFile(t, p, []byte("synced"))
}
