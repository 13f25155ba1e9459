//go:build linux

package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// releasePlatforms are the platforms the tests build with make release
// (which builds seven by default): linux/amd64, whose binary and
// packages they run, and windows/amd64, for the zip archive. Compiling
// latch for a platform takes about a minute on two cores (four and a
// half for these two from an empty build cache, on a busy machine), so
// the second make release compiles nothing: it takes the compiled
// packages from the Go build cache and links, archives, packages, makes
// the SBOMs and signs again.
const releasePlatforms = "linux/amd64 windows/amd64"

// releaseBuild is make release's output, built twice.
type releaseBuild struct {
	dir string // the first build's DIST
	pub string // the minisign public key of the key it was signed with
	// The second build's files, and those of the first that differ from
	// it (the build is removed once compared).
	againFiles, differ []string
	// What the binaries must say: the version (and the same without
	// its v, as the archives' names have it, and with "-" made "~", as
	// the packages'), the commit and its date.
	version, fileVersion, pkgVersion string
	commit, date                     string
	epoch                            int64
	unsignedLog                      string   // make release's output without a key
	unsignedFiles                    []string // the files it made
}

// releaseExpect computes what make release must stamp, from git, as
// scripts/release.sh says it does: the tag v* at HEAD, else a Go
// pseudo-version; the commit, +dirty when tracked files changed; the
// commit's time.
func releaseExpect(b *releaseBuild) error {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	var err error
	if b.commit, err = git("rev-parse", "HEAD"); err != nil {
		return err
	}
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return err
	}
	ct, err := git("log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return err
	}
	if b.epoch, err = strconv.ParseInt(ct, 10, 64); err != nil {
		return err
	}
	t := time.Unix(b.epoch, 0).UTC()
	b.date = t.Format(time.RFC3339)
	if b.version, err = git("describe", "--tags", "--exact-match", "--match", "v[0-9]*", "HEAD"); err != nil {
		b.version = "v0.0.0-" + t.Format("20060102150405") + "-" + b.commit[:12]
	}
	if status != "" {
		b.commit += "+dirty"
	}
	b.fileVersion = strings.TrimPrefix(b.version, "v")
	b.pkgVersion = strings.ReplaceAll(b.fileVersion, "-", "~")
	return nil
}

// builtRelease runs make release (releasePlatforms) twice into two
// directories, signed with a minisign key made for the purpose, and once
// more without a key.
var builtRelease = sync.OnceValues(func() (*releaseBuild, error) {
	tmp, err := os.MkdirTemp("", "latch-release-")
	if err != nil {
		return nil, err
	}
	b := &releaseBuild{dir: filepath.Join(tmp, "dist"), pub: filepath.Join(tmp, "latch.pub")}
	again, unsigned := filepath.Join(tmp, "dist-again"), filepath.Join(tmp, "dist-unsigned")
	if err := releaseExpect(b); err != nil {
		return nil, err
	}
	key := filepath.Join(tmp, "latch.key")
	if out, err := exec.Command("minisign", "-G", "-W", "-p", b.pub, "-s", key).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("minisign -G (Debian package minisign; make deps installs it): %v\n%s", err, out)
	}
	makeRelease := func(dist string, env ...string) (string, error) {
		cmd := exec.Command("make", "-C", "../..", "release", "DIST="+dist, "RELEASE_PLATFORMS="+releasePlatforms)
		cmd.Env = append(cleanEnv(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("make release DIST=%s: %v\n%s", dist, err, out)
		}
		return string(out), nil
	}
	start := time.Now()
	if _, err := makeRelease(b.dir, "RELEASE_SIGN_KEY="+key); err != nil {
		return nil, err
	}
	first := time.Since(start)
	if _, err := makeRelease(again, "RELEASE_SIGN_KEY="+key); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "make release (%s): %.0f s, then %.0f s\n",
		releasePlatforms, first.Seconds(), (time.Since(start) - first).Seconds())
	if b.unsignedLog, err = makeRelease(unsigned, "RELEASE_SIGN_KEY="); err != nil {
		return nil, err
	}
	if b.unsignedFiles, err = listDir(unsigned); err != nil {
		return nil, err
	}
	if b.againFiles, err = listDir(again); err != nil {
		return nil, err
	}
	for _, name := range b.againFiles {
		x, err := os.ReadFile(filepath.Join(b.dir, name))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		y, err := os.ReadFile(filepath.Join(again, name))
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(x, y) {
			b.differ = append(b.differ, name)
		}
	}
	for _, d := range []string{again, unsigned} {
		if err := os.RemoveAll(d); err != nil {
			return nil, err
		}
	}
	return b, nil
})

