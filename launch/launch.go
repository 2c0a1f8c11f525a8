// Package launch finds a process's place in a multi-process run from the variables
// the launchers users already know set — torchrun, Slurm's srun, a Kubeflow
// PyTorchJob — and starts the processes of a single-machine run itself (--nproc).
package launch

import (
	"fmt"
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
}

// ServeStore reports whether this process serves the store.
func (r Role) ServeStore() bool { return r.Rank == 0 && !r.AgentStore }

// FromEnv reads the role from the environment through getenv (os.Getenv). It returns
// nil when no launcher started the process. RANK and WORLD_SIZE (torchrun, Kubeflow,
// --nproc) come before Slurm's variables, so that torchrun inside an allocation wins.
func FromEnv(getenv func(string) string) (*Role, error) {
	if getenv("RANK") != "" || getenv("WORLD_SIZE") != "" {
		return torchrunRole(getenv)
	}
	// SLURM_STEP_NUM_TASKS is set by srun for its tasks; a batch script run without
	// srun has SLURM_NTASKS but is one process.
	if getenv("SLURM_PROCID") != "" && getenv("SLURM_STEP_NUM_TASKS") != "" {
		return slurmRole(getenv)
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
	r.LocalWorld = rd.int("LOCAL_WORLD_SIZE", 1, 1)
	r.MasterAddr = getenv("MASTER_ADDR")
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
		// "2(x3),1": the first count is as good as any for sharing this node's CPUs.
		n, err := strconv.Atoi(strings.FieldsFunc(s, func(c rune) bool { return c == '(' || c == ',' })[0])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("Slurm: SLURM_STEP_TASKS_PER_NODE=%q: want a count such as 4 or 2(x3)", s)
		}
		r.LocalWorld = n
	}
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
	// A port of the job's own unless MASTER_PORT says: two jobs sharing a first node
	// must not meet at one port.
	port := 29500
	if id, err := strconv.Atoi(getenv("SLURM_JOB_ID")); err == nil {
		port = 20000 + id%10000
	}
	r.MasterPort = rd.int("MASTER_PORT", 1, port)
	r.Prefix = "emclust/" + getenv("SLURM_JOB_ID") + "." + getenv("SLURM_STEP_ID")
	if rd.err != nil {
		return nil, fmt.Errorf("Slurm: %w", rd.err)
	}
	return r, r.check()
}

func (r *Role) check() error {
	switch {
	case r.Rank >= r.World:
		return fmt.Errorf("%s: rank %d of a world of %d", r.Launcher, r.Rank, r.World)
	case r.LocalRank >= r.LocalWorld:
		return fmt.Errorf("%s: local rank %d of %d on this machine", r.Launcher, r.LocalRank, r.LocalWorld)
	case r.World > 1 && r.MasterAddr == "":
		return fmt.Errorf("%s: MASTER_ADDR is not set", r.Launcher)
	case r.MasterPort > 65535:
		return fmt.Errorf("%s: MASTER_PORT=%d is not a port", r.Launcher, r.MasterPort)
	}
	return nil
}

// FirstHost is the first host of a Slurm node list such as "gpu[01-04,07],cpu3".
func FirstHost(list string) (string, error) {
	list = strings.TrimSpace(list)
	if list == "" {
		return "", fmt.Errorf("empty")
	}
	end := strings.IndexAny(list, ",[")
	if end < 0 {
		return list, nil
	}
	if list[end] == ',' {
		return list[:end], nil
	}
	prefix := list[:end]
	close := strings.IndexByte(list[end:], ']')
	if close < 0 {
		return "", fmt.Errorf("%q: unclosed [", list)
	}
	first := strings.FieldsFunc(list[end+1:end+close], func(c rune) bool { return c == ',' || c == '-' })
	if prefix == "" || len(first) == 0 || strings.Trim(first[0], "0123456789") != "" {
		return "", fmt.Errorf("%q: not a node list", list)
	}
	// Anything after the bracket ("n[1-2]-ib") belongs to every host.
	suffix := list[end+close+1:]
	if i := strings.IndexByte(suffix, ','); i >= 0 {
		suffix = suffix[:i]
	}
	return prefix + first[0] + suffix, nil
}
