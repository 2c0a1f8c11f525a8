package command

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"emclust/train"
)

// barProgress draws one progress bar per epoch with rate and ETA on a terminal, and
// prints one line per epoch otherwise (unless quiet).
type barProgress struct {
	w     io.Writer
	tty   bool
	quiet bool
	bar   *progressbar.ProgressBar
	epoch int
	of    int
}

func newProgress(w io.Writer, quiet bool) train.Progress {
	return &barProgress{w: w, quiet: quiet, tty: !quiet && isTerminal(w)}
}

func (p *barProgress) Start(epoch, epochs, steps int) {
	p.epoch, p.of = epoch, epochs
	if !p.tty {
		return
	}
	p.bar = newStepBar(p.w, steps)
	p.bar.Describe(fmt.Sprintf("epoch %d/%d", epoch, epochs))
}

// newStepBar is a bar over steps with count, rate and ETA, cleared when finished.
func newStepBar(w io.Writer, steps int) *progressbar.ProgressBar {
	return progressbar.NewOptions(steps,
		progressbar.OptionSetWriter(w),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("step"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	)
}

// ShowsLoss: only the bar shows the running loss; the lines are drawn at End.
func (p *barProgress) ShowsLoss() bool { return p.tty }

func (p *barProgress) Step(done int, loss float64, read bool) {
	if p.bar == nil {
		return
	}
	if read {
		p.bar.Describe(fmt.Sprintf("epoch %d/%d loss %.4f", p.epoch, p.of, loss))
	}
	p.bar.Set(done)
}

func (p *barProgress) End(m train.EpochMetrics) {
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
	if p.quiet {
		return
	}
	line := fmt.Sprintf("epoch %d/%d  loss %.4f", m.Epoch, p.of, m.Loss)
	if m.LossKL != 0 {
		line += fmt.Sprintf("  kl %.4f", m.LossKL)
	}
	if m.ACC != nil {
		line += fmt.Sprintf("  ACC %.4f NMI %.4f ARI %.4f", *m.ACC, *m.NMI, *m.ARI)
	}
	if m.Sizes != nil {
		line += fmt.Sprintf("  empty %d", m.Empty)
	}
	line += fmt.Sprintf("  %.1fs", m.Seconds)
	fmt.Fprintln(p.w, line)
}

// isTerminal reports whether w is a terminal: progress bars only go there.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// restartsProgress draws one bar over all the steps of R restarts on a terminal, and
// nothing otherwise: trainRestarts prints a line per restart.
type restartsProgress struct {
	w        io.Writer
	restarts int
	restart  int // the restart in training, from 1
	epochs   int // epochs per restart
	base     int // steps of the epochs before this one
	steps    int // steps of this epoch
	bar      *progressbar.ProgressBar
}

func newRestartsProgress(w io.Writer, quiet bool, restarts int) train.Progress {
	if quiet || !isTerminal(w) {
		return nil
	}
	return &restartsProgress{w: w, restarts: restarts}
}

func (p *restartsProgress) Start(epoch, epochs, steps int) {
	if epoch == 1 {
		p.restart++
	}
	if p.bar == nil {
		p.bar = newStepBar(p.w, p.restarts*epochs*steps)
	}
	p.base = ((p.restart-1)*epochs + epoch - 1) * steps
	p.epochs, p.steps = epochs, steps
	p.bar.Describe(fmt.Sprintf("restart %d/%d epoch %d/%d", p.restart, p.restarts, epoch, epochs))
}

// ShowsLoss: the restarts' bar shows steps, not the loss.
func (p *restartsProgress) ShowsLoss() bool { return false }

func (p *restartsProgress) Step(done int, _ float64, _ bool) { p.bar.Set(p.base + done) }

func (p *restartsProgress) End(m train.EpochMetrics) {
	p.bar.Set(p.base + p.steps)
	switch {
	case m.Epoch < p.epochs:
	case p.restart == p.restarts:
		p.bar.Finish()
	default:
		p.bar.Clear() // for the restart's line; the next step draws the bar again
	}
}
