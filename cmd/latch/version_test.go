package main

import (
	"runtime/debug"
	"testing"
)

func TestVCSInfo(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name           string
		settings       []debug.BuildSetting
		rev, dirty, at string
	}{
		{"no VCS", []debug.BuildSetting{{Key: "GOOS", Value: "linux"}}, "", "", ""},
		{"clean", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}, {Key: "vcs.time", Value: "2026-11-28T07:00:00Z"}}, rev, "", "2026-11-28T07:00:00Z"},
		{"modified", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: rev}}, rev, "+dirty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, d, at := vcsInfo(&debug.BuildInfo{Settings: tt.settings})
			if r != tt.rev || d != tt.dirty || at != tt.at {
				t.Errorf("vcsInfo() = %q, %q, %q, want %q, %q, %q", r, d, at, tt.rev, tt.dirty, tt.at)
			}
		})
	}
}
