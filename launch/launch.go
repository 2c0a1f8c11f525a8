// Package launch finds a process's place in a multi-process run from the variables
// the launchers users already know set — torchrun, Slurm's srun, a Kubeflow
// PyTorchJob — and starts the processes of a single-machine run itself (--nproc).
package launch

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Role is one process's place in a run.
type Role struct {
	Rank, World           int // global rank and number of processes
	LocalRank, LocalWorld int // the same on this machine
	// MasterAddr and MasterPort are where rank 0's (or the launcher's) store listens.
	MasterAddr string
	MasterPort int
	// AgentStore is set when the launcher already serves the store on MasterPort
	// (torchrun's TORCHELASTIC_USE_AGENT_STORE): then every rank is a client.
	AgentStore bool
	// Prefix keeps this attempt's store keys apart from an earlier attempt's.
	Prefix string
	// Launcher names what set the variables, for messages.
	Launcher string
	// GPUPerTask is set where srun gave each task GPUs of its own (--gpus-per-task),
	// which it alone sees.
	GPUPerTask bool
}

// ServeStore reports whether this process serves the store.
func (r Role) ServeStore() bool { return r.Rank == 0 && !r.AgentStore }

// FromEnv reads the role from the environment through getenv (os.Getenv). It returns
// nil when no launcher started the process. RANK (torchrun, Kubeflow, --nproc) comes
// before Slurm's variables, so that torchrun inside an allocation wins; a WORLD_SIZE
// without RANK beside srun's variables is a script's export, and srun's count must
// agree with it. A step of one Slurm task is a process alone: srun --pty bash sets
// the variables for the shell, and what runs in it is no rank of anything.
func FromEnv(getenv func(string) string) (*Role, error) {
	// SLURM_STEP_NUM_TASKS is set by srun for its tasks; a batch script run without
	// srun has SLURM_NTASKS but is one process.
	slurm := getenv("SLURM_PROCID") != "" && getenv("SLURM_STEP_NUM_TASKS") != ""
	switch {
	case getenv("RANK") != "" || (getenv("WORLD_SIZE") != "" && !slurm):
		return torchrunRole(getenv)
	case slurm:
		r, err := slurmRole(getenv)
		if err != nil || r.World == 1 {
			return nil, err
		}
		return r, nil
	}
	return nil, nil
}

type reader struct {
	getenv func(string) string
	err    error
}

