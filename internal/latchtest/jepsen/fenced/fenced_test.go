package fenced

import (
	"errors"
	"slices"
	"testing"
)

func TestRegister(t *testing.T) {
	tests := []struct {
		name    string
		fencing bool
		// the stale holder (token 1) writes after the newer one (token 2) read
		wantErr error
		want    []int
	}{
		{"fencing refuses the stale holder", true, ErrStale, []int{2}},
		{"without fencing the stale write wins", false, nil, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.fencing)
			old, err := r.Read("k", 1)
			if err != nil {
				t.Fatal(err)
			}
			cur, err := r.Read("k", 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Write("k", 2, "b", append(cur, 2), 2); err != nil {
				t.Fatal(err)
			}
			if err := r.Write("k", 1, "a", append(old, 1), 1); !errors.Is(err, tt.wantErr) {
				t.Fatalf("stale write: %v, want %v", err, tt.wantErr)
			}
			lists, accepted := r.State()
			if !slices.Equal(lists["k"], tt.want) {
				t.Errorf("final %v, want %v", lists["k"], tt.want)
			}
			if n := len(accepted["k"]); n != 1+btoi(!tt.fencing) {
				t.Errorf("%d writes accepted", n)
			}
			if _, err := r.Read("k", 1); tt.fencing != errors.Is(err, ErrStale) {
				t.Errorf("stale read: %v", err)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
