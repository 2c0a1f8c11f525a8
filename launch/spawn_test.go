package launch

import (
	"context"
	"errors"
	"io"
	"path/filepath"
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

	// Interrupted, one rank fails and the other never stops (a rank whose peer was
	// lost, and that peer frozen): the frozen one is killed. Spawn waited for it for
	// ever.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	ready := t.TempDir()
	script := `if [ "$RANK" = 0 ]; then trap 'exit 1' INT; else trap '' INT; fi; : > "$1/$RANK"; while :; do sleep 0.05; done`
	done := make(chan error, 1)
	go func() {
		done <- Spawn(ctx, "/usr/bin/env", []string{"--default-signal=INT", "/bin/sh", "-c", script, "sh", ready}, 2, io.Discard, io.Discard)
	}()
	go func() { // the interrupt once both traps are set, not by a timer a loaded machine outruns
		for ctx.Err() == nil {
			if m, _ := filepath.Glob(filepath.Join(ready, "*")); len(m) == 2 {
				cancel()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	select {
	case err = <-done:
		var re *RankError
		if !errors.As(err, &re) || re.Rank != 0 || re.Code != 1 {
			t.Errorf("a rank failed after the interrupt, the other frozen: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Spawn still waits for a frozen rank 20 s after the other failed")
	}

	err = Spawn(context.Background(), "/bin/sh", []string{"-c", "kill -KILL $$"}, 2, io.Discard, io.Discard)
	if err == nil || errors.Is(err, ErrInterruptedStarting) || !strings.Contains(err.Error(), "was killed (killed)") {
		t.Errorf("a rank killed: %v", err)
	}
}
