package command

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"emclust/launch"
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
	pace  pace // of the epochs, for the time the run has left
}

func newProgress(w io.Writer, quiet bool) train.Progress {
	return &barProgress{w: w, quiet: quiet, tty: !quiet && launch.IsTerminal(w), pace: newPace(0)}
}

func (p *barProgress) Start(epoch, epochs, steps int) {
	p.epoch, p.of = epoch, epochs
	p.pace.start(epoch - 1)
	if !p.tty {
		return
	}
	p.bar = newStepBar(p.w, steps, fmt.Sprintf("epoch %d/%d", epoch, epochs))
}

// newStepBar is a bar over steps with count, rate and ETA, cleared when finished.
func newStepBar(w io.Writer, steps int, description string) *progressbar.ProgressBar {
	return newBar(w, steps, "step", description)
}

// newBar is a bar over n of unit with count, rate and ETA, cleared when finished.
// Its clock starts now and it is first drawn at the first count: drawn before, it
// showed a rate of "0 step/hr" and no time left.
func newBar(w io.Writer, n int, unit, description string) *progressbar.ProgressBar {
	bar := progressbar.NewOptions(n,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(description),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(unit),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionFullWidth(), // the terminal's width, so that no line wraps
	)
	bar.StartWithoutRender()
	return bar
}

// ShowsLoss: only the bar shows the running loss; the lines are drawn at End.
func (p *barProgress) ShowsLoss() bool { return p.tty }

func (p *barProgress) Step(done int, loss float64, read bool) {
	if p.bar == nil {
		return
	}
	p.bar.Set(done) // first: a description drawn before it would show the old count
	if read {
		p.bar.Describe(fmt.Sprintf("epoch %d/%d loss %.4f", p.epoch, p.of, loss))
	}
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
	// An image run's 250 epochs take hours (a day on a laptop's CPU): say how long.
	if left, ok := p.pace.left(m.Epoch, p.of); ok && left >= time.Second {
		line += "  ~" + roughly(left) + " left"
	}
	fmt.Fprintln(p.w, line)
}

// pace is the wall-time rate of a count since the first one heard (a resumed run's
// starts past 0), which holds what a step's or an epoch's own seconds leave out
// (evaluations, saves); lines off a terminal also ask it whether one is due.
type pace struct {
	now         func() time.Time // time.Now but in tests
	every       time.Duration    // between lines
	began, last time.Time
	from        int
}

func newPace(every time.Duration) pace { return pace{now: time.Now, every: every} }

// start takes count as the first heard, once.
func (p *pace) start(count int) {
	if p.began.IsZero() {
		p.began, p.from = p.now(), count
		p.last = p.began
	}
}

// left is the time from done to total at the rate since start; not ok before any
// progress.
func (p *pace) left(done, total int) (time.Duration, bool) {
	if p.began.IsZero() || done <= p.from {
		return 0, false
	}
	return time.Duration(float64(p.now().Sub(p.began)) * float64(total-done) / float64(done-p.from)), true
}

// due says whether a line is due, every p.every since the last, and takes it.
func (p *pace) due() bool {
	now := p.now()
	if now.Sub(p.last) < p.every {
		return false
	}
	p.last = now
	return true
}

