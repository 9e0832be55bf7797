package web

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestAddrLimiterFull: once it remembers as many addresses as it may, an
// address seen before keeps what it has used, a newcomer shares one
// allowance with every other newcomer, and addresses whose allowance is
// whole again make room. Before, a full map was cleared, which handed every
// address a fresh allowance: unlimited attempts from enough addresses.
func TestAddrLimiterFull(t *testing.T) {
	defer func(n int) { maxLimitedAddrs = n }(maxLimitedAddrs)
	maxLimitedAddrs = 4
	l := newAddrLimiter(rate.Every(time.Hour), 2)
	from := func(addr string) bool {
		r := httptest.NewRequest("POST", "/console/login", nil)
		r.RemoteAddr = addr + ":1234"
		return l.allow(r)
	}
	// attempts is how many of three attempts from addr are allowed.
	attempts := func(addr string) int {
		n := 0
		for range 3 {
			if from(addr) {
				n++
			}
		}
		return n
	}
	for i := range maxLimitedAddrs {
		if a := fmt.Sprintf("10.0.0.%d", i); attempts(a) != 2 {
			t.Fatalf("%s: want two attempts, then a refusal", a)
		}
	}
	// Full, and nobody quiet: newcomers share the overflow allowance.
	if !from("10.0.1.1") || !from("10.0.1.2") || from("10.0.1.3") {
		t.Fatal("newcomers to a full limiter: want two attempts between them, then a refusal")
	}
	if from("10.0.0.0") {
		t.Fatal("an address seen before got a fresh allowance when the limiter filled up")
	}
	// An address whose allowance is whole again is forgotten to make room.
	l.mu.Lock()
	l.m["10.0.0.1"] = rate.NewLimiter(l.every, l.burst)
	l.swept = time.Time{}
	l.mu.Unlock()
	if attempts("10.0.2.1") != 2 {
		t.Fatal("a newcomer after a quiet address left: want an allowance of its own")
	}
	if _, ok := l.m["10.0.0.1"]; ok {
		t.Fatal("the quiet address is still remembered")
	}
}
