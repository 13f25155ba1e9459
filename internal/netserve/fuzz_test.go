package netserve

import "testing"

// FuzzParseNetworks checks that no list makes ParseNetworks panic, and
// that every network it accepts is valid, masked, unmapped and contains
// its own address.
func FuzzParseNetworks(f *testing.F) {
	for _, seed := range []string{
		"", " ", "10.0.0.0/8", "127.0.0.1, ::1", "fd00::/8,192.168.1.7",
		"::ffff:10.0.0.0/104", "::ffff:1.2.3.4", "fe80::1%eth0", "10.0.0.0/33",
		"10.1.2.3/8", ",", "1.2.3.4,,", "not-an-ip",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		nets, err := ParseNetworks(s)
		if err != nil {
			if nets != nil {
				t.Fatalf("ParseNetworks(%q) = %v, %v: networks with an error", s, nets, err)
			}
			return
		}
		for _, p := range nets {
			if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || !p.Contains(p.Addr()) {
				t.Fatalf("ParseNetworks(%q) gave %v: not a valid, masked, unmapped network", s, p)
			}
		}
	})
}
