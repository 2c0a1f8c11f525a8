package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// Spawn runs n copies of exe with args as ranks 0 to n-1 of one run on this machine,
// with the variables torchrun would set, and waits for them all. The caller serves
// the ranks' store at 127.0.0.1:storePort (torch.ServeStore), as torchrun's agent
// does: a free port that a rank were to listen on later could be taken in between.
// It restarts none: the first rank to fail stops the others, and the error names it.
// Cancelling ctx interrupts every rank (SIGINT) once and waits for them to stop by
// themselves.
//
// The ranks' last errors (ErrorOut) come back on a pipe each, and Spawn writes each
// distinct one to stderr once, after every rank has stopped, where ranks that share
// a mistake in the command line or the data would each say it.
func Spawn(ctx context.Context, exe string, args []string, n, storePort int, stdout, stderr io.Writer) error {
	stderrTerminal := IsTerminal(stderr)
	stdout, stderr = &lockedWriter{w: stdout}, &lockedWriter{w: stderr}
	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, n)
	cmds := make([]*exec.Cmd, n)
	said := make([]rankSaid, n)
	for r := range cmds {
		errs, errw, err := os.Pipe()
		if err == nil {
			said[r].start(errs)
			cmd := exec.Command(exe, args...)
			cmd.Env = append(os.Environ(),
				"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
				"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n),
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(storePort), "TORCHELASTIC_USE_AGENT_STORE=true",
				"EMCLUST_LAUNCHER=--nproc", errorFDVar+"=3")
			if stderrTerminal {
				cmd.Env = append(cmd.Env, stderrTerminalVar+"=1")
			}
			// Pipes, not the terminal itself: the ranks have a process group of
			// their own, which a terminal with tostop would stop on their first
			// write.
			cmd.Stdout, cmd.Stderr = stdout, stderr
			cmd.ExtraFiles = []*os.File{errw} // descriptor 3
			// A rank outlives nothing: if this process dies, so do they. A process
			// group of their own keeps a terminal's Ctrl-C for this process, which
			// passes it on once: a second SIGINT would kill a rank that is stopping
			// cleanly.
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
			err = cmd.Start()
			errw.Close() // the rank's copy is its own: its exit ends the pipe
			cmds[r] = cmd
		}
		if err != nil {
			for q, c := range cmds[:r] {
				c.Process.Kill()
				c.Wait()
				said[q].finish(time.Now().Add(time.Second))
			}
			said[r].finish(time.Now().Add(time.Second))
			return fmt.Errorf("--nproc: start rank %d: %w", r, err)
		}
		go func() { exits <- exit{r, cmds[r].Wait()} }()
	}
	var first *exit
	interrupted := false
	refused := false // a rank refused the command line; the others were interrupted
	codes := make([]int, n)
	// others sends sig to every rank but one (-1: none).
	others := func(sig os.Signal, but int) {
		for q, c := range cmds {
			if q != but {
				c.Process.Signal(sig)
			}
		}
	}
	running := n
	for running > 0 {
		select {
		case e := <-exits:
			running--
			if e.err != nil && first == nil {
				first = &e
			}
			code := exitCode(e.err)
			codes[e.rank] = code
			switch {
			case e.err == nil:
			case !interrupted && (code == 130 || code == RankUsageExit):
				// A rank interrupted alone (a scheduler's SIGTERM to one process)
				// stopped where all agreed to: the others are stopping too, rank 0
				// perhaps saving. One that refused the command line: the others
				// share the mistake, or wait for it in the join. Told as if this
				// process had been interrupted, they stop cleanly; killed, rank 0
				// left the run folder it had made.
				others(os.Interrupt, e.rank)
				interrupted, refused = true, code == RankUsageExit
				ctx = context.Background()
			case !interrupted || (code != 130 && code != RankUsageExit):
				// The others would only wait for the lost rank until their
				// timeout, or, one of them stopped for good (SIGSTOP, a hung
				// device), for ever. A rank that stopped on the interrupt passed
				// on (130) is no loss: the others are saving as it did. One that
				// the interrupt ended while it was starting (killed by the signal)
				// takes them down too: they could only wait for it in the join.
				others(os.Kill, e.rank)
			}
		case <-ctx.Done():
			others(os.Interrupt, -1)
			interrupted = true
			ctx = context.Background() // signal once, then wait
		}
	}
	// Where a rank refused the command line, the others' word that they were
	// interrupted is not the user's news.
	sayOnce(stderr, said, func(r int) bool { return refused && codes[r] == 130 })
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
			return &KilledError{Rank: first.rank, World: n, Signal: st.Signal()}
		}
		return &RankError{Rank: first.rank, World: n, Code: ee.ExitCode(), Said: said[first.rank].text != ""}
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