func release(t *testing.T) *releaseBuild {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the release")
	}
	b, err := builtRelease()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// releaseFiles are the files make release must make for releasePlatforms.
func (b *releaseBuild) releaseFiles() []string {
	v, pv := b.fileVersion, b.pkgVersion
	files := []string{
		"SHA256SUMS", "SHA256SUMS.minisig",
		"latch_" + v + "_linux_amd64.tar.gz", "latch_" + v + "_linux_amd64.sbom.json",
		"latch_" + v + "_windows_amd64.zip", "latch_" + v + "_windows_amd64.sbom.json",
		"latch_" + pv + "-1_amd64.deb", "latch-" + pv + "-1.x86_64.rpm",
	}
	slices.Sort(files)
	return files
}

// listDir returns the names in dir, sorted.
func listDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := listDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestRelease checks make release's output: the expected files, the same
// bytes twice, checksums
// that sha256sum -c accepts, a signature that minisign verifies and that
// fails on a changed byte, SBOMs naming go.mod's hashicorp/raft, archives
// with fixed owners, order and times, holding a static binary that says
// the version, commit and date it was stamped with.
func TestRelease(t *testing.T) {
	b := release(t)

	want := b.releaseFiles()
	if got := dirFiles(t, b.dir); !slices.Equal(got, want) {
		t.Errorf("make release made %q, want %q", got, want)
	}

	t.Run("reproducible", func(t *testing.T) {
		if got := dirFiles(t, b.dir); !slices.Equal(got, b.againFiles) {
			t.Fatalf("two builds made different files: %q and %q", got, b.againFiles)
		}
		for _, name := range b.differ {
			t.Errorf("%s differs between two builds", name)
		}
	})

	t.Run("checksums", func(t *testing.T) {
		cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
		cmd.Dir = b.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
		}
		sums, err := os.ReadFile(filepath.Join(b.dir, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
			_, name, _ := strings.Cut(l, "  ")
			listed = append(listed, name)
		}
		wantListed := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return strings.HasPrefix(s, "SHA256SUMS") })
		if !slices.Equal(listed, wantListed) {
			t.Errorf("SHA256SUMS lists %q, want %q", listed, wantListed)
		}
	})

	t.Run("signature", func(t *testing.T) {
		verify := func(dir string) ([]byte, error) {
			return exec.Command("minisign", "-V", "-p", b.pub, "-m", filepath.Join(dir, "SHA256SUMS"), "-x", filepath.Join(b.dir, "SHA256SUMS.minisig")).CombinedOutput()
		}
		out, err := verify(b.dir)
		if err != nil {
			t.Fatalf("minisign -V: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "Trusted comment: latch "+b.version+" SHA256SUMS") {
			t.Errorf("minisign -V: no trusted comment naming the version:\n%s", out)
		}
		sums, err := os.ReadFile(filepath.Join(b.dir, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		sums[len(sums)/2] ^= 1
		bad := t.TempDir()
		if err := os.WriteFile(filepath.Join(bad, "SHA256SUMS"), sums, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := verify(bad); err == nil {
			t.Errorf("minisign -V accepts SHA256SUMS with a byte changed:\n%s", out)
		}
	})

	t.Run("unsigned", func(t *testing.T) {
		if !strings.Contains(b.unsignedLog, "RELEASE_SIGN_KEY is not set: SHA256SUMS is not signed") {
			t.Errorf("make release without a key does not say it did not sign:\n%s", b.unsignedLog)
		}
		got := b.unsignedFiles
		if wantUnsigned := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "SHA256SUMS.minisig" }); !slices.Equal(got, wantUnsigned) {
			t.Errorf("make release without a key made %q, want %q", got, wantUnsigned)
		}
	})

	t.Run("sbom", func(t *testing.T) {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/hashicorp/raft").Output()
		if err != nil {
			t.Fatal(err)
		}
		raftVersion := strings.TrimSpace(string(out))
		for _, p := range []string{"linux_amd64", "windows_amd64"} {
			data, err := os.ReadFile(filepath.Join(b.dir, "latch_"+b.fileVersion+"_"+p+".sbom.json"))
			if err != nil {
				t.Fatal(err)
			}
			var bom struct {
				BOMFormat    string `json:"bomFormat"`
				SerialNumber string `json:"serialNumber"`
				Metadata     struct {
					Timestamp string `json:"timestamp"`
					Component struct{ Name, Version string }
				}
				Components []struct{ Name, Version, Purl string }
			}
			if err := json.Unmarshal(data, &bom); err != nil {
				t.Fatalf("%s SBOM: %v", p, err)
			}
			if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "github.com/latchd/latch" || bom.Metadata.Component.Version != b.version {
				t.Errorf("%s SBOM: format %q, of %s %s; want CycloneDX, of github.com/latchd/latch %s", p, bom.BOMFormat, bom.Metadata.Component.Name, bom.Metadata.Component.Version, b.version)
			}
			if bom.SerialNumber != "" || bom.Metadata.Timestamp != "" {
				t.Errorf("%s SBOM has a serial number %q or time %q, which differ from build to build", p, bom.SerialNumber, bom.Metadata.Timestamp)
			}
			found := false
			for _, c := range bom.Components {
				if c.Name == "github.com/hashicorp/raft" {
					found = true
					if c.Version != raftVersion {
						t.Errorf("%s SBOM: hashicorp/raft %s, go.mod has %s", p, c.Version, raftVersion)
					}
				}
			}
			if !found {
				t.Errorf("%s SBOM does not list github.com/hashicorp/raft", p)
			}
		}
	})

	t.Run("linux archive", func(t *testing.T) {
		name := "latch_" + b.fileVersion + "_linux_amd64"
		files := readTarGz(t, filepath.Join(b.dir, name+".tar.gz"), b.epoch)
		var names []string
		for n := range files {
			names = append(names, n)
		}
		slices.Sort(names)
		if want := []string{name + "/", name + "/README.md", name + "/latch", name + "/latch.1"}; !slices.Equal(names, want) {
			t.Errorf("archive holds %q, want %q", names, want)
		}
		bin := filepath.Join(t.TempDir(), "latch")
		if err := os.WriteFile(bin, files[name+"/latch"], 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("the linux binary has a %v program header: not static", p.Type)
			}
		}
		f.Close()
		checkShipBuild(t, bin, b, "amd64")
	})

	t.Run("windows archive", func(t *testing.T) {
		name := "latch_" + b.fileVersion + "_windows_amd64"
		zr, err := zip.OpenReader(filepath.Join(b.dir, name+".zip"))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
			// A zip's DOS times count 2 s steps.
			if d := f.Modified.Sub(time.Unix(b.epoch, 0)); d < -2*time.Second || d > 2*time.Second {
				t.Errorf("%s: modified %v, want the commit's time %v", f.Name, f.Modified, time.Unix(b.epoch, 0).UTC())
			}
			if len(f.Extra) != 0 {
				t.Errorf("%s has extra fields (times, owners) %x", f.Name, f.Extra)
			}
		}
		if want := []string{name + "/README.md", name + "/latch.1", name + "/latch.exe"}; !slices.Equal(names, want) {
			t.Errorf("zip holds %q, want %q", names, want)
		}
	})
}

