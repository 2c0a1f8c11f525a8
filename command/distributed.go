package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"emclust/launch"
	"emclust/torch"
	"emclust/train"
)

// distFlags are train's multi-process flags. The launch forms are in README.
func distFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "nproc", Usage: "train with N processes on this machine (data-parallel; one per GPU on GPUs, sharing the cores on CPUs); under torchrun, srun or a PyTorchJob the launcher decides", DefaultText: "1"},
		&cli.BoolFlag{Name: "sync-stats", Value: true, Usage: "with several processes, batch statistics span the global batch, as in one process (--sync-stats=false: each process's own rows, cheaper but a different algorithm)"},
		&cli.DurationFlag{Name: "dist-timeout", Value: 5 * time.Minute, Usage: "with several processes, how long one waits for the others before it gives up"},
		&cli.StringFlag{Name: "dist-backend", Value: "auto", Usage: "collectives between processes: gloo, nccl (CUDA), or auto (nccl on GPUs where the shim has it, else gloo)"},
	}
}

// distOptions say how a train process takes part in a multi-process run.
type distOptions struct {
	NProc   int
	Timeout time.Duration
	Backend string // auto, gloo, nccl
	// Args are the command line, for the processes --nproc starts.
	Args []string
	// Log hears a rank that is still waiting for the others to join (every rank's,
	// though only rank 0 logs the run); nil with --quiet.
	Log io.Writer
}

func distOptionsFrom(c *cli.Context) (distOptions, error) {
	o := distOptions{NProc: c.Int("nproc"), Timeout: c.Duration("dist-timeout"), Backend: c.String("dist-backend")}
	if args, ok := c.App.Metadata["args"].([]string); ok {
		o.Args = args
	}
	switch {
	case o.NProc < 0 || o.NProc > 1024 || (c.IsSet("nproc") && o.NProc == 0): // 0 is the unset default
		return o, usageError{fmt.Errorf("--nproc %d: want 1 to 1024 processes", o.NProc)}
	case o.Timeout <= 0:
		return o, usageError{fmt.Errorf("--dist-timeout %v: want a positive duration such as 60s", o.Timeout)}
	case o.Backend != "auto" && o.Backend != "gloo" && o.Backend != "nccl":
		return o, usageError{fmt.Errorf("--dist-backend %q: want auto, gloo or nccl", o.Backend)}
	}
	return o, nil
}

// spawnRanks starts --nproc copies of this program as the ranks of one run and waits.
func spawnRanks(ctx context.Context, o distOptions, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--nproc: find this program: %w", err)
	}
	if len(o.Args) == 0 {
		return fmt.Errorf("--nproc: no command line to start the ranks with")
	}
	store, err := torch.ServeStore("127.0.0.1", 0, o.NProc, o.Timeout)
	if err != nil {
		return fmt.Errorf("--nproc: serve the ranks' store: %w", err)
	}
	defer store.Close()
	err = launch.Spawn(ctx, exe, o.Args[1:], o.NProc, store.Port(), stdout, stderr)
	var re *launch.RankError
	if errors.As(err, &re) && re.Code == 130 {
		// Rank 0 has said where the checkpoint is and how to resume.
		return silentError{interruptedError{err}}
	}
	if errors.Is(err, launch.ErrInterruptedStarting) {
		return interruptedError{err}
	}
	return err
}

// rankDevice is the device a rank trains on: on GPUs, the one of its local rank.
func rankDevice(device string, role *launch.Role) (torch.Device, error) {
	dev, err := selectDevice(device)
	if err != nil || role == nil || !dev.CUDA {
		return dev, err
	}
	if device == "auto" || device == "cuda" || device == "" {
		gpu, err := role.GPU(torch.CUDADeviceCount())
		if err != nil {
			return dev, err
		}
		return selectDevice(fmt.Sprintf("cuda:%d", gpu))
	}
	return dev, nil
}

