package crashfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/latchd/latch/internal/vfs"
)

var errInjected = errors.New("injected")

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// write writes data at off in file name, creating it, and syncs it if
// sync is set.
func write(t *testing.T, fsys *FS, name string, off int64, data string, sync bool) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	must(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte(data), off)
	must(t, err)
	if sync {
		must(t, f.Sync())
	}
}

// durable makes file name hold data durably, in directories that are
// durable too.
func durable(t *testing.T, fsys *FS, name, data string) {
	t.Helper()
	must(t, vfs.MkdirAll(fsys, path.Dir(name), 0o700))
	must(t, vfs.WriteFile(fsys, name, []byte(data)))
}

// tree returns what fsys holds: each file's contents under its path, and
// "" under each directory's path with a slash after it.
func tree(t *testing.T, fsys vfs.FS) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fsys.ReadDir(dir)
		must(t, err)
		for _, name := range names {
			p := path.Join(dir, name)
			fi, err := fsys.Stat(p)
			must(t, err)
			if fi.IsDir() {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			b, err := vfs.ReadFile(fsys, p)
			must(t, err)
			out[p] = string(b)
		}
	}
	walk("/")
	return out
}

func checkTree(t *testing.T, what string, fsys vfs.FS, want map[string]string) {
	t.Helper()
	if got := tree(t, fsys); !maps.Equal(got, want) {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}

func TestCrash(t *testing.T) {
	zeros := func(n int) string { return string(make([]byte, n)) }
	tests := []struct {
		name string
		do   func(t *testing.T, fsys *FS)
		// What a power loss with keep 0 leaves, and what Kill leaves.
		lost, killed map[string]string
		// What a power loss with keep 1 leaves, if not killed.
		kept map[string]string
	}{{
		name:   "written, not synced",
		do:     func(t *testing.T, fsys *FS) { durable(t, fsys, "/f", ""); write(t, fsys, "/f", 0, "hello", false) },
		lost:   map[string]string{"/f": ""},
		killed: map[string]string{"/f": "hello"},
	}, {
		name: "created and synced, directory not synced",
		do:   func(t *testing.T, fsys *FS) { write(t, fsys, "/f", 0, "hello", true) },
		lost: map[string]string{}, killed: map[string]string{"/f": "hello"},
	}, {
		name: "created and synced, directory synced",
		do: func(t *testing.T, fsys *FS) {
			write(t, fsys, "/f", 0, "hello", true)
			must(t, fsys.SyncDir("/"))
		},
		lost: map[string]string{"/f": "hello"}, killed: map[string]string{"/f": "hello"},
	}, {
		name: "directory synced, file not",
		do: func(t *testing.T, fsys *FS) {
			write(t, fsys, "/f", 0, "hello", false)
			must(t, fsys.SyncDir("/"))
		},
		lost: map[string]string{"/f": ""}, killed: map[string]string{"/f": "hello"},
	}, {
		name: "rewritten in place, not synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/f", "hello")
			write(t, fsys, "/f", 0, "J", false)
		},
		lost: map[string]string{"/f": "hello"}, killed: map[string]string{"/f": "Jello"},
	}, {
		name: "renamed, not synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/a", "old")
			must(t, fsys.Rename("/a", "/b"))
		},
		lost: map[string]string{"/a": "old"}, killed: map[string]string{"/b": "old"},
	}, {
		name: "renamed, synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/a", "old")
			must(t, fsys.Rename("/a", "/b"))
			must(t, fsys.SyncDir("/"))
		},
		lost: map[string]string{"/b": "old"}, killed: map[string]string{"/b": "old"},
	}, {
		name: "renamed over a file, not synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/a", "A")
			durable(t, fsys, "/b", "B")
			must(t, fsys.Rename("/a", "/b"))
		},
		lost: map[string]string{"/a": "A", "/b": "B"}, killed: map[string]string{"/b": "A"},
	}, {
		name: "renamed across directories, the old one synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/x/f", "f")
			must(t, vfs.MkdirAll(fsys, "/y", 0o700))
			must(t, fsys.Rename("/x/f", "/y/f"))
			must(t, fsys.SyncDir("/x"))
		},
		lost:   map[string]string{"/x/": "", "/y/": "", "/y/f": "f"},
		killed: map[string]string{"/x/": "", "/y/": "", "/y/f": "f"},
	}, {
		name: "renamed across directories, the new one synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/x/f", "f")
			must(t, vfs.MkdirAll(fsys, "/y", 0o700))
			must(t, fsys.Rename("/x/f", "/y/f"))
			must(t, fsys.SyncDir("/y"))
		},
		lost:   map[string]string{"/x/": "", "/y/": "", "/y/f": "f"},
		killed: map[string]string{"/x/": "", "/y/": "", "/y/f": "f"},
	}, {
		name: "renamed into a directory not synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/f", "f")
			must(t, fsys.Mkdir("/d", 0o700))
			must(t, fsys.Rename("/f", "/d/f"))
			must(t, fsys.SyncDir("/d"))
		},
		lost:   map[string]string{"/d/": "", "/d/f": "f"},
		killed: map[string]string{"/d/": "", "/d/f": "f"},
	}, {
		name: "removed, not synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/f", "hello")
			write(t, fsys, "/f", 0, "J", false)
			must(t, fsys.Remove("/f"))
		},
		lost: map[string]string{"/f": "hello"}, killed: map[string]string{},
	}, {
		name: "removed, synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/f", "hello")
			must(t, fsys.Remove("/f"))
			must(t, fsys.SyncDir("/"))
		},
		lost: map[string]string{}, killed: map[string]string{},
	}, {
		name: "truncated, not synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/f", "hello world")
			f, err := fsys.OpenFile("/f", os.O_RDWR, 0)
			must(t, err)
			must(t, f.Truncate(5))
			must(t, f.Close())
		},
		lost: map[string]string{"/f": "hello world"}, killed: map[string]string{"/f": "hello"},
	}, {
		name: "opened with O_TRUNC, then synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/f", "hello world")
			f, err := fsys.OpenFile("/f", os.O_RDWR|os.O_TRUNC, 0)
			must(t, err)
			must(t, f.Datasync())
			must(t, f.Close())
		},
		lost: map[string]string{"/f": ""}, killed: map[string]string{"/f": ""},
	}, {
		name: "grown past a hole, not synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/f", "hi")
			write(t, fsys, "/f", 1000, "!", false)
		},
		lost: map[string]string{"/f": "hi"}, killed: map[string]string{"/f": "hi" + zeros(998) + "!"},
	}, {
		name: "made in a directory whose parent was not synced",
		do: func(t *testing.T, fsys *FS) {
			must(t, fsys.Mkdir("/d", 0o700))
			write(t, fsys, "/d/f", 0, "x", true)
			must(t, fsys.SyncDir("/d"))
		},
		lost: map[string]string{}, killed: map[string]string{"/d/": "", "/d/f": "x"},
	}, {
		name: "SyncAll",
		do: func(t *testing.T, fsys *FS) {
			must(t, fsys.Mkdir("/d", 0o700))
			write(t, fsys, "/d/f", 0, "x", false)
			write(t, fsys, "/g", 0, "y", false)
			must(t, fsys.SyncAll("/"))
		},
		lost:   map[string]string{"/d/": "", "/d/f": "x", "/g": "y"},
		killed: map[string]string{"/d/": "", "/d/f": "x", "/g": "y"},
	}, {
		name: "a failed Datasync, then one that succeeds",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/f", "")
			f, err := fsys.OpenFile("/f", os.O_RDWR, 0)
			must(t, err)
			defer f.Close()
			_, err = f.WriteAt([]byte("hello"), 0)
			must(t, err)
			fsys.SetFault(func(ev Event) error {
				if ev.Op == OpDatasync {
					return errInjected
				}
				return nil
			})
			if err := f.Datasync(); !errors.Is(err, errInjected) {
				t.Fatalf("Datasync: %v, want the injected error", err)
			}
			fsys.SetFault(nil)
			must(t, f.Datasync())
		},
		// The size reached the disk, the data did not.
		lost: map[string]string{"/f": zeros(5)}, killed: map[string]string{"/f": "hello"},
		kept: map[string]string{"/f": zeros(5)},
	}, {
		name: "a failed Sync, then written again and synced",
		do: func(t *testing.T, fsys *FS) {
			durable(t, fsys, "/f", "")
			f, err := fsys.OpenFile("/f", os.O_RDWR, 0)
			must(t, err)
			defer f.Close()
			_, err = f.WriteAt([]byte("hello"), 0)
			must(t, err)
			fsys.SetFault(func(Event) error { return errInjected })
			if err := f.Sync(); !errors.Is(err, errInjected) {
				t.Fatalf("Sync: %v, want the injected error", err)
			}
			fsys.SetFault(nil)
			_, err = f.WriteAt([]byte("J"), 0) // the same sector
			must(t, err)
			must(t, f.Sync())
		},
		lost: map[string]string{"/f": "Jello"}, killed: map[string]string{"/f": "Jello"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := New()
			tc.do(t, fsys)
			kept := tc.kept
			if kept == nil {
				kept = tc.killed
			}
			checkTree(t, "CrashClone keep 0", fsys.CrashClone(nil, 0), tc.lost)
			checkTree(t, "CrashClone keep 1", fsys.CrashClone(nil, 1), kept)
			checkTree(t, "the original after CrashClone", fsys, tc.killed)
			fsys.Kill()
			checkTree(t, "Kill", fsys, tc.killed)
			fsys.PowerLoss(nil, 0)
			checkTree(t, "PowerLoss keep 0", fsys, tc.lost)
		})
	}
}

