package launch

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// An interrupt passed on to ranks that cannot catch it yet (sleep here, a rank still
// loading) ends them by the signal: that is the interrupt, not a lost rank. A rank
// killed otherwise is named as killed.
func TestSpawnSignals(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(300*time.Millisecond, cancel)
	// env resets SIGINT: a shell without job control starts its background jobs
	// with it ignored, and sleep would keep that.
	err := Spawn(ctx, "/usr/bin/env", []string{"--default-signal=INT", "/bin/sleep", "30"}, 2, io.Discard, io.Discard)
	if !errors.Is(err, ErrInterruptedStarting) {
		t.Errorf("interrupted while starting: %v", err)
	}

	err = Spawn(context.Background(), "/bin/sh", []string{"-c", "kill -KILL $$"}, 2, io.Discard, io.Discard)
	if err == nil || errors.Is(err, ErrInterruptedStarting) || !strings.Contains(err.Error(), "was killed (killed)") {
		t.Errorf("a rank killed: %v", err)
	}
}
