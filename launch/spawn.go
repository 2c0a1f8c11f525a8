package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// Spawn runs n copies of exe with args as ranks 0 to n-1 of one run on this machine,
// with the variables torchrun would set, and waits for them all. It restarts none:
// the first rank to fail stops the others, and the error names it. Cancelling ctx
// interrupts every rank (SIGINT) once and waits for them to stop by themselves.
func Spawn(ctx context.Context, exe string, args []string, n int, stdout, stderr io.Writer) error {
	port, err := FreePort()
	if err != nil {
		return fmt.Errorf("--nproc: find a free port for the ranks' store: %w", err)
	}
	stdout, stderr = &lockedWriter{w: stdout}, &lockedWriter{w: stderr}
	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, n)
	cmds := make([]*exec.Cmd, n)
	for r := range cmds {
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(),
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			"EMCLUST_LAUNCHER=--nproc")
		cmd.Stdout, cmd.Stderr = stdout, stderr
		// A rank outlives nothing: if this process dies, so do they. A process group
		// of their own keeps a terminal's Ctrl-C for this process, which passes it on
		// once: a second SIGINT would kill a rank that is stopping cleanly.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if err := cmd.Start(); err != nil {
			for _, c := range cmds[:r] {
				c.Process.Kill()
				c.Wait()
			}
			return fmt.Errorf("--nproc: start rank %d: %w", r, err)
		}
		cmds[r] = cmd
		go func() { exits <- exit{r, cmd.Wait()} }()
	}
	var first *exit
	interrupted := false
	running := n
	for running > 0 {
		select {
		case e := <-exits:
			running--
			if e.err != nil && first == nil {
				first = &e
			}
			// The others would only wait for the lost rank until their timeout, or,
			// one of them stopped for good (SIGSTOP, a hung device), for ever. A
			// rank that stopped on the interrupt passed on (130) is no loss: the
			// others are saving as it did. One that the interrupt ended while it
			// was starting (killed by the signal) takes them down too: they could
			// only wait for it in the join.
			if e.err != nil && (!interrupted || exitCode(e.err) != 130) {
				for q, c := range cmds {
					if q != e.rank {
						c.Process.Kill()
					}
				}
			}
		case <-ctx.Done():
			for _, c := range cmds {
				c.Process.Signal(os.Interrupt)
			}
			interrupted = true
			ctx = context.Background() // signal once, then wait
		}
	}
	if first == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(first.err, &ee) {
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			if interrupted && st.Signal() == syscall.SIGINT {
				// The interrupt passed on reached a rank before it could catch one:
				// it had not begun to train, nor had the others without it.
				return fmt.Errorf("rank %d of %d was starting: %w", first.rank, n, ErrInterruptedStarting)
			}
			return fmt.Errorf("rank %d of %d was killed (%v); stopped the other ranks", first.rank, n, st.Signal())
		}
		return &RankError{Rank: first.rank, World: n, Code: ee.ExitCode()}
	}
	return fmt.Errorf("rank %d of %d: %w", first.rank, n, first.err)
}

// exitCode is the exit status in err from exec.Cmd.Wait, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// ErrInterruptedStarting is an interrupt that Spawn passed on to a rank still
// starting, which it ended: the run trained no further.
var ErrInterruptedStarting = errors.New("interrupted before the ranks began to train")

// RankUsageExit is a rank's exit status under --nproc for a mistake in the command
// line, which every rank shares: sysexits' EX_USAGE, as Go's runtime exits 2 on a
// panic or a fault.
const RankUsageExit = 64

// RankError is a rank that exited with a failure code; it has said why on stderr.
type RankError struct{ Rank, World, Code int }

func (e *RankError) Error() string {
	return fmt.Sprintf("rank %d of %d failed (exit code %d); stopped the other ranks", e.Rank, e.World, e.Code)
}

// FreePort is a TCP port of 127.0.0.1 that nothing listened on at the time of the
// call: where a single-machine run's store can listen.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedWriter lets the ranks share one writer that is not safe for concurrent use.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