// TestTornWrite checks that a power loss keeps each sector of an unsynced
// write whole or not at all, independently.
func TestTornWrite(t *testing.T) {
	const old, grown = 8, 12 // sectors
	fsys := New()
	durable(t, fsys, "/f", strings.Repeat("a", old*SectorSize))
	write(t, fsys, "/f", 0, strings.Repeat("b", grown*SectorSize), false)

	torn, sizes := false, map[int]bool{}
	for seed := range uint64(200) {
		got, err := vfs.ReadFile(fsys.CrashClone(rand.New(rand.NewPCG(seed, 0)), 0.5), "/f")
		must(t, err)
		again, err := vfs.ReadFile(fsys.CrashClone(rand.New(rand.NewPCG(seed, 0)), 0.5), "/f")
		must(t, err)
		if !bytes.Equal(got, again) {
			t.Fatalf("seed %d: two power losses differ", seed)
		}
		if len(got) != old*SectorSize && len(got) != grown*SectorSize {
			t.Fatalf("seed %d: %d bytes, want %d or %d", seed, len(got), old*SectorSize, grown*SectorSize)
		}
		sizes[len(got)] = true
		var kept []bool
		for i := range len(got) / SectorSize {
			s := got[i*SectorSize : (i+1)*SectorSize]
			was := byte('a')
			if i >= old {
				was = 0
			}
			switch {
			case bytes.Count(s, []byte{'b'}) == SectorSize:
				kept = append(kept, true)
			case bytes.Count(s, []byte{was}) == SectorSize:
				kept = append(kept, false)
			default:
				t.Fatalf("seed %d: sector %d is neither old nor new: %q", seed, i, s)
			}
		}
		if slices.Contains(kept, true) && slices.Contains(kept, false) {
			torn = true
		}
	}
	if !torn || len(sizes) != 2 {
		t.Errorf("200 power losses with keep 0.5: torn %v, sizes %v; want torn writes and both sizes", torn, sizes)
	}
}