// roughly writes d to the minute past an hour, to the second below.
func roughly(d time.Duration) string {
	switch d = d.Round(time.Second); {
	case d >= time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// restartsProgress draws one bar over all the steps of the restarts (or trials) on
// a terminal, and off one writes a line with the same counts every lineEvery (a
// trial of Fashion-MNIST takes most of an hour on a CPU; a log said nothing
// meanwhile); trainRestarts and trainTrials print a line per restart. A nil one
// draws nothing.
type restartsProgress struct {
	w        io.Writer
	what     string // "restarts" or "trials"
	restarts int
	done     int // restarts done
	bar      *progressbar.ProgressBar
	// Off a terminal: lines, not a bar.
	lines bool
	pace  pace
}

func newRestartsProgress(w io.Writer, quiet bool, restarts int, what string) *restartsProgress {
	if quiet {
		return nil
	}
	return &restartsProgress{w: w, what: what, restarts: restarts, lines: !launch.IsTerminal(w), pace: newPace(time.Minute)}
}

// steps is train.RestartHooks.Progress: steps done of total, over all restarts.
func (p *restartsProgress) steps(done, total int) {
	if p == nil {
		return
	}
	if p.lines {
		p.line(done, total)
		return
	}
	if p.bar == nil {
		p.bar = newStepBar(p.w, max(total, 1), p.description()) // its clock starts, nothing drawn
	}
	if done == 0 {
		return // a bar drawn before its first step could only show "0 step/hr"
	}
	if total != p.bar.GetMax() {
		// The count first: ChangeMax draws the bar as it is, at 0 the first time.
		if done < p.bar.GetMax() {
			p.bar.Set(done)
		}
		p.bar.ChangeMax(total)
	}
	p.bar.Set(done)
}

// line writes the counts and the time left, once a pace.every at most.
func (p *restartsProgress) line(done, total int) {
	p.pace.start(done)
	left, ok := p.pace.left(done, total)
	if !ok || total <= 0 || !p.pace.due() {
		return
	}
	fmt.Fprintf(p.w, "emclust: %s %d/%d done, %d/%d steps (%d%%), ~%s left\n", p.what, p.done, p.restarts, done, total, 100*done/total, roughly(left))
}

// restartDone clears the bar for the line about a restart that ended; the next step
// draws it again. The last one finishes it.
func (p *restartsProgress) restartDone() {
	if p == nil {
		return
	}
	if p.done++; p.bar == nil {
		return
	}
	if p.done == p.restarts {
		p.bar.Finish()
		return
	}
	if p.bar.State().CurrentNum == 0 {
		// Not drawn yet (a restart restored whole, or of no steps here): a new bar
		// takes the new count, as describing this one would draw it at 0.
		p.bar = newStepBar(p.w, p.bar.GetMax(), p.description())
		return
	}
	p.bar.Clear()
	p.describe()
}

// hooks are train.RestartHooks that draw p and tell done of each restart that ends.
func (p *restartsProgress) hooks(done func(i int, r train.Restart)) train.RestartHooks {
	h := train.RestartHooks{Done: func(i int, r train.Restart) {
		p.restartDone()
		done(i, r)
	}}
	if p != nil {
		h.Progress = p.steps
	}
	return h
}

func (p *restartsProgress) describe() { p.bar.Describe(p.description()) }

func (p *restartsProgress) description() string {
	return fmt.Sprintf("%s %d/%d done", p.what, p.done, p.restarts)
}

// runBar draws one bar over all the steps of a run, for compare, whose lines are a
// run's results, not its epochs: the rate and the ETA are the whole run's.
type runBar struct {
	w    io.Writer
	name string // the run's, as "em seed 2"
	bar  *progressbar.ProgressBar
	// first is the first epoch this sitting trains (a resumed or kept trial's run
	// starts later), base the steps of this sitting's epochs before the current one.
	first, base, epoch, epochs int
}

func (p *runBar) Start(epoch, epochs, steps int) {
	p.base, p.epoch, p.epochs = (epoch-p.first)*steps, epoch, epochs
	description := fmt.Sprintf("%s: epoch %d/%d", p.name, epoch, epochs)
	if p.bar == nil {
		p.first, p.base = epoch, 0
		p.bar = newStepBar(p.w, (epochs-epoch+1)*steps, description)
		return
	}
	p.bar.Describe(description)
}

// ShowsLoss: the bar shows no loss, so the training loop need not wait for it.
func (p *runBar) ShowsLoss() bool { return false }

func (p *runBar) Step(done int, _ float64, _ bool) { p.bar.Set(p.base + done) }

func (p *runBar) End(train.EpochMetrics) {
	if p.epoch == p.epochs {
		p.bar.Finish()
		p.bar = nil
	}
}

// runLines is runBar off a terminal, for compare in a log: a line with the run's
// epoch and time left once a minute at most (an image seed trains for hours).
type runLines struct {
	w      io.Writer
	name   string
	epochs int
	pace   pace
}

func newRunLines(w io.Writer, name string) *runLines {
	return &runLines{w: w, name: name, pace: newPace(time.Minute)}
}

func (p *runLines) Start(epoch, epochs, steps int) {
	p.epochs = epochs
	p.pace.start(epoch - 1)
}

func (p *runLines) ShowsLoss() bool                  { return false }
func (p *runLines) Step(done int, _ float64, _ bool) {}

func (p *runLines) End(m train.EpochMetrics) {
	left, ok := p.pace.left(m.Epoch, p.epochs)
	if !ok || !p.pace.due() {
		return
	}
	fmt.Fprintf(p.w, "emclust: %s: epoch %d/%d, ~%s left\n", p.name, m.Epoch, p.epochs, roughly(left))
}

// clear removes a bar left drawn by a run that stopped part-way; nil: nothing.
func (p *runBar) clear() {
	if p != nil && p.bar != nil {
		p.bar.Clear()
		p.bar = nil
	}
}

// clear removes a bar left drawn by restarts that stopped part-way; nil: nothing.
func (p *restartsProgress) clear() {
	if p != nil && p.bar != nil && !p.bar.IsFinished() {
		p.bar.Clear()
	}
}
