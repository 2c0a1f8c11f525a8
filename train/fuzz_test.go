package train

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"emclust/torch"
)

// FuzzReadCheckpoint feeds the JSON documents a checkpoint's metadata carries (config,
// spec, state) to the readers that trust them: an error or a config, never a panic.
func FuzzReadCheckpoint(f *testing.F) {
	cfg, _ := json.Marshal(VectorDefaults())
	f.Add(string(cfg), `{"arch":"mlp","in":4,"hidden":[32,32],"k":2,"norm":true}`, `{"epoch":2,"steps_a":[4,4,4,4,4,4]}`)
	f.Add(`{"epochs":-1,"batch_size":1e30}`, `[]`, `{"epoch":"x"}`)
	f.Add(`null`, `{"hidden":[-5]}`, `{}`)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, config, spec, state string) {
		path := filepath.Join(dir, checkpointName)
		// SaveSafetensors refuses invalid UTF-8, which its JSON could not carry as it is;
		// the readers get what a file can hold (raw bytes: FuzzReadSafetensors).
		valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		meta := map[string]string{"format": "emclust-checkpoint-1", "config": valid(config), "spec": valid(spec), "state": valid(state)}
		if err := torch.SaveSafetensors(path, nil, meta); err != nil {
			t.Fatal(err)
		}
		sf, c, _, err := ReadCheckpoint(dir)
		if err != nil {
			return
		}
		CheckpointEpochs(sf)
		c.Validate()
		os.Remove(path)
	})
}