// TestCrashBounds runs random workloads, and checks after each step that
// keep 1 leaves what is there now, that a power loss of what keep 0 left
// changes nothing (it is all durable), and that a power loss depends only
// on its seed.
func TestCrashBounds(t *testing.T) {
	names := []string{"/a", "/b", "/d/a", "/d/b", "/e/a", "/d/e/a"}
	dirs := []string{"/d", "/e", "/d/e"}
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 1))
		fsys := New()
		pick := func(s []string) string { return s[rng.IntN(len(s))] }
		for step := range 60 {
			switch rng.IntN(9) {
			case 0, 1:
				f, err := fsys.OpenFile(pick(names), os.O_RDWR|os.O_CREATE, 0o600)
				if err == nil {
					f.WriteAt(bytes.Repeat([]byte{byte(step)}, rng.IntN(3*SectorSize)), rng.Int64N(2*SectorSize))
					if rng.IntN(2) == 0 {
						f.Sync()
					}
					f.Close()
				}
			case 2:
				f, err := fsys.OpenFile(pick(names), os.O_RDWR, 0)
				if err == nil {
					f.Truncate(rng.Int64N(3 * SectorSize))
					f.Close()
				}
			case 3:
				fsys.Mkdir(pick(dirs), 0o700)
			case 4:
				fsys.Rename(pick(names), pick(names))
			case 5:
				fsys.Rename(pick(dirs), pick(dirs))
			case 6:
				fsys.Remove(pick(append(names, dirs...)))
			case 7:
				fsys.SyncDir(pick(append(dirs, "/")))
			case 8:
				fsys.SyncAll(pick(append(dirs, "/")))
			}
			now := tree(t, fsys)
			checkTree(t, fmt.Sprintf("seed %d step %d: keep 1", seed, step), fsys.CrashClone(nil, 1), now)
			synced := fsys.CrashClone(nil, 0)
			checkTree(t, fmt.Sprintf("seed %d step %d: keep 0.5 after keep 0", seed, step),
				synced.CrashClone(rand.New(rand.NewPCG(seed, 2)), 0.5), tree(t, synced))
			a := tree(t, fsys.CrashClone(rand.New(rand.NewPCG(seed, 3)), 0.5))
			checkTree(t, fmt.Sprintf("seed %d step %d: same seed", seed, step),
				fsys.CrashClone(rand.New(rand.NewPCG(seed, 3)), 0.5), a)
			if t.Failed() {
				return
			}
		}
	}
}

