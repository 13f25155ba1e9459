package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is latch's version, set when building a release:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/latch
//
// When empty, the module version recorded in the binary is used.
var version string

// runVersion implements "latch version".
func runVersion(args []string, env *environment) int {
	fs := env.newFlagSet("version")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: latch version\n\nPrint latch's version and the Go version it was built with.\n")
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "latch version: unexpected arguments %q\n", fs.Args())
		return 2
	}
	fmt.Fprintf(env.stdout, "latch %s %s %s/%s\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
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
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " " + rev[:min(12, len(rev))] + dirty
	}
	return v
}
