package fedbench

import (
	"context"
	"testing"
	"time"
)

// TestRunSmoke runs both phases small: every event reaches every realm,
// the figures are filled in, and the late realm catches the whole chain.
func TestRunSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several realms")
	}
	o := DefaultOptions()
	o.Realms, o.Rate, o.Duration, o.Posters, o.CatchUpEvents = 3, 100, time.Second, 8, 300
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Missing != 0 || res.Replication.N != 2*res.Posts || res.Failures != 0 {
		t.Fatalf("replication: %+v", res)
	}
	if res.EventBytes <= 0 || res.WireRatio <= 0 || res.Replication.P50 <= 0 || res.CPUPerPost <= 0 {
		t.Fatalf("figures: %+v", res)
	}
	if got := res.Received["gossip"] + res.Received["catchup"]; got < 0.99 || res.Gossip.Messages <= 0 {
		t.Fatalf("events stored per event and receiver: %v; gossip %+v", res.Received, res.Gossip)
	}
	if res.CatchUpEvents < 300 || res.CatchUpRate <= 0 || res.CatchUpWireIn <= 0 || res.CatchUpCPUPerEvent <= 0 {
		t.Fatalf("catch-up: %+v", res)
	}
}