// TestDirectoryRenames swaps two directories' nesting with two renames
// not synced: a power loss must keep both or neither, never a directory
// inside itself.
func TestDirectoryRenames(t *testing.T) {
	fsys := New()
	durable(t, fsys, "/x/y/f", "f")
	must(t, fsys.Rename("/x/y", "/y"))
	must(t, fsys.Rename("/x", "/y/x"))
	before := map[string]string{"/x/": "", "/x/y/": "", "/x/y/f": "f"}
	after := map[string]string{"/y/": "", "/y/x/": "", "/y/f": "f"}
	seen := map[bool]bool{}
	for seed := range uint64(50) {
		got := tree(t, fsys.CrashClone(rand.New(rand.NewPCG(seed, 0)), 0.5))
		if !maps.Equal(got, before) && !maps.Equal(got, after) {
			t.Fatalf("seed %d: %q, want %q or %q", seed, got, before, after)
		}
		seen[maps.Equal(got, after)] = true
	}
	if len(seen) != 2 {
		t.Errorf("50 power losses with keep 0.5 all left the same tree")
	}
}

// TestWriteFileCrashes crashes vfs.WriteFile after each of its operations
// in turn: each power loss must leave the old contents or the new, and
// the new once it returned.
func TestWriteFileCrashes(t *testing.T) {
	setup := func() *FS {
		fsys := New()
		durable(t, fsys, "/d/f", "old")
		return fsys
	}
	run := func(fsys *FS) error { return vfs.WriteFile(fsys, "/d/f", []byte("new")) }
	fsys := setup()
	from := fsys.Ops()
	must(t, run(fsys))
	to := fsys.Ops()
	for k := from + 1; k <= to+1; k++ {
		fsys := setup()
		fsys.SetFault(func(ev Event) error {
			if ev.Seq >= k {
				return errInjected
			}
			return nil
		})
		err := run(fsys)
		for seed := range uint64(20) {
			c := fsys.CrashClone(rand.New(rand.NewPCG(seed, 0)), 0.5)
			got, rerr := vfs.ReadFile(c, "/d/f")
			must(t, rerr)
			if string(got) != "new" && (err == nil || string(got) != "old") {
				t.Fatalf("crash at op %d (WriteFile: %v), seed %d: %q", k, err, seed, got)
			}
		}
	}
}

