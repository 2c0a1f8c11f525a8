package command

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"emclust/train"
)

// The restarts' bar counts the steps of all restarts, takes a larger total as later
// restarts' become known, says how many restarts are done, and finishes with the
// last; its hooks pass each restart that ends on. A nil one, off a terminal, draws
// nothing.
func TestRestartsProgress(t *testing.T) {
	var out bytes.Buffer
	p := &restartsProgress{w: &out, what: "restarts", restarts: 2}
	var ended []int
	h := p.hooks(func(i int, _ train.Restart) { ended = append(ended, i) })
	h.Progress(3, 10)
	h.Progress(5, 20)
	if st := p.bar.State(); st.Max != 20 || st.CurrentNum != 5 || st.Description != "restarts 0/2 done" {
		t.Errorf("bar at %d of %d, %q; want 5 of 20, restarts 0/2 done", st.CurrentNum, st.Max, st.Description)
	}
	h.Done(0, train.Restart{})
	p.steps(15, 20)
	if st := p.bar.State(); st.CurrentNum != 15 || st.Description != "restarts 1/2 done" || p.bar.IsFinished() {
		t.Errorf("bar at %d, %q, finished %v; want 15, restarts 1/2 done, not finished", st.CurrentNum, st.Description, p.bar.IsFinished())
	}
	p.steps(20, 20)
	p.restartDone()
	if !p.bar.IsFinished() {
		t.Error("bar not finished after the last restart")
	}
	if out.Len() == 0 {
		t.Error("bar drew nothing")
	}
	if fmt.Sprint(ended) != "[0]" {
		t.Errorf("the hooks told of restarts %v ending, want [0]", ended)
	}
	var off *restartsProgress
	off.steps(1, 2)
	off.restartDone()
	// Off a terminal, the hooks draw nothing and still tell of restarts that end.
	if h := off.hooks(func(i int, _ train.Restart) { ended = append(ended, i) }); h.Progress != nil {
		t.Error("hooks of no bar count steps")
	} else if h.Done(1, train.Restart{}); fmt.Sprint(ended) != "[0 1]" {
		t.Errorf("hooks of no bar told of %v, want [0 1]", ended)
	}
}

// compare's bar for a run counts the steps of the epochs this sitting trains (here
// from epoch 3 of 4, as a resumed run), says which run and epoch, shows no loss, and
// finishes with the last epoch.
func TestRunBar(t *testing.T) {
	var out bytes.Buffer
	p := &runBar{w: &out, name: "em seed 2"}
	if p.ShowsLoss() {
		t.Error("the bar asks for the loss, which makes the loop wait for the device")
	}
	p.Start(3, 4, 10)
	p.Step(5, 0, false)
	if st := p.bar.State(); st.Max != 20 || st.CurrentNum != 5 || st.Description != "em seed 2: epoch 3/4" {
		t.Errorf("bar at %d of %d, %q; want 5 of 20, em seed 2: epoch 3/4", st.CurrentNum, st.Max, st.Description)
	}
	p.End(train.EpochMetrics{})
	bar := p.bar
	p.Start(4, 4, 10)
	p.Step(10, 0, false)
	if st := p.bar.State(); p.bar != bar || st.CurrentNum != 20 {
		t.Errorf("epoch 4: bar at %d (same bar %v); want 20 on the same bar", st.CurrentNum, p.bar == bar)
	}
	p.End(train.EpochMetrics{})
	if !bar.IsFinished() || p.bar != nil {
		t.Error("bar not finished after the last epoch")
	}
	if out.Len() == 0 {
		t.Error("bar drew nothing")
	}
}

// Off a terminal, each epoch's line says how long the epochs left take at the mean
// pace, in wall time, of those this sitting ended; the last line, or one under a
// second from the end, says nothing of it.
func TestEpochLinesTimeLeft(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(1e9, 0) // not the zero time, which means not yet begun
	p := newProgress(&out, false).(*barProgress)
	p.pace.now = func() time.Time { return clock }
	for _, e := range []struct {
		epoch, of int
		wall      time.Duration // from the epoch's start to its end
	}{{7, 250, 20 * time.Second}, {8, 250, 40 * time.Second}, {250, 250, 30 * time.Second}} {
		p.Start(e.epoch, e.of, 10)
		clock = clock.Add(e.wall)
		p.End(train.EpochMetrics{Epoch: e.epoch, Seconds: 1})
	}
	fast := newProgress(&out, false).(*barProgress)
	fast.pace.now = func() time.Time { return clock }
	fast.Start(1, 3, 10)
	clock = clock.Add(100 * time.Millisecond)
	fast.End(train.EpochMetrics{Epoch: 1, Seconds: 0.1})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// 243 × 20 s; 242 × 30 s; none at the end; none for 0.2 s.
	for i, want := range []string{"  ~1h21m left", "  ~2h01m left", "  1.0s", "  0.1s"} {
		if i >= len(lines) || !strings.HasSuffix(lines[i], want) {
			t.Errorf("line %d %q, want it to end %q", i, lines[min(i, len(lines)-1)], want)
		}
	}
	for _, tc := range []struct {
		d    string
		want string
	}{{"59.4s", "59s"}, {"61s", "1m01s"}, {"59m59.6s", "1h00m"}, {"26h29m40s", "26h30m"}} {
		d, _ := time.ParseDuration(tc.d)
		if got := roughly(d); got != tc.want {
			t.Errorf("roughly(%s) = %s, want %s", tc.d, got, tc.want)
		}
	}
}