// int reads a variable of at least lo; def when unset and def ≥ 0.
func (r *reader) int(name string, lo, def int) int {
	s := r.getenv(name)
	if s == "" && def >= 0 {
		return def
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < lo {
		if r.err == nil {
			if s == "" {
				r.err = fmt.Errorf("%s is not set", name)
			} else {
				r.err = fmt.Errorf("%s=%q: want an integer ≥ %d", name, s, lo)
			}
		}
		return lo
	}
	return v
}

func torchrunRole(getenv func(string) string) (*Role, error) {
	rd := &reader{getenv: getenv}
	r := &Role{Launcher: "torchrun"}
	r.World = rd.int("WORLD_SIZE", 1, -1)
	r.Rank = rd.int("RANK", 0, -1)
	// Kubeflow runs one process per pod and sets no LOCAL_* variables.
	r.LocalRank = rd.int("LOCAL_RANK", 0, 0)
	// torch.distributed.launch --use_env and hand-made scripts set LOCAL_RANK alone:
	// take every rank to be here, as each rank then shares this machine's cores alike.
	localWorld := 1
	if getenv("LOCAL_RANK") != "" {
		localWorld = max(r.World, 1)
	}
	r.LocalWorld = rd.int("LOCAL_WORLD_SIZE", 1, localWorld)
	// A PyTorchJob with nprocPerNode N counts N processes a pod in WORLD_SIZE, and
	// RANK is the pod's: the pod's command must start them (torchrun), or the ranks
	// would wait for processes that never come.
	// (auto, cpu and gpu are PyTorchJob's other values: torchrun's to resolve.)
	if n, err := strconv.Atoi(strings.TrimSpace(getenv("PET_NPROC_PER_NODE"))); err == nil && n > 1 && getenv("LOCAL_RANK") == "" && rd.err == nil {
		rd.err = fmt.Errorf("PET_NPROC_PER_NODE=%d without LOCAL_RANK: WORLD_SIZE counts %d processes a pod, and this pod started one; run emclust under torchrun in the pod, or set nprocPerNode to 1", n, n)
	}
	r.MasterAddr = getenv("MASTER_ADDR")
	if r.MasterAddr == "" && r.World == 1 {
		// A world of one serves its own store; with no host it waited on "" until
		// the timeout.
		r.MasterAddr = "127.0.0.1"
	}
	r.MasterPort = rd.int("MASTER_PORT", 1, 29500) // torch.distributed's default
	switch {
	case getenv("EMCLUST_LAUNCHER") != "":
		r.Launcher = getenv("EMCLUST_LAUNCHER")
	case getenv("TORCHELASTIC_RUN_ID") == "" && getenv("LOCAL_RANK") == "":
		r.Launcher = "RANK/WORLD_SIZE variables"
	}
	r.AgentStore = strings.EqualFold(getenv("TORCHELASTIC_USE_AGENT_STORE"), "true")
	r.Prefix = "emclust/" + getenv("TORCHELASTIC_RUN_ID") + "/" + getenv("TORCHELASTIC_RESTART_COUNT")
	if rd.err != nil {
		return nil, fmt.Errorf("%s: %w", r.Launcher, rd.err)
	}
	return r, r.check()
}

func slurmRole(getenv func(string) string) (*Role, error) {
	rd := &reader{getenv: getenv}
	r := &Role{Launcher: "Slurm"}
	r.World = rd.int("SLURM_STEP_NUM_TASKS", 1, -1)
	r.Rank = rd.int("SLURM_PROCID", 0, -1)
	r.LocalRank = rd.int("SLURM_LOCALID", 0, 0)
	r.LocalWorld = 1
	if s := getenv("SLURM_STEP_TASKS_PER_NODE"); s != "" {
		counts, err := TasksPerNode(s)
		if err != nil {
			return nil, fmt.Errorf("Slurm: SLURM_STEP_TASKS_PER_NODE=%q: %w", s, err)
		}
		node := rd.int("SLURM_NODEID", 0, 0)
		if node >= len(counts) {
			return nil, fmt.Errorf("Slurm: SLURM_NODEID=%d, but SLURM_STEP_TASKS_PER_NODE=%q lists %d nodes", node, s, len(counts))
		}
		r.LocalWorld = counts[node]
	}
	// A WORLD_SIZE a batch script exported must be srun's count.
	if ws := getenv("WORLD_SIZE"); ws != "" && strings.TrimSpace(ws) != strconv.Itoa(r.World) && rd.err == nil {
		return nil, fmt.Errorf("Slurm: WORLD_SIZE=%q, but srun started %d tasks (SLURM_STEP_NUM_TASKS); unset WORLD_SIZE or start as many", ws, r.World)
	}
	if r.World == 1 && rd.err == nil {
		return r, nil // a process alone (FromEnv): it meets no master
	}
	r.GPUPerTask = getenv("SLURM_GPUS_PER_TASK") != ""
	r.MasterAddr = getenv("MASTER_ADDR")
	if r.MasterAddr == "" {
		nodes := getenv("SLURM_STEP_NODELIST")
		if nodes == "" {
			nodes = getenv("SLURM_JOB_NODELIST")
		}
		host, err := FirstHost(nodes)
		if err != nil {
			return nil, fmt.Errorf("Slurm: node list: %w (or set MASTER_ADDR)", err)
		}
		r.MasterAddr = host
	}
	// A port of the step's own unless MASTER_PORT says: two jobs sharing a first
	// node, or two steps of one job at once, must not meet at one port.
	port := 29500
	if id := getenv("SLURM_JOB_ID"); id != "" {
		h := fnv.New32a()
		h.Write([]byte(id + "." + getenv("SLURM_STEP_ID")))
		port = 20000 + int(h.Sum32()%10000)
	}
	r.MasterPort = rd.int("MASTER_PORT", 1, port)
	r.Prefix = "emclust/" + getenv("SLURM_JOB_ID") + "." + getenv("SLURM_STEP_ID")
	if rd.err != nil {
		return nil, fmt.Errorf("Slurm: %w", rd.err)
	}
	return r, r.check()
}

func (r *Role) check() error {
	rank, world, local, localWorld := "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"
	if r.Launcher == "Slurm" {
		rank, world, local, localWorld = "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE"
	}
	switch {
	case r.Rank >= r.World:
		return fmt.Errorf("%s: rank %d (%s) of a world of %d (%s)", r.Launcher, r.Rank, rank, r.World, world)
	case r.LocalRank >= r.LocalWorld:
		return fmt.Errorf("%s: local rank %d (%s) of %d on this machine (%s)", r.Launcher, r.LocalRank, local, r.LocalWorld, localWorld)
	case r.World > 1 && r.MasterAddr == "":
		return fmt.Errorf("%s: MASTER_ADDR is not set", r.Launcher)
	case r.MasterPort > 65535:
		return fmt.Errorf("%s: MASTER_PORT=%d is not a port", r.Launcher, r.MasterPort)
	}
	return nil
}

// GPU is the CUDA device this rank trains on among count visible ones: its local
// rank's, or, where srun bound each task a GPU of its own (--gpus-per-task 1 makes
// CUDA_VISIBLE_DEVICES one device a task) or the task is alone on its node, the one
// it sees.
func (r Role) GPU(count int) (int, error) {
	switch {
	case r.Launcher == "Slurm" && count == 1 && (r.LocalWorld == 1 || r.GPUPerTask):
		return 0, nil
	case r.LocalRank < count:
		return r.LocalRank, nil
	}
	return 0, fmt.Errorf("%s: local rank %d, but this process sees %d CUDA devices: start one process per GPU", r.Launcher, r.LocalRank, count)
}

// TasksPerNode expands a Slurm task count list such as "2(x3),1" into one count per
// node, in the node list's order.
func TasksPerNode(s string) ([]int, error) {
	var counts []int
	for _, part := range strings.Split(s, ",") {
		count, times := strings.TrimSpace(part), "1"
		if i := strings.IndexByte(count, '('); i >= 0 {
			rep, ok := strings.CutPrefix(count[i:], "(x")
			if !ok || !strings.HasSuffix(rep, ")") {
				return nil, fmt.Errorf("%q: want a count such as 4 or 2(x3)", part)
			}
			count, times = count[:i], strings.TrimSuffix(rep, ")")
		}
		n, err1 := strconv.Atoi(count)
		k, err2 := strconv.Atoi(times)
		if err1 != nil || err2 != nil || n < 1 || k < 1 || k > 1<<20 || len(counts)+k > 1<<20 {
			return nil, fmt.Errorf("%q: want a count such as 4 or 2(x3)", part)
		}
		for range k {
			counts = append(counts, n)
		}
	}
	return counts, nil
}

// FirstHost is the first host of a Slurm node list such as "gpu[01-04,07],cpu3" or
// "rack[1-2]-n[01-04]".
func FirstHost(list string) (string, error) {
	list = strings.TrimSpace(list)
	if list == "" {
		return "", fmt.Errorf("empty")
	}
	host, rest, err := firstHost(list)
	if err != nil {
		return "", err
	}
	if host == "" || strings.ContainsAny(host, "[]") || (rest != "" && rest[0] != ',') {
		return "", fmt.Errorf("%q: not a node list", list)
	}
	return host, nil
}

// firstHost expands the first host of list, returning what follows it (from the
// comma on). Each bracket contributes its first number.
func firstHost(list string) (host, rest string, err error) {
	var b strings.Builder
	for list != "" && list[0] != ',' {
		open := strings.IndexAny(list, ",[")
		if open < 0 {
			b.WriteString(list)
			return b.String(), "", nil
		}
		if list[open] == ',' {
			b.WriteString(list[:open])
			return b.String(), list[open:], nil
		}
		b.WriteString(list[:open])
		end := strings.IndexByte(list[open:], ']')
		if end < 0 {
			return "", "", fmt.Errorf("%q: unclosed [", list)
		}
		inner := list[open+1 : open+end]
		first, _, _ := strings.Cut(inner, ",")
		lo, hi, isRange := strings.Cut(first, "-")
		if b.Len() == 0 || !digits(lo) || (isRange && (!digits(hi) || atoi(hi) < atoi(lo))) {
			return "", "", fmt.Errorf("%q: not a node list", list)
		}
		b.WriteString(lo)
		list = list[open+end+1:]
	}
	return b.String(), list, nil
}

func digits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