func TestFault(t *testing.T) {
	// Each case runs one operation on an FS that holds /d/f (open as f)
	// and /d/g.
	tests := []struct {
		op  Op
		run func(fsys *FS, f vfs.File) error
	}{
		{OpOpen, func(fsys *FS, _ vfs.File) error { _, err := fsys.OpenFile("/d/f", os.O_RDONLY, 0); return err }},
		{OpCreate, func(fsys *FS, _ vfs.File) error {
			_, err := fsys.OpenFile("/d/h", os.O_RDWR|os.O_CREATE, 0)
			return err
		}},
		{OpReadAt, func(_ *FS, f vfs.File) error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
		{OpWriteAt, func(_ *FS, f vfs.File) error { _, err := f.WriteAt([]byte("x"), 0); return err }},
		{OpSize, func(_ *FS, f vfs.File) error { _, err := f.Size(); return err }},
		{OpTruncate, func(_ *FS, f vfs.File) error { return f.Truncate(0) }},
		{OpSync, func(_ *FS, f vfs.File) error { return f.Sync() }},
		{OpDatasync, func(_ *FS, f vfs.File) error { return f.Datasync() }},
		{OpRemove, func(fsys *FS, _ vfs.File) error { return fsys.Remove("/d/g") }},
		{OpRename, func(fsys *FS, _ vfs.File) error { return fsys.Rename("/d/g", "/d/h") }},
		{OpMkdir, func(fsys *FS, _ vfs.File) error { return fsys.Mkdir("/e", 0o700) }},
		{OpReadDir, func(fsys *FS, _ vfs.File) error { _, err := fsys.ReadDir("/d"); return err }},
		{OpStat, func(fsys *FS, _ vfs.File) error { _, err := fsys.Stat("/d/f"); return err }},
		{OpSyncDir, func(fsys *FS, _ vfs.File) error { return fsys.SyncDir("/d") }},
		{OpSyncAll, func(fsys *FS, _ vfs.File) error { return fsys.SyncAll("/") }},
	}
	for _, tc := range tests {
		t.Run(tc.op.String(), func(t *testing.T) {
			fsys := New()
			durable(t, fsys, "/d/f", "f")
			durable(t, fsys, "/d/g", "g")
			f, err := fsys.OpenFile("/d/f", os.O_RDWR, 0)
			must(t, err)
			before := tree(t, fsys)
			var seen []Event
			fsys.SetFault(func(ev Event) error {
				seen = append(seen, ev)
				if ev.Op == tc.op {
					return errInjected
				}
				return nil
			})
			n := fsys.Ops()
			err = tc.run(fsys, f)
			if !errors.Is(err, errInjected) {
				t.Fatalf("%v: %v, want the injected error", tc.op, err)
			}
			var pe *fs.PathError
			var le *os.LinkError
			if !errors.As(err, &pe) && !errors.As(err, &le) {
				t.Errorf("%v: %T, want an *fs.PathError or an *os.LinkError", tc.op, err)
			}
			if len(seen) != 1 || seen[0].Op != tc.op || seen[0].Seq != n+1 || fsys.Ops() != n+1 {
				t.Errorf("Fault saw %+v after op %d, and Ops is %d; want one %v, op %d", seen, n, fsys.Ops(), tc.op, n+1)
			}
			fsys.SetFault(nil)
			checkTree(t, "after the failed op", fsys, before)
			must(t, tc.run(fsys, f))
		})
	}
}

func TestShortWrite(t *testing.T) {
	fsys := New()
	f, err := fsys.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o600)
	must(t, err)
	fsys.SetFault(func(ev Event) error {
		if ev.Op == OpWriteAt {
			return &ShortWrite{N: 3}
		}
		return nil
	})
	n, err := f.WriteAt([]byte("hello"), 0)
	if n != 3 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteAt = %d, %v; want 3, ENOSPC", n, err)
	}
	fsys.SetFault(func(Event) error { return &ShortWrite{N: 1, Err: errInjected} })
	n, err = f.WriteAt([]byte("LLO"), 2)
	if n != 1 || !errors.Is(err, errInjected) {
		t.Fatalf("WriteAt = %d, %v; want 1, the injected error", n, err)
	}
	fsys.SetFault(nil)
	checkTree(t, "after short writes", fsys, map[string]string{"/f": "heL"})
}

