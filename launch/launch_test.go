package launch

import (
	"strings"
	"testing"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(string) string
		want *Role // nil: no launcher
		err  string
	}{
		{name: "alone", env: env()},
		{name: "sbatch script without srun", env: env("SLURM_PROCID", "0", "SLURM_NTASKS", "4", "SLURM_JOB_NODELIST", "n[1-2]")},
		{name: "torchrun", env: env("RANK", "3", "WORLD_SIZE", "4", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "2",
			"MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29500", "TORCHELASTIC_USE_AGENT_STORE", "True",
			"TORCHELASTIC_RUN_ID", "job7", "TORCHELASTIC_RESTART_COUNT", "1"),
			want: &Role{Rank: 3, World: 4, LocalRank: 1, LocalWorld: 2, MasterAddr: "10.0.0.1", MasterPort: 29500,
				AgentStore: true, Prefix: "emclust/job7/1", Launcher: "torchrun"}},
		{name: "kubeflow", env: env("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "job-master-0", "MASTER_PORT", "23456"),
			want: &Role{Rank: 1, World: 2, LocalRank: 0, LocalWorld: 1, MasterAddr: "job-master-0", MasterPort: 23456,
				Prefix: "emclust//", Launcher: "RANK/WORLD_SIZE variables"}},
		{name: "srun", env: env("SLURM_PROCID", "5", "SLURM_STEP_NUM_TASKS", "8", "SLURM_LOCALID", "1",
			"SLURM_STEP_TASKS_PER_NODE", "4(x2)", "SLURM_STEP_NODELIST", "gpu[03-04]", "SLURM_JOB_ID", "123456", "SLURM_STEP_ID", "0"),
			want: &Role{Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, MasterAddr: "gpu03", MasterPort: 23456,
				Prefix: "emclust/123456.0", Launcher: "Slurm"}},
		{name: "srun with MASTER_ADDR and MASTER_PORT", env: env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2",
			"SLURM_STEP_NODELIST", "a,b", "MASTER_ADDR", "head", "MASTER_PORT", "4000"),
			want: &Role{Rank: 0, World: 2, LocalWorld: 1, MasterAddr: "head", MasterPort: 4000, Prefix: "emclust/.", Launcher: "Slurm"}},
		{name: "torchrun inside srun", env: env("RANK", "0", "WORLD_SIZE", "1", "SLURM_PROCID", "3", "SLURM_STEP_NUM_TASKS", "4"),
			want: &Role{World: 1, LocalWorld: 1, MasterPort: 29500, Prefix: "emclust//", Launcher: "RANK/WORLD_SIZE variables"}},
		{name: "RANK not a number", env: env("RANK", "one", "WORLD_SIZE", "2"), err: `RANK="one"`},
		{name: "WORLD_SIZE missing", env: env("RANK", "0"), err: "WORLD_SIZE is not set"},
		{name: "rank beyond world", env: env("RANK", "2", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1"), err: "rank 2 of a world of 2"},
		{name: "no master address", env: env("RANK", "1", "WORLD_SIZE", "2", "MASTER_PORT", "1"), err: "MASTER_ADDR is not set"},
		{name: "port out of range", env: env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "70000"), err: "MASTER_PORT=70000"},
		{name: "bad Slurm node list", env: env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_STEP_NODELIST", "n[1-2"), err: "unclosed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromEnv(tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestFirstHost(t *testing.T) {
	for _, tc := range []struct{ list, want, err string }{
		{list: "node7", want: "node7"},
		{list: "a,b,c", want: "a"},
		{list: "gpu[01-04,07],cpu3", want: "gpu01"},
		{list: "n[5,1-2]", want: "n5"},
		{list: "n[1-2]-ib,m1", want: "n1-ib"},
		{list: "", err: "empty"},
		{list: "[1-2]", err: "not a node list"},
		{list: "n[a-b]", err: "not a node list"},
	} {
		got, err := FirstHost(tc.list)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("FirstHost(%q): error %v, want %q", tc.list, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("FirstHost(%q) = %q, %v; want %q", tc.list, got, err, tc.want)
		}
	}
}
