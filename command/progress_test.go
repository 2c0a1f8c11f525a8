package command

import (
	"bytes"
	"fmt"
	"testing"

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
