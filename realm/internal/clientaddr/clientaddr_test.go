package clientaddr

import "testing"

func TestKey(t *testing.T) {
	for _, c := range []struct {
		remote, key string
		loopback    bool
	}{
		{"192.0.2.7:4000", "192.0.2.7", false},
		{"192.0.2.7", "192.0.2.7", false},
		{"[2001:db8:1:2:aaaa::1]:4000", "2001:db8:1:2::/64", false},
		{"[2001:db8:1:2:bbbb::9]:4000", "2001:db8:1:2::/64", false},
		{"[::ffff:192.0.2.7]:4000", "192.0.2.7", false},
		{"[fe80::1%eth0]:4000", "fe80::/64", false},
		{"127.0.0.1:80", "127.0.0.1", true},
		{"127.8.9.10:80", "127.8.9.10", true},
		{"[::1]:80", "::/64", true},
		{"[::ffff:127.0.0.1]:80", "127.0.0.1", true},
		{"not an address", "not an address", false},
		{"pipe:12", "pipe", false},
	} {
		if got := Key(c.remote); got != c.key {
			t.Errorf("Key(%q) = %q, want %q", c.remote, got, c.key)
		}
		if got := Loopback(c.remote); got != c.loopback {
			t.Errorf("Loopback(%q) = %v, want %v", c.remote, got, c.loopback)
		}
	}
}