// joinGroup joins the run's process group: NCCL for CUDA tensors where the shim has
// it, else Gloo. On CPUs the ranks of a machine share its cores. Cancelling ctx
// returns its error at once.
func joinGroup(ctx context.Context, role *launch.Role, dev torch.Device, threads int, o distOptions) (*torch.Group, error) {
	if !dev.CUDA && threads == 0 {
		n := max(1, runtime.NumCPU()/role.LocalWorld)
		if v, err := strconv.Atoi(os.Getenv("OMP_NUM_THREADS")); err == nil && v > 0 {
			n = v // torchrun sets 1 unless told otherwise
		}
		torch.SetNumThreads(n)
	}
	backend := torch.Gloo
	switch {
	case o.Backend == "nccl" && !dev.CUDA:
		return nil, usageError{fmt.Errorf("--dist-backend nccl moves CUDA tensors; this process trains on the CPU")}
	case o.Backend == "nccl" || (o.Backend == "auto" && dev.CUDA && torch.HasBackend(torch.NCCL)):
		backend = torch.NCCL
	}
	if !torch.HasBackend(backend) {
		need := "Gloo's headers (Debian's libgloo-dev; a pip PyTorch has none: GLOO_INCLUDE=DIR scripts/build-shim.sh)"
		if backend == torch.NCCL {
			need = "nccl.h (PyTorch's nvidia-nccl wheel or the CUDA toolkit's)"
		}
		return nil, fmt.Errorf("%s: this build of the emtorch shim has no %v (rebuild it with %s)", role.Launcher, backend, need)
	}
	iface, _, _ := strings.Cut(os.Getenv("GLOO_SOCKET_IFNAME"), ",")
	done := make(chan joined, 1)
	go func() {
		g, err := torch.NewGroup(torch.GroupConfig{
			Backend: backend, Host: role.MasterAddr, Port: role.MasterPort, ServeStore: role.ServeStore(),
			Prefix: role.Prefix, Rank: role.Rank, World: role.World, Timeout: o.Timeout,
			Interface: iface, Device: dev.Index,
		})
		done <- joined{g, err}
	}()
	var g *torch.Group
	var err error
	at := net.JoinHostPort(role.MasterAddr, strconv.Itoa(role.MasterPort))
	// A rank started with a mistyped MASTER_ADDR, or whose peers never start, waits
	// the whole --dist-timeout; it says so once, after a while, and whether the name
	// resolves. The lookup runs aside, so that the join's end or an interrupt is seen
	// at once, and its answer serves the error too.
	patience := time.NewTimer(min(15*time.Second, o.Timeout/4))
	defer patience.Stop()
	// Gloo's connects can outlast the timeout several times over (a RANK given to two
	// processes kept one waiting 5×), so the wait ends here too, a little after it.
	overdue := time.NewTimer(o.Timeout + joinGrace)
	defer overdue.Stop()
	var lookup chan string // nil until the lookup starts, and once it has answered
	why := ""              // the lookup's answer: that the name does not resolve, or ""
	for joining := true; joining; {
		select {
		case j := <-done:
			g, err, joining = j.g, j.err, false
		case <-patience.C:
			lookup = make(chan string, 1)
			go func() { lookup <- unresolved(ctx, role.MasterAddr) }()
		case why = <-lookup:
			lookup = nil
			if o.Log != nil {
				line := fmt.Sprintf("emclust: rank %d: still waiting for the %d ranks to join at %s (up to --dist-timeout %v)", role.Rank, role.World, at, o.Timeout)
				if why != "" {
					line += "; " + why
				}
				fmt.Fprintln(o.Log, line)
			}
		case <-ctx.Done():
			// The join cannot be called off: it waits in libtorch until --dist-timeout
			// (5 minutes by default), which an interrupt need not. The process leaves
			// it there, and a group that forms meanwhile is left at once.
			abandon(done)
			return nil, ctx.Err()
		case <-overdue.C:
			abandon(done)
			g, err, joining = nil, errJoinOverdue, false
		}
	}
	if err != nil {
		hint := ""
		if msg := strings.ToLower(err.Error()); strings.Contains(msg, "timeout") || strings.Contains(msg, "timed out") || errors.Is(err, errJoinOverdue) {
			if lookup != nil {
				why = <-lookup // started a quarter of the timeout ago; bounded by its own
			}
			hint = fmt.Sprintf(" (the %d ranks did not all come within --dist-timeout %v: were they all started, each with its own RANK, and the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT?)", role.World, o.Timeout)
			if why != "" {
				hint = fmt.Sprintf(" (%s)", why)
			}
		}
		if strings.Contains(err.Error(), "sizeof(impl_) == bytes.size()") {
			// Gloo's peers sent address lists of another length than this rank's world.
			hint = fmt.Sprintf(" (the ranks disagree on how many they are: start every rank with the same WORLD_SIZE, here %d)", role.World)
		}
		return nil, fmt.Errorf("join %d ranks at %s as rank %d (%s, %v): %w%s", role.World, at, role.Rank, role.Launcher, backend, err, hint)
	}
	return g, nil
}