func TestCrashClosesFiles(t *testing.T) {
	for _, crash := range []struct {
		name string
		do   func(*FS)
	}{
		{"Kill", (*FS).Kill},
		{"PowerLoss", func(fsys *FS) { fsys.PowerLoss(nil, 1) }},
	} {
		t.Run(crash.name, func(t *testing.T) {
			fsys := New()
			durable(t, fsys, "/f", "hello")
			f, err := fsys.OpenFile("/f", os.O_RDWR, 0)
			must(t, err)
			crash.do(fsys)
			if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrCrashed) || !errors.Is(err, os.ErrClosed) {
				t.Errorf("ReadAt after %s: %v, want ErrCrashed", crash.name, err)
			}
			if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCrashed) {
				t.Errorf("WriteAt after %s: %v, want ErrCrashed", crash.name, err)
			}
			if err := f.Close(); !errors.Is(err, ErrCrashed) {
				t.Errorf("Close after %s: %v, want ErrCrashed", crash.name, err)
			}
			checkTree(t, "after "+crash.name, fsys, map[string]string{"/f": "hello"})
		})
	}
}

// TestErrors checks that errors match the os package's, for errors.Is.
func TestErrors(t *testing.T) {
	open := func(name string, flag int) func(*FS) error {
		return func(fsys *FS) error {
			f, err := fsys.OpenFile(name, flag, 0o600)
			if err == nil {
				f.Close()
			}
			return err
		}
	}
	onFile := func(flag int, do func(vfs.File) error) func(*FS) error {
		return func(fsys *FS) error {
			f, err := fsys.OpenFile("/d/f", flag, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return do(f)
		}
	}
	tests := []struct {
		name string
		do   func(*FS) error
		want error
	}{
		{"O_EXCL on a file", open("/d/f", os.O_RDWR|os.O_CREATE|os.O_EXCL), fs.ErrExist},
		{"open a missing file", open("/d/x", os.O_RDWR), fs.ErrNotExist},
		{"create in a missing directory", open("/x/f", os.O_RDWR|os.O_CREATE), fs.ErrNotExist},
		{"create under a file", open("/d/f/x", os.O_RDWR|os.O_CREATE), syscall.ENOTDIR},
		{"open a directory", open("/d", os.O_RDONLY), syscall.EISDIR},
		{"O_APPEND", open("/d/f", os.O_RDWR|os.O_APPEND), errors.ErrUnsupported},
		{"write to O_RDONLY", onFile(os.O_RDONLY, func(f vfs.File) error { _, err := f.WriteAt([]byte("x"), 0); return err }), syscall.EBADF},
		{"read from O_WRONLY", onFile(os.O_WRONLY, func(f vfs.File) error { _, err := f.ReadAt(make([]byte, 1), 0); return err }), syscall.EBADF},
		{"truncate O_RDONLY", onFile(os.O_RDONLY, func(f vfs.File) error { return f.Truncate(0) }), syscall.EINVAL},
		{"read at a negative offset", onFile(os.O_RDONLY, func(f vfs.File) error { _, err := f.ReadAt(make([]byte, 1), -1); return err }), syscall.EINVAL},
		{"close twice", onFile(os.O_RDONLY, func(f vfs.File) error { f.Close(); return f.Close() }), os.ErrClosed},
		{"remove a missing file", func(fsys *FS) error { return fsys.Remove("/d/x") }, fs.ErrNotExist},
		{"remove a directory that is not empty", func(fsys *FS) error { return fsys.Remove("/d") }, syscall.ENOTEMPTY},
		{"remove the root", func(fsys *FS) error { return fsys.Remove("/") }, syscall.EBUSY},
		{"mkdir over a file", func(fsys *FS) error { return fsys.Mkdir("/d/f", 0o700) }, fs.ErrExist},
		{"mkdir the root", func(fsys *FS) error { return fsys.Mkdir("/", 0o700) }, fs.ErrExist},
		{"mkdir in a missing directory", func(fsys *FS) error { return fsys.Mkdir("/x/y", 0o700) }, fs.ErrNotExist},
		{"rename a missing file", func(fsys *FS) error { return fsys.Rename("/d/x", "/d/y") }, fs.ErrNotExist},
		{"rename a directory into itself", func(fsys *FS) error { return fsys.Rename("/d", "/d/e/x") }, syscall.EINVAL},
		{"rename a directory over a file", func(fsys *FS) error { return fsys.Rename("/d/e", "/d/f") }, syscall.ENOTDIR},
		{"rename a file over a directory", func(fsys *FS) error { return fsys.Rename("/d/f", "/d/e") }, syscall.EISDIR},
		{"rename a directory over one not empty", func(fsys *FS) error { return fsys.Rename("/d/h", "/d/e") }, syscall.ENOTEMPTY},
		{"readdir a file", func(fsys *FS) error { _, err := fsys.ReadDir("/d/f"); return err }, syscall.ENOTDIR},
		{"stat a missing file", func(fsys *FS) error { _, err := fsys.Stat("/d/x"); return err }, fs.ErrNotExist},
		{"syncdir a file", func(fsys *FS) error { return fsys.SyncDir("/d/f") }, syscall.ENOTDIR},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := New()
			durable(t, fsys, "/d/f", "f")
			must(t, fsys.Mkdir("/d/e", 0o700))
			must(t, fsys.Mkdir("/d/e/g", 0o700))
			must(t, fsys.Mkdir("/d/h", 0o700))
			before := tree(t, fsys)
			err := tc.do(fsys)
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			checkTree(t, "after the failure", fsys, before)
		})
	}
}

