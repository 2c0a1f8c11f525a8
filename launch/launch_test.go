package launch

import (
	"fmt"
	"hash/fnv"
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

// stepPort is the port FromEnv gives a Slurm step: 20000 plus a hash of "job.step".
func stepPort(jobStep string) int {
	h := fnv.New32a()
	h.Write([]byte(jobStep))
	return 20000 + int(h.Sum32()%10000)
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
			want: &Role{Rank: 5, World: 8, LocalRank: 1, LocalWorld: 4, MasterAddr: "gpu03", MasterPort: stepPort("123456.0"),
				Prefix: "emclust/123456.0", Launcher: "Slurm"}},
		{name: "srun with MASTER_ADDR and MASTER_PORT", env: env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2",
			"SLURM_STEP_NODELIST", "a,b", "MASTER_ADDR", "head", "MASTER_PORT", "4000"),
			want: &Role{Rank: 0, World: 2, LocalWorld: 1, MasterAddr: "head", MasterPort: 4000, Prefix: "emclust/.", Launcher: "Slurm"}},
		{name: "torchrun inside srun", env: env("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "SLURM_PROCID", "3", "SLURM_STEP_NUM_TASKS", "4"),
			want: &Role{Rank: 1, World: 2, LocalWorld: 1, MasterAddr: "h", MasterPort: 29500, Prefix: "emclust//", Launcher: "RANK/WORLD_SIZE variables"}},
		{name: "torchrun of one process", env: env("RANK", "0", "WORLD_SIZE", "1"),
			want: &Role{World: 1, LocalWorld: 1, MasterAddr: "127.0.0.1", MasterPort: 29500, Prefix: "emclust//", Launcher: "RANK/WORLD_SIZE variables"}},
		{name: "srun of one task (srun --pty bash)", env: env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "1", "SLURM_STEP_NODELIST", "localhost", "SLURM_JOB_ID", "77")},
		// Was "Slurm: node list: empty (or set MASTER_ADDR)".
		{name: "srun of one task, no node list", env: env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "1")},
		{name: "srun, uneven tasks per node", env: env("SLURM_PROCID", "2", "SLURM_STEP_NUM_TASKS", "4", "SLURM_LOCALID", "1", "SLURM_NODEID", "1",
			"SLURM_STEP_TASKS_PER_NODE", "1,3", "SLURM_STEP_NODELIST", "n[1-2]", "MASTER_PORT", "5000"),
			want: &Role{Rank: 2, World: 4, LocalRank: 1, LocalWorld: 3, MasterAddr: "n1", MasterPort: 5000, Prefix: "emclust/.", Launcher: "Slurm"}},
		{name: "srun, a script's WORLD_SIZE agreeing", env: env("WORLD_SIZE", "2", "MASTER_ADDR", "head", "SLURM_PROCID", "1", "SLURM_STEP_NUM_TASKS", "2", "MASTER_PORT", "4000"),
			want: &Role{Rank: 1, World: 2, LocalWorld: 1, MasterAddr: "head", MasterPort: 4000, Prefix: "emclust/.", Launcher: "Slurm"}},
		{name: "srun, a script's WORLD_SIZE disagreeing", env: env("WORLD_SIZE", "4", "MASTER_ADDR", "head", "SLURM_PROCID", "1", "SLURM_STEP_NUM_TASKS", "2"),
			err: "WORLD_SIZE=\"4\", but srun started 2 tasks"},
		{name: "srun, malformed tasks per node", env: env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_STEP_TASKS_PER_NODE", ",", "SLURM_STEP_NODELIST", "n1"),
			err: "want a count"},
		{name: "srun, node beyond the counts", env: env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_NODEID", "2", "SLURM_STEP_TASKS_PER_NODE", "1(x2)", "SLURM_STEP_NODELIST", "n[1-2]"),
			err: "SLURM_NODEID=2"},
		{name: "LOCAL_RANK without LOCAL_WORLD_SIZE", env: env("RANK", "1", "LOCAL_RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "h"),
			want: &Role{Rank: 1, World: 2, LocalRank: 1, LocalWorld: 2, MasterAddr: "h", MasterPort: 29500, Prefix: "emclust//", Launcher: "torchrun"}},
		{name: "LOCAL_RANK alone: every rank takes the world as this machine's", env: env("RANK", "0", "LOCAL_RANK", "0", "WORLD_SIZE", "4", "MASTER_ADDR", "h"),
			want: &Role{World: 4, LocalWorld: 4, MasterAddr: "h", MasterPort: 29500, Prefix: "emclust//", Launcher: "torchrun"}},
		{name: "PyTorchJob's default nprocPerNode (auto)", env: env("RANK", "0", "WORLD_SIZE", "1", "PET_NPROC_PER_NODE", "auto", "MASTER_ADDR", "m"),
			want: &Role{World: 1, LocalWorld: 1, MasterAddr: "m", MasterPort: 29500, Prefix: "emclust//", Launcher: "RANK/WORLD_SIZE variables"}},
		{name: "srun --gpus-per-task", env: env("SLURM_PROCID", "1", "SLURM_STEP_NUM_TASKS", "2", "SLURM_LOCALID", "1", "SLURM_STEP_TASKS_PER_NODE", "2",
			"SLURM_STEP_NODELIST", "g1", "MASTER_PORT", "5000", "SLURM_GPUS_PER_TASK", "1"),
			want: &Role{Rank: 1, World: 2, LocalRank: 1, LocalWorld: 2, MasterAddr: "g1", MasterPort: 5000, Prefix: "emclust/.", Launcher: "Slurm", GPUPerTask: true}},
		{name: "PyTorchJob with nprocPerNode 2, no torchrun in the pod", env: env("RANK", "1", "WORLD_SIZE", "4", "PET_NPROC_PER_NODE", "2", "MASTER_ADDR", "m"),
			err: "PET_NPROC_PER_NODE=2 without LOCAL_RANK"},
		{name: "Slurm rank beyond world names the variables", env: env("SLURM_PROCID", "2", "SLURM_STEP_NUM_TASKS", "2", "SLURM_STEP_NODELIST", "n1"),
			err: "rank 2 (SLURM_PROCID) of a world of 2 (SLURM_STEP_NUM_TASKS)"},
		{name: "RANK not a number", env: env("RANK", "one", "WORLD_SIZE", "2"), err: `RANK="one"`},
		{name: "WORLD_SIZE missing", env: env("RANK", "0"), err: "WORLD_SIZE is not set"},
		{name: "rank beyond world", env: env("RANK", "2", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1"), err: "rank 2 (RANK) of a world of 2 (WORLD_SIZE)"},
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
		{list: "rack[1-2]-node[01-04]", want: "rack1-node01"},
		{list: "rack[3]-n[7-8],x", want: "rack3-n7"},
		{list: ",n1", err: "not a node list"},
		{list: "n[3-1]", err: "not a node list"},
		{list: "n[-3]", err: "not a node list"},
		{list: "n[[1-2]]", err: "not a node list"},
		{list: "n1]", err: "not a node list"},
		{list: "n[1-2]]", err: "not a node list"},
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

func TestTasksPerNode(t *testing.T) {
	for _, tc := range []struct{ s, want, err string }{
		{s: "4", want: "[4]"},
		{s: "2(x3),1", want: "[2 2 2 1]"},
		{s: "1,3", want: "[1 3]"},
		{s: ",", err: "want a count"},
		{s: "(", err: "want a count"},
		{s: "2(x0)", err: "want a count"},
		{s: "2(3)", err: "want a count"},
		{s: "2(x99999999999)", err: "want a count"},
	} {
		got, err := TasksPerNode(tc.s)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("TasksPerNode(%q): error %v, want %q", tc.s, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("TasksPerNode(%q) = %v, %v; want %s", tc.s, got, err, tc.want)
		}
	}
}

// Each rank's GPU: its local rank's, or under srun with a GPU bound to each task,
// the one it sees.
func TestGPU(t *testing.T) {
	for _, tc := range []struct {
		role      Role
		count     int
		want      int
		errSubstr string
	}{
		{role: Role{Launcher: "torchrun", LocalRank: 3, LocalWorld: 4}, count: 4, want: 3},
		{role: Role{Launcher: "torchrun", LocalRank: 1, LocalWorld: 4}, count: 1, errSubstr: "sees 1 CUDA devices"},
		{role: Role{Launcher: "Slurm", LocalRank: 3, LocalWorld: 4, GPUPerTask: true}, count: 1, want: 0},
		{role: Role{Launcher: "Slurm", LocalRank: 0, LocalWorld: 1}, count: 1, want: 0},
		// Two tasks and one GPU without --gpus-per-task: both would take it.
		{role: Role{Launcher: "Slurm", LocalRank: 1, LocalWorld: 2}, count: 1, errSubstr: "sees 1 CUDA devices"},
		{role: Role{Launcher: "Slurm", LocalRank: 2, LocalWorld: 4}, count: 4, want: 2},
		{role: Role{Launcher: "Slurm", LocalRank: 2, LocalWorld: 4}, count: 2, errSubstr: "local rank 2"},
	} {
		got, err := tc.role.GPU(tc.count)
		if tc.errSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errSubstr) {
				t.Errorf("%+v.GPU(%d): error %v, want %q", tc.role, tc.count, err, tc.errSubstr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%+v.GPU(%d) = %d, %v; want %d", tc.role, tc.count, got, err, tc.want)
		}
	}
}

// Two steps of one job at once serve their stores on different ports.
func TestSlurmPortPerStep(t *testing.T) {
	port := func(step string) int {
		r, err := FromEnv(env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_STEP_NODELIST", "n1", "SLURM_JOB_ID", "77", "SLURM_STEP_ID", step))
		if err != nil {
			t.Fatal(err)
		}
		if r.MasterPort < 20000 || r.MasterPort >= 30000 {
			t.Errorf("step %s: port %d outside 20000-29999", step, r.MasterPort)
		}
		return r.MasterPort
	}
	if a, b := port("0"), port("1"); a == b {
		t.Errorf("steps 0 and 1 of job 77 both use port %d", a)
	}
}
