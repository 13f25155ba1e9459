package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version, commit and date describe a release build, set by "make
// release" (scripts/release.sh) with -ldflags:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=0123abc… -X main.date=2026-11-28T05:12:16Z" ./cmd/latch
//
// date is the commit's date, not the build's, so that two builds of one
// commit are the same bytes. When empty, what the Go toolchain recorded
// is used (the module version, the VCS revision and time).
var version, commit, date string

// runVersion implements "latch version".
func runVersion(args []string, env *environment) int {
	fs := env.newFlagSet("version")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: latch version\n\nPrint latch's version and the Go version it was built with, then the commit it\nwas built from and that commit's date.\n")
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "latch version: unexpected arguments %q\n", fs.Args())
		return 2
	}
	c, d := buildCommit()
	fmt.Fprintf(env.stdout, "latch %s %s %s/%s\ncommit %s %s\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH, c, d)
	return 0
}

// buildVersion returns the version set by -ldflags, or else the one the Go
// toolchain recorded: the module version when built with "go install
// module@version", or "devel" and the VCS revision when built from a
// checkout.
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	if rev, dirty, _ := vcsInfo(info); rev != "" {
		v += " " + rev[:min(12, len(rev))] + dirty
	}
	return v
}

// buildCommit returns the commit and its date set by -ldflags, or else
// the VCS revision and time the Go toolchain recorded; "unknown" for
// what neither says (go run, or a build with -buildvcs=false).
func buildCommit() (commitID, commitDate string) {
	commitID, commitDate = commit, date
	if info, ok := debug.ReadBuildInfo(); ok {
		rev, dirty, t := vcsInfo(info)
		if commitID == "" && rev != "" {
			commitID = rev + dirty
		}
		if commitDate == "" {
			commitDate = t
		}
	}
	if commitID == "" {
		commitID = "unknown"
	}
	if commitDate == "" {
		commitDate = "unknown"
	}
	return commitID, commitDate
}

// vcsInfo returns the VCS revision recorded in info, "+dirty" when the
// work tree had changes, and the revision's time.
func vcsInfo(info *debug.BuildInfo) (rev, dirty, time string) {
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		case "vcs.time":
			time = s.Value
		}
	}
	return rev, dirty, time
}