// KilledError is a rank that a signal ended, not an error of its own: killed, or a
// crash. Spawn stopped the others.
type KilledError struct {
	Rank, World int
	Signal      syscall.Signal
}

func (e *KilledError) Error() string {
	return fmt.Sprintf("rank %d of %d was killed (%s, %v); stopped the other ranks", e.Rank, e.World, unix.SignalName(e.Signal), e.Signal)
}

// ErrInterruptedStarting is an interrupt that Spawn passed on to a rank still
// starting, which it ended: the run trained no further.
var ErrInterruptedStarting = errors.New("interrupted before the ranks began to train")

// RankUsageExit is a rank's exit status under --nproc for a mistake in the command
// line, which every rank shares: sysexits' EX_USAGE, as Go's runtime exits 2 on a
// panic or a fault.
const RankUsageExit = 64

// RankError is a rank that exited with a failure code. Where Said, Spawn has written
// its last error.
type RankError struct {
	Rank, World, Code int
	Said              bool
}

func (e *RankError) Error() string {
	return fmt.Sprintf("rank %d of %d failed (exit code %d); stopped the other ranks", e.Rank, e.World, e.Code)
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

// errorFDVar tells a rank that Spawn reads its last error on descriptor 3.
const errorFDVar = "EMCLUST_ERROR_FD"

// ErrorOut is where this process writes its last error: the pipe Spawn gave it, as a
// rank of --nproc, else stderr.
func ErrorOut(stderr io.Writer) io.Writer {
	if os.Getenv("EMCLUST_LAUNCHER") != "--nproc" || os.Getenv(errorFDVar) != "3" {
		return stderr
	}
	if f := os.NewFile(3, "spawn errors"); isPipe(f) {
		return f
	}
	return stderr
}

// isPipe reports whether f is a pipe: Spawn's variables, inherited by a process that
// is no rank, must not send its error into a file or socket it holds as descriptor 3.
func isPipe(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeNamedPipe != 0
}

// stderrTerminalVar tells the ranks that Spawn's stderr, which they reach through a
// pipe, is a terminal.
const stderrTerminalVar = "EMCLUST_STDERR_TERMINAL"

// IsTerminal reports whether w is a terminal, where progress bars go. A rank of
// --nproc writes its stderr through a pipe to the launcher's, which may be one.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	if term.IsTerminal(int(f.Fd())) {
		return true
	}
	return f == os.Stderr && os.Getenv("EMCLUST_LAUNCHER") == "--nproc" && os.Getenv(stderrTerminalVar) == "1"
}

// maxSaid bounds what Spawn keeps of one rank's last error.
const maxSaid = 64 << 10

// rankSaid reads one rank's error pipe.
type rankSaid struct {
	r    *os.File
	done chan struct{}
	text string
}

func (s *rankSaid) start(r *os.File) {
	s.r, s.done = r, make(chan struct{})
	go func() {
		defer close(s.done)
		b, _ := io.ReadAll(io.LimitReader(r, maxSaid))
		io.Copy(io.Discard, r) // past the bound: the rank must not block on a full pipe
		s.text = string(b)
	}()
}

// finish waits for the rank's error, read when the rank has exited, until deadline:
// a process the rank started could hold the pipe open.
func (s *rankSaid) finish(deadline time.Time) {
	if s.r == nil {
		return
	}
	s.r.SetReadDeadline(deadline)
	<-s.done
	s.r.Close()
}

// rankPrefix is the "rank N: " a rank puts before its errors.
var rankPrefix = regexp.MustCompile(`^emclust: rank [0-9]+: `)

// sayOnce waits for the ranks' last errors and writes each, less those a lower rank
// said in the same words but for its number, and those of the ranks to skip.
func sayOnce(w io.Writer, said []rankSaid, skip func(rank int) bool) {
	deadline := time.Now().Add(time.Second)
	for i := range said {
		said[i].finish(deadline)
	}
	seen := map[string]bool{}
	for i := range said {
		text := said[i].text
		if text == "" || skip(i) {
			continue
		}
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if key := rankPrefix.ReplaceAllString(text, "emclust: "); !seen[key] {
			seen[key] = true
			io.WriteString(w, text)
		}
	}
}
