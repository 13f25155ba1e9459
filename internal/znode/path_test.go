package znode

import (
	"math"
	"testing"
)

func TestValidPath(t *testing.T) {
	tests := []struct {
		path      string
		plain     bool // valid as a path
		seqPrefix bool // valid as a sequential create's prefix
	}{
		{"", false, false},
		{"a", false, false},
		{"a/b", false, false},
		{"/", true, true},
		{"/a", true, true},
		{"/a/b-c_d.e", true, true},
		{"/a/", false, true},
		{"//", false, false},
		{"//a", false, false},
		{"/a//b", false, false},
		{"/a//", false, false},
		{"/.", false, true},
		{"/..", false, true},
		{"/./a", false, false},
		{"/../a", false, false},
		{"/a/.", false, true},
		{"/a/./", false, false},
		{"/...", true, true},
		{"/.a", true, true},
		{"/a.", true, true},
		{"/a..", true, true},
		{"/..a", true, true},
		{"/a\x00b", false, false},
		{"/a\x01", false, false},
		{"/a\x1f", false, false},
		{"/a\x7f", false, false},
		{"/a\t", false, false},
		{"/ ", true, true},
		{"/~", true, true},
		{"/a\u0080", false, false},
		{"/a\u009f", false, false},
		{"/a\u00a0", true, true},
		{"/é/ü", true, true},
		{"/a\ud7ff", true, true},
		{"/a\ue000", false, false},
		{"/a\uf8ff", false, false},
		{"/a\uf900", true, true},
		{"/a\uffef", true, true},
		{"/a\ufff0", false, false},
		{"/a\ufffd", false, false},
		{"/a\U0001F600", false, false}, // a surrogate pair in Java
		{"/a\xff", false, false},       // invalid UTF-8
		{"/a\xed\xa0\x80", false, false},
		{"/a\xc0\xaf", false, false}, // overlong "/"
	}
	for _, tt := range tests {
		if got := ValidPath(tt.path, false); got != tt.plain {
			t.Errorf("ValidPath(%q, false) = %v, want %v", tt.path, got, tt.plain)
		}
		if got := ValidPath(tt.path, true); got != tt.seqPrefix {
			t.Errorf("ValidPath(%q, true) = %v, want %v", tt.path, got, tt.seqPrefix)
		}
		// The sequential rule is the plain rule after the suffix.
		if got := ValidPath(tt.path+"0000000000", false); got != tt.seqPrefix {
			t.Errorf("ValidPath(%q+suffix, false) = %v, want %v", tt.path, got, tt.seqPrefix)
		}
	}
}

func TestAppendSeq(t *testing.T) {
	tests := []struct {
		n    int32
		want string
	}{
		{0, "0000000000"},
		{1, "0000000001"},
		{42, "0000000042"},
		{1234567890, "1234567890"},
		{math.MaxInt32, "2147483647"},
		{math.MinInt32, "-2147483648"},
		{-5, "-000000005"},
		{-123456789, "-123456789"},
		{-1, "-000000001"},
	}
	for _, tt := range tests {
		if got := string(appendSeq([]byte("x-"), tt.n)); got != "x-"+tt.want {
			t.Errorf("appendSeq(%d) = %q, want %q", tt.n, got, "x-"+tt.want)
		}
	}
}

func TestSplitPath(t *testing.T) {
	tests := []struct{ path, parent, name string }{
		{"/a", "/", "a"},
		{"/a/b", "/a", "b"},
		{"/a/b/c", "/a/b", "c"},
	}
	for _, tt := range tests {
		parent, name, ok := splitPath(tt.path)
		if !ok || parent != tt.parent || name != tt.name {
			t.Errorf("splitPath(%q) = %q, %q, %v", tt.path, parent, name, ok)
		}
	}
	if _, _, ok := splitPath("/"); ok {
		t.Error("splitPath(/) has a parent")
	}
}