func TestFiles(t *testing.T) {
	fsys := New()
	must(t, vfs.MkdirAll(fsys, "/a/b", 0o700))
	must(t, vfs.MkdirAll(fsys, "a/b/c", 0o700)) // the same tree
	fi, err := fsys.Stat(".")
	must(t, err)
	if !fi.IsDir() || fi.Name() != "/" {
		t.Errorf("Stat(.): %q, dir %v; want the root, a directory", fi.Name(), fi.IsDir())
	}

	f, err := fsys.OpenFile("a/b/f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	must(t, err)
	if f.Name() != "a/b/f" {
		t.Errorf("Name() = %q, want the name it was opened with", f.Name())
	}
	_, err = f.WriteAt([]byte("xy"), 3)
	must(t, err)
	buf := make([]byte, 8)
	n, err := f.ReadAt(buf, 0)
	if n != 5 || err != io.EOF || string(buf[:n]) != "\x00\x00\x00xy" {
		t.Errorf("ReadAt past the end = %d, %v, %q; want 5, EOF, zeros then xy", n, err, buf[:n])
	}
	if n, err := f.ReadAt(buf, 5); n != 0 || err != io.EOF {
		t.Errorf("ReadAt at the end = %d, %v; want 0, EOF", n, err)
	}
	if n, err := f.WriteAt(nil, 100); n != 0 || err != nil {
		t.Errorf("WriteAt of nothing = %d, %v", n, err)
	}
	if size, err := f.Size(); size != 5 || err != nil {
		t.Errorf("Size() = %d, %v; want 5", size, err)
	}
	must(t, f.Truncate(7))
	must(t, f.Close())
	if fi, err := fsys.Stat("/a/b/f"); err != nil || fi.Size() != 7 || fi.Name() != "f" || fi.IsDir() {
		t.Errorf("Stat = %v, %v; want f, 7 bytes", fi, err)
	}
	write(t, fsys, "/a/b/e", 0, "e", false)
	names, err := fsys.ReadDir("/a/b")
	must(t, err)
	if !slices.Equal(names, []string{"c", "e", "f"}) {
		t.Errorf("ReadDir = %q, want c e f", names)
	}
	must(t, fsys.Rename("/a/b/e", "/a/b/f"))
	f, err = fsys.OpenFile("/a/b/f", os.O_RDWR|os.O_TRUNC, 0)
	must(t, err)
	must(t, f.Close())
	checkTree(t, "in the end", fsys, map[string]string{"/a/": "", "/a/b/": "", "/a/b/c/": "", "/a/b/f": ""})
}

func TestDamage(t *testing.T) {
	fsys := New()
	durable(t, fsys, "/f", strings.Repeat("a", 2*SectorSize))
	write(t, fsys, "/f", 0, "b", false) // current and durable differ
	must(t, fsys.FlipBit("/f", 1, 0))
	must(t, fsys.ZeroSector("/f", SectorSize+7))
	want := "a`" + strings.Repeat("a", SectorSize-2) + string(make([]byte, SectorSize))
	checkTree(t, "power loss", fsys.CrashClone(nil, 0), map[string]string{"/f": want})
	checkTree(t, "now", fsys, map[string]string{"/f": "b" + want[1:]})
	if err := fsys.FlipBit("/f", 2*SectorSize, 0); err == nil {
		t.Error("FlipBit past the end: no error")
	}
	if err := fsys.ZeroSector("/x", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ZeroSector of a missing file: %v, want ErrNotExist", err)
	}
}

func TestConcurrent(t *testing.T) {
	fsys := New()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			name := fmt.Sprintf("/f%d", i)
			for j := range 50 {
				f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
				if err != nil {
					t.Error(err)
					return
				}
				f.WriteAt([]byte{byte(j)}, int64(j))
				f.Datasync()
				f.Close()
				fsys.SyncDir("/")
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			fsys.CrashClone(rand.New(rand.NewPCG(1, 2)), 0.5)
		}
	})
	wg.Wait()
	c := tree(t, fsys.CrashClone(nil, 0))
	if len(c) != 4 {
		t.Errorf("%d files durable, want 4", len(c))
	}
}

