package command

import (
	"bytes"
	"testing"
)

// The restarts' bar counts the steps of all restarts, takes a larger total as later
// restarts' become known, says how many restarts are done, and finishes with the
// last. A nil one, off a terminal, does nothing.
func TestRestartsProgress(t *testing.T) {
	var out bytes.Buffer
	p := &restartsProgress{w: &out, what: "restarts", restarts: 2}
	p.steps(3, 10)
	p.steps(5, 20)
	if st := p.bar.State(); st.Max != 20 || st.CurrentNum != 5 || st.Description != "restarts 0/2 done" {
		t.Errorf("bar at %d of %d, %q; want 5 of 20, restarts 0/2 done", st.CurrentNum, st.Max, st.Description)
	}
	p.restartDone()
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
	var off *restartsProgress
	off.steps(1, 2)
	off.restartDone()
}
