package train

import (
	"fmt"
	"strings"
	"testing"

	"emclust/torch"
)

func TestExplainOOM(t *testing.T) {
	oom := &torch.Error{Op: "conv2d", Msg: "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total capacity)"}
	got := ExplainOOM(fmt.Errorf("epoch 3: %w", oom), "lower --batch-size").Error()
	for _, want := range []string{"Tried to allocate 2.00 GiB", "out of memory: lower --batch-size"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not contain %q", got, want)
		}
	}
	other := &torch.Error{Op: "matmul", Msg: "shapes cannot be multiplied (2x3 and 4x5)"}
	if err := ExplainOOM(other, "lower --batch-size"); err != error(other) {
		t.Errorf("a shape error was changed to %v", err)
	}
}