// TestLock: a lock is held by one taker at a time, free again once
// closed, and a Kill ends the process that held it.
func TestLock(t *testing.T) {
	fsys := New()
	l, err := fsys.Lock("/lock")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Lock("lock"); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("second Lock = %v, want ErrLocked", err)
	}
	l.Close()
	l, err = fsys.Lock("/lock")
	if err != nil {
		t.Fatalf("Lock after Close: %v", err)
	}
	fsys.Kill()
	if _, err := fsys.Lock("/lock"); err != nil {
		t.Fatalf("Lock after a Kill: %v", err)
	}
	l.Close()
}

// TestKilledSync: a sync failed with ErrKilled never happened: a Kill
// after it leaves its data unsynced, and a later sync makes it durable.
func TestKilledSync(t *testing.T) {
	fsys := New()
	f, err := fsys.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fsys.SyncDir("/")
	f.WriteAt([]byte("hello"), 0)
	fsys.SetFault(func(Event) error { return ErrKilled })
	if err := f.Sync(); !errors.Is(err, ErrKilled) {
		t.Fatalf("Sync = %v, want ErrKilled", err)
	}
	fsys.SetFault(nil)
	fsys.Kill()
	g, err := fsys.OpenFile("/f", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	if b, err := vfs.ReadFile(fsys.CrashClone(nil, 0), "/f"); err != nil || string(b) != "hello" {
		t.Fatalf("after a kill, a sync and a power cut: %q, %v; want hello", b, err)
	}
}