// Off a terminal the restarts' progress is lines, not a bar: the counts and the time
// left, no more often than asked, from the first count heard.
func TestRestartsProgressLines(t *testing.T) {
	var out bytes.Buffer
	p := newRestartsProgress(&out, false, 4, "trials")
	if p == nil || !p.lines || p.pace.every != time.Minute {
		t.Fatalf("off a terminal: %+v, want lines every minute", p)
	}
	p.pace.every = 0
	clock := time.Unix(1e9, 0) // not the zero time, which means not yet begun
	p.pace.now = func() time.Time { return clock }
	h := p.hooks(func(int, train.Restart) {})
	h.Progress(100, 400) // a resumed run's first count: the pace starts here
	clock = clock.Add(time.Minute)
	h.Progress(100, 400)
	if out.Len() != 0 {
		t.Fatalf("a line before any step since the first count: %q", out.String())
	}
	h.Done(0, train.Restart{})
	h.Progress(200, 400) // 100 steps a minute since the first count: 2 minutes left
	if want := "emclust: trials 1/4 done, 200/400 steps (50%), ~2m00s left\n"; out.String() != want {
		t.Errorf("line %q, want %q", out.String(), want)
	}
	out.Reset()
	p.pace.every = time.Hour
	h.Progress(300, 400)
	if out.Len() != 0 || p.bar != nil {
		t.Errorf("a line within the interval, or a bar: %q", out.String())
	}
	if newRestartsProgress(&out, true, 4, "trials") != nil {
		t.Error("quiet: a progress")
	}
}

// compare's runs off a terminal: a line with the epoch and the time left at the wall
// pace of this sitting, no more often than every lineEvery.
func TestRunLines(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(1e9, 0)
	p := newRunLines(&out, "em seed 2")
	p.pace.now = func() time.Time { return clock }
	if p.ShowsLoss() {
		t.Error("the lines ask for the loss, which makes the loop wait for the device")
	}
	for epoch := 11; epoch <= 14; epoch++ { // a kept trial's run from epoch 11 of 250
		p.Start(epoch, 250, 10)
		clock = clock.Add(20 * time.Second)
		p.End(train.EpochMetrics{Epoch: epoch})
	}
	// Lines at 60 s (epoch 13) only: 237 epochs at 20 s.
	if want := "emclust: em seed 2: epoch 13/250, ~1h19m left\n"; out.String() != want {
		t.Errorf("lines %q, want %q", out.String(), want)
	}
}

// A bar is first drawn at its first count, with the run's own rate: drawn at its
// start, the epoch's bar showed "(0/N, 0 step/hr)", and the compare run's too.
func TestBarFirstDrawCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    train.Progress
	}{
		{"epoch", &barProgress{tty: true, pace: newPace(0)}},
		{"run", &runBar{name: "em seed 1"}},
	} {
		var out bytes.Buffer
		switch p := tc.p.(type) {
		case *barProgress:
			p.w = &out
		case *runBar:
			p.w = &out
		}
		tc.p.Start(1, 2, 10)
		if out.Len() != 0 {
			t.Errorf("%s: drawn before any step: %q", tc.name, out.String())
		}
		tc.p.Step(1, 0.5, true)
		if got := out.String(); !strings.Contains(got, "(1/") || strings.Contains(got, "(0/") || strings.Contains(got, "/hr") {
			t.Errorf("%s: first drawn as %q, want the first step counted and no rate per hour", tc.name, got)
		}
	}

	// The restarts' bar: a restart restored whole ends before any step of this call.
	var out bytes.Buffer
	p := &restartsProgress{w: &out, what: "trials", restarts: 3}
	p.steps(0, 8)
	p.restartDone()
	if out.Len() != 0 {
		t.Errorf("restarts: drawn before any step: %q", out.String())
	}
	p.steps(3, 8)
	if got := out.String(); !strings.Contains(got, "trials 1/3 done") || !strings.Contains(got, "(3/8") || strings.Contains(got, "/hr") {
		t.Errorf("restarts: first drawn as %q, want trials 1/3 done, 3 of 8 steps, no rate per hour", got)
	}
}
