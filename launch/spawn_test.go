package launch

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An interrupt passed on to ranks that cannot catch it yet (sleep here, a rank still
// loading) ends them by the signal: that is the interrupt, not a lost rank. A rank
// killed otherwise is named as killed.
func TestSpawnSignals(t *testing.T) {
	// env resets SIGINT: a shell without job control starts its background jobs
	// with it ignored, and sleep would keep that. Each rank marks when it has.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := t.TempDir()
	interruptWhenReady(ctx, cancel, ready)
	err := Spawn(ctx, "/usr/bin/env", []string{"--default-signal=INT", "/bin/sh", "-c", `: > "$1/$RANK"; exec /bin/sleep 30`, "sh", ready}, 2, 0, io.Discard, io.Discard)
	if !errors.Is(err, ErrInterruptedStarting) {
		t.Errorf("interrupted while starting: %v", err)
	}

	// Interrupted, one rank fails and the other never stops (a rank whose peer was
	// lost, and that peer frozen): the frozen one is killed. Spawn waited for it for
	// ever.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	ready = t.TempDir()
	script := `if [ "$RANK" = 0 ]; then trap 'exit 1' INT; else trap '' INT; fi; : > "$1/$RANK"; while :; do sleep 0.05; done`
	done := make(chan error, 1)
	go func() {
		done <- Spawn(ctx, "/usr/bin/env", []string{"--default-signal=INT", "/bin/sh", "-c", script, "sh", ready}, 2, 0, io.Discard, io.Discard)
	}()
	interruptWhenReady(ctx, cancel, ready)
	select {
	case err = <-done:
		var re *RankError
		if !errors.As(err, &re) || re.Rank != 0 || re.Code != 1 {
			t.Errorf("a rank failed after the interrupt, the other frozen: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Spawn still waits for a frozen rank 20 s after the other failed")
	}

	err = Spawn(context.Background(), "/bin/sh", []string{"-c", "kill -KILL $$"}, 2, 0, io.Discard, io.Discard)
	var killed *KilledError
	if !errors.As(err, &killed) || killed.Signal != syscall.SIGKILL || !strings.Contains(err.Error(), "rank 0 of 2 was killed (SIGKILL, killed)") && !strings.Contains(err.Error(), "rank 1 of 2 was killed (SIGKILL, killed)") {
		t.Errorf("a rank killed: %v", err)
	}
}

// interruptWhenReady cancels ctx once both ranks have marked in ready that they are
// set for the interrupt: not by a timer, which a loaded machine outruns.
func interruptWhenReady(ctx context.Context, cancel func(), ready string) {
	go func() {
		for ctx.Err() == nil {
			if m, _ := filepath.Glob(filepath.Join(ready, "*")); len(m) == 2 {
				cancel()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

// The ranks' last errors are said once each, after all have stopped: the same words
// from several ranks (a shared mistake, which each rank printed) once, under the
// lowest rank's number; others each.
func TestSpawnSaysErrorsOnce(t *testing.T) {
	for _, tc := range []struct {
		name, say string // say: a rank's error; %s is its rank
		want      string
		said      bool
	}{
		{"shared", `emclust: rank %s: batch size 5 does not split`, "emclust: rank 0: batch size 5 does not split\n", true},
		{"each its own", `emclust: rank %s: lost rank %s`, "emclust: rank 0: lost rank 0\nemclust: rank 1: lost rank 1\n", true},
		{"none", ``, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each rank says its error, then waits for the other's marker, so that
			// neither is stopped before it has spoken.
			ready := t.TempDir()
			say := ""
			if tc.say != "" {
				say = `printf '` + tc.say + `\n' ` + strings.Repeat(`"$RANK" `, strings.Count(tc.say, "%s")) + `>&3; `
			}
			script := say + `: > "$1/$RANK"; until [ -e "$1/0" ] && [ -e "$1/1" ]; do sleep 0.01; done; exit 3`
			var stderr strings.Builder
			err := Spawn(context.Background(), "/bin/sh", []string{"-c", script, "sh", ready}, 2, 0, io.Discard, &stderr)
			var re *RankError
			if !errors.As(err, &re) || re.Code != 3 || re.Said != tc.said {
				t.Errorf("Spawn: %#v, want a RankError of exit code 3, Said %v", err, tc.said)
			}
			if stderr.String() != tc.want {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.want)
			}
		})
	}
}

// Outside Spawn, a process's error goes to its stderr; with Spawn's variables, only a
// pipe takes it, not a file or socket the process holds as descriptor 3.
func TestErrorOutOutsideSpawn(t *testing.T) {
	var stderr strings.Builder
	t.Setenv("EMCLUST_LAUNCHER", "")
	if w := ErrorOut(&stderr); w != io.Writer(&stderr) {
		t.Errorf("ErrorOut outside Spawn is %T, want the stderr given", w)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isPipe(f) || !isPipe(w) {
		t.Errorf("isPipe: a file %v, a pipe %v", isPipe(f), isPipe(w))
	}
}

// A rank interrupted alone (SIGTERM to one process) has the others interrupted, not
// killed: rank 0, stopping too, has its say (where it saved). It was killed first.
func TestSpawnOneRankInterrupted(t *testing.T) {
	ready := t.TempDir()
	script := `if [ "$RANK" = 0 ]; then trap 'echo "emclust: rank 0: saved" >&3; exit 130' INT; : > "$1/0"; while :; do sleep 0.05; done; ` +
		`else until [ -e "$1/0" ]; do sleep 0.01; done; exit 130; fi`
	var stderr strings.Builder
	err := Spawn(context.Background(), "/usr/bin/env", []string{"--default-signal=INT", "/bin/sh", "-c", script, "sh", ready}, 2, 0, io.Discard, &stderr)
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 1 || re.Code != 130 {
		t.Errorf("Spawn: %v, want rank 1's exit 130 first", err)
	}
	if stderr.String() != "emclust: rank 0: saved\n" {
		t.Errorf("stderr %q, want rank 0's line", stderr.String())
	}
}

// A rank that refuses the command line has the others interrupted, not killed: rank
// 0, which may have made the run folder, removes it as it stops (a killed one left
// it), and its word that it was interrupted is not said.
func TestSpawnRankRefused(t *testing.T) {
	ready := t.TempDir()
	script := `if [ "$RANK" = 0 ]; then trap 'echo "emclust: rank 0: interrupted" >&3; : > "$1/clean"; exit 130' INT; : > "$1/0"; while :; do sleep 0.05; done; ` +
		`else until [ -e "$1/0" ]; do sleep 0.01; done; echo "emclust: rank 1: --flag: a mistake" >&3; exit 64; fi`
	var stderr strings.Builder
	err := Spawn(context.Background(), "/usr/bin/env", []string{"--default-signal=INT", "/bin/sh", "-c", script, "sh", ready}, 2, 0, io.Discard, &stderr)
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 1 || re.Code != RankUsageExit || !re.Said {
		t.Errorf("Spawn: %#v, want rank 1's refusal, said", err)
	}
	if stderr.String() != "emclust: rank 1: --flag: a mistake\n" {
		t.Errorf("stderr %q, want rank 1's line alone", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(ready, "clean")); err != nil {
		t.Errorf("rank 0 did not stop cleanly: %v", err)
	}
}
