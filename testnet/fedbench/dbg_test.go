package fedbench

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

func TestDbgRun(t *testing.T) {
	o := DefaultOptions()
	o.Realms, o.Rate, o.Duration, o.CatchUpEvents = 5, 1000, 5*time.Second, 0
	o.Progress = io.Discard
	o.Logger = slog.New(slog.DiscardHandler)
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
}