// readTarGz returns the entries of a release archive, checking that they
// are in name order, owned by 0:0 with no names, and have the commit's
// mtime.
func readTarGz(t *testing.T, path string, epoch int64) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("%s: gzip header has a time %v or name %q", path, zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	var prev string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name < prev {
			t.Errorf("%s: %s after %s: not in name order", path, h.Name, prev)
		}
		prev = h.Name
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || h.ModTime.Unix() != epoch {
			t.Errorf("%s: %s owned by %d:%d (%q:%q), modified %v; want 0:0, no names, the commit's time", path, h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = data
	}
	return files
}

// checkShipBuild checks that bin, a binary for linux/ARCH, was built as
// scripts/release.sh's build function builds every shipped binary (the
// release's and the image's), with b's stamps: its build information
// names only the settings that build gives (-trimpath, no cgo, no VCS
// stamp, no other flag: with -trimpath, go records no -ldflags), it has
// no symbol table or DWARF (-s -w) and no build ID, and latch version
// says b's version, commit and date (-X). Two binaries that pass it for
// one platform are the same bytes (TestRelease's reproducible subtest
// checks that the build gives the same binary twice).
func checkShipBuild(t *testing.T, bin string, b *releaseBuild, arch string) {
	t.Helper()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	if info.Path != "github.com/latchd/latch/cmd/latch" {
		t.Errorf("%s is %s, want github.com/latchd/latch/cmd/latch", bin, info.Path)
	}
	want := map[string]string{
		"-buildmode": "exe", "-compiler": "gc", "-trimpath": "true",
		"CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": arch,
	}
	level := "GO" + strings.ToUpper(arch) // GOAMD64, GOARM64: go's default
	for _, s := range info.Settings {
		if s.Key == level {
			continue
		}
		if v, ok := want[s.Key]; !ok || v != s.Value {
			t.Errorf("%s was built with %s=%q; scripts/release.sh's build gives %q", bin, s.Key, s.Value, v)
		}
		delete(want, s.Key)
	}
	for k, v := range want {
		t.Errorf("%s was not built with %s=%s (scripts/release.sh's build)", bin, k, v)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range f.Sections {
		if sec.Name == ".symtab" || strings.HasPrefix(sec.Name, ".debug_") || strings.HasPrefix(sec.Name, ".zdebug_") {
			t.Errorf("%s has a %s section: built without -s -w", bin, sec.Name)
		}
	}
	f.Close()
	if out, err := exec.Command("go", "tool", "buildid", bin).Output(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("go tool buildid %s: %q, %v; want no build ID (-buildid=)", bin, out, err)
	}
	checkVersion(t, bin, b, "linux/"+arch)
}

// checkVersion runs bin version and checks what it was stamped with.
func checkVersion(t *testing.T, bin string, b *releaseBuild, platform string) {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "latch "+b.version+" go") || !strings.HasSuffix(lines[0], " "+platform) ||
		lines[1] != "commit "+b.commit+" "+b.date {
		t.Errorf("%s version printed %q; want latch %s goX %s, then commit %s %s", bin, out, b.version, platform, b.commit, b.date)
	}
}

// packageFiles are the files (not directories) the packages hold, the
// same in deb and rpm but for each's copyright and changelog.
var packageFiles = []string{
	"/etc/latch/latch.toml",
	"/usr/bin/latch",
	"/usr/lib/systemd/system/latch.service",
	"/usr/lib/sysusers.d/latch.conf",
	"/usr/lib/tmpfiles.d/latch.conf",
	"/usr/share/bash-completion/completions/latch",
	"/usr/share/doc/latch/README.md",
	"/usr/share/man/man1/latch.1.gz",
}

// TestPackages checks the deb and rpm packages: lintian finds no error or
// warning and rpmlint nothing (but what contrib/packaging's overrides say
// is by design), they
// hold packageFiles, the configuration is a configuration file, and the
// man page and completion are what latch makes.
func TestPackages(t *testing.T) {
	b := release(t)
	deb := filepath.Join(b.dir, "latch_"+b.pkgVersion+"-1_amd64.deb")
	rpm := filepath.Join(b.dir, "latch-"+b.pkgVersion+"-1.x86_64.rpm")
	run := func(t *testing.T, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(cleanEnv(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	t.Run("lintian", func(t *testing.T) {
		// Errors and warnings fail; the info and pedantic levels are
		// shown (contrib/packaging/lintian-overrides says why).
		out := run(t, nil, "lintian", "--pedantic", "--display-info", "--fail-on", "error,warning", deb)
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "E: ") || strings.HasPrefix(l, "W: ") {
				t.Errorf("lintian: %s", l)
			} else if strings.HasPrefix(l, "I: ") || strings.HasPrefix(l, "P: ") {
				t.Logf("lintian: %s", l)
			}
		}
	})

	t.Run("rpmlint", func(t *testing.T) {
		// nfpm's rpm payload (a cpio archive) has absolute names, and
		// rpmlint unpacks it with "rpm2cpio | cpio -id" in a directory of
		// its own, which GNU cpio would write to / instead: a cpio that
		// strips the leading / goes first on its PATH.
		cpio, err := exec.LookPath("cpio")
		if err != nil {
			t.Fatalf("cpio: %v (make deps installs rpmlint, which needs it)", err)
		}
		wrap := t.TempDir()
		if err := os.WriteFile(filepath.Join(wrap, "cpio"), []byte("#!/bin/sh\nexec "+cpio+" --no-absolute-filenames \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		out := run(t, []string{"PATH=" + wrap + ":" + os.Getenv("PATH")}, "rpmlint", "-c", "../../contrib/packaging/rpmlint.toml", rpm)
		if !strings.Contains(out, "0 errors, 0 warnings, 0 badness") {
			t.Errorf("rpmlint:\n%s", out)
		}
	})

	t.Run("deb contents", func(t *testing.T) {
		var got []string
		for _, l := range strings.Split(run(t, nil, "dpkg-deb", "-c", deb), "\n") {
			if f := strings.Fields(l); len(f) == 6 && !strings.HasPrefix(f[0], "d") {
				got = append(got, strings.TrimPrefix(f[5], "."))
			}
		}
		want := append(slices.Clone(packageFiles), "/usr/share/doc/latch/changelog.Debian.gz", "/usr/share/doc/latch/copyright", "/usr/share/lintian/overrides/latch")
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("dpkg-deb -c: %q, want %q", got, want)
		}
		if conf := run(t, nil, "dpkg-deb", "-I", deb, "conffiles"); strings.TrimSpace(conf) != "/etc/latch/latch.toml" {
			t.Errorf("conffiles: %q, want /etc/latch/latch.toml", conf)
		}
		ctl := run(t, nil, "dpkg-deb", "-f", deb, "Version", "Architecture", "Depends")
		if want := "Version: " + b.pkgVersion + "-1\nArchitecture: amd64\nDepends: systemd | systemd-sysusers\n"; ctl != want {
			t.Errorf("control: %q, want %q", ctl, want)
		}
	})

	t.Run("rpm contents", func(t *testing.T) {
		got := strings.Fields(run(t, nil, "rpm", "-qpl", rpm))
		want := append(slices.Clone(packageFiles), "/usr/share/licenses/latch/copyright")
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("rpm -qpl: %q, want %q", got, want)
		}
		if conf := strings.TrimSpace(run(t, nil, "rpm", "-qp", "--configfiles", rpm)); conf != "/etc/latch/latch.toml" {
			t.Errorf("rpm --configfiles: %q, want /etc/latch/latch.toml", conf)
		}
		info := run(t, nil, "rpm", "-qp", "--queryformat", "%{VERSION}-%{RELEASE} %{ARCH} %{BUILDTIME}", rpm)
		if want := fmt.Sprintf("%s-1 x86_64 %d", b.pkgVersion, b.epoch); info != want {
			t.Errorf("rpm: %q, want %q", info, want)
		}
	})

	t.Run("generated files", func(t *testing.T) {
		root := t.TempDir()
		run(t, nil, "dpkg-deb", "-x", deb, root)
		man, err := os.ReadFile("../../contrib/man/latch.1")
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(root, "usr/share/man/man1/latch.1.gz"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, man) {
			t.Errorf("the package's man page is not contrib/man/latch.1 gzipped (%v)", err)
		}
		var completion strings.Builder
		if code := run1([]string{"completion", "bash"}, &completion); code != 0 {
			t.Fatalf("latch completion bash: %d", code)
		}
		if got, err := os.ReadFile(filepath.Join(root, "usr/share/bash-completion/completions/latch")); err != nil || string(got) != completion.String() {
			t.Errorf("the package's bash completion is not latch completion bash's (%v)", err)
		}
		checkVersion(t, filepath.Join(root, "usr/bin/latch"), b, "linux/amd64")
	})
}

// run1 runs latch's command line in this process, for its output.
func run1(args []string, stdout io.Writer) int {
	return run(args, &environment{stdout: stdout, stderr: io.Discard, getenv: func(string) string { return "" }})
}