// joined is what a join returned.
type joined struct {
	g   *torch.Group
	err error
}

// joinGrace is how long past --dist-timeout joinGroup waits for libtorch's own
// timeout before it gives up the join itself, with errJoinOverdue.
const joinGrace = 10 * time.Second

var errJoinOverdue = errors.New("gave up waiting")

// abandon leaves a join that libtorch goes on with: a group that forms later is left
// at once.
func abandon(done <-chan joined) {
	go func() {
		if j := <-done; j.g != nil {
			j.g.Close()
		}
	}()
}

// unresolved says, for a waiting rank's line, that host does not resolve: empty when
// it does or when the resolver does not answer within a few seconds. (Under Kubeflow
// the master's name resolves only once its pod is up, so this is no error.)
func unresolved(ctx context.Context, host string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	// LookupIPAddr, not LookupHost, which runs on for its timeout after an interrupt.
	_, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	var de *net.DNSError
	if errors.As(err, &de) && de.IsNotFound {
		return fmt.Sprintf("MASTER_ADDR %s does not resolve", host)
	}
	return ""
}

// interruptedIn reports whether err, from joining the group, came of an interrupt.
// libtorch fails a wait that the signal cut short ("Interrupted system call"), which
// can return before the signal has cancelled ctx: such an error waits a moment for
// it. Another signal cuts waits short too (a terminal's SIGWINCH).
func interruptedIn(ctx context.Context, err error) bool {
	if ctx.Err() == nil && err != nil && strings.Contains(err.Error(), "Interrupted system call") {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return ctx.Err() != nil
}

// explainLost adds to a training error which ranks were lost. A rank that fails
// with an error of its own says so in the store; after a grace period the ranks that
// have not are the ones that died (killed, or their machine or network failed). If the
// store itself is gone, rank 0, which serves it, is.
func explainLost(g *torch.Group, role *launch.Role, err error) error {
	storeGone := train.PublishFailure(g, err, false) != nil
	var lost []string
	if !storeGone {
		time.Sleep(time.Second)
		for q := 0; q < g.Size(); q++ {
			ok, herr := g.Has(fmt.Sprintf("failed/%d", q))
			if herr != nil {
				storeGone = true
				break
			}
			if !ok {
				lost = append(lost, fmt.Sprint(q))
			}
		}
	}
	switch {
	case storeGone && !role.ServeStore() && !role.AgentStore:
		return fmt.Errorf("lost rank 0, which served the store at %s:%d: %w", role.MasterAddr, role.MasterPort, err)
	case storeGone || len(lost) == 0:
		return err
	}
	return fmt.Errorf("lost rank %s, which stopped without an error of its own: %w", strings.Join(lost, ", "), err)
}
