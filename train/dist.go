package train

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"emclust/torch"
)

// Data-parallel training. Every rank holds the same network and optimiser state and
// trains on its slice of each global batch of Cfg.BatchSize rows:
//
//   - the epoch's shuffle is the same on every rank (it is seeded), and rank r takes
//     rows r·b to (r+1)·b of each batch, b = BatchSize/world;
//   - the random transformation draws its parameters for the whole global batch, and
//     each rank uses its rows' (transform.Rows), so a rank transforms an image as a
//     single process would;
//   - batch statistics (every BatchNorm and the relevance normalisation, the learned
//     prior's batch mean, IIC's joint) are those of the global batch, with the
//     gradient of one process holding it (torch.SyncBatchNorm), unless
//     Cfg.LocalStats;
//   - the gradients are averaged over the ranks before each optimiser step.
//
// An N-rank run is then the algorithm of one process at the same global batch, up to
// floating-point summation order. Rank 0 alone writes the run folder.

// SettingsError is a mistake in the settings that only the data show (a network for
// another kind or size of input), or what Join refuses in the settings the ranks
// were started with: what a user corrects on the command line, as against a failure
// at run time.
type SettingsError struct{ Err error }

func (e SettingsError) Error() string { return e.Err.Error() }
func (e SettingsError) Unwrap() error { return e.Err }

// Join makes r rank g.Rank() of g.Size() ranks. Every rank calls it after New (and
// Restore, when resuming) and before Train. It checks that all ranks were started
// with the same config, then copies rank 0's network, optimiser state and prior to
// the others, so they start identical whatever their seeds; ranks resumed from
// checkpoints of different epochs are refused.
func (r *Run) Join(ctx context.Context, g *torch.Group) error {
	w := g.Size()
	if r.Cfg.WorldSize != w {
		return fmt.Errorf("config says world size %d, but the group has %d ranks", r.Cfg.WorldSize, w)
	}
	if r.Cfg.BatchSize%w != 0 {
		return SettingsError{fmt.Errorf("batch size %d does not split over %d ranks: start a number of ranks that divides %d, or, training anew, pass a --batch-size that %d divides (it is the global batch)", r.Cfg.BatchSize, w, r.Cfg.BatchSize, w)}
	}
	if r.Cfg.LocalStats && r.Cfg.BatchSize/w < 2 {
		return SettingsError{fmt.Errorf("batch size %d over %d ranks leaves %d row per rank, and local statistics need at least 2", r.Cfg.BatchSize, w, r.Cfg.BatchSize/w)}
	}
	if err := sameConfig(ctx, g, r.Cfg); err != nil {
		return err
	}
	if err := sameProgress(ctx, g, r.progress()); err != nil {
		return err
	}
	var state []*torch.Tensor
	for _, nt := range append(r.Net.Params(), r.Net.Buffers()...) {
		state = append(state, nt.Tensor)
	}
	s := torch.NoGrad()
	defer s.Close()
	for _, opt := range []*torch.Adam{r.optA, r.optB} {
		if opt == nil {
			continue
		}
		for i := 0; i < opt.Len(); i++ {
			m, v, _ := opt.State(s, i)
			state = append(state, m, v)
		}
	}
	if r.prior != nil {
		state = append(state, r.prior)
	}
	if err := s.Err(); err != nil {
		return err
	}
	if err := g.Broadcast(0, state...); err != nil {
		return fmt.Errorf("copy rank 0's model: %w", err)
	}
	r.group = g
	b := r.Cfg.BatchSize / w
	if is, ok := r.Src.(*ImageSource); ok {
		is.ShareDraws(g.Rank()*b, r.Cfg.BatchSize)
	}
	if !r.Cfg.LocalStats && w > 1 {
		r.Net.SyncStats(g)
	}
	return nil
}

// sameConfig compares the training config with every other rank's, so that ranks
// started with different flags fail at once rather than train apart, naming what
// differs. The data are compared by their digest where one was taken, so that the
// same file under another mount point on another machine is the same data. Each rank
// publishes its config and compares a hash of it: a config is read only where the
// hashes differ, so that wide tables' feature names are not read by every rank.
func sameConfig(ctx context.Context, g *torch.Group, cfg Config) error {
	// Where and how fast each rank computes may differ; what it computes may not.
	cfg.Device, cfg.Threads, cfg.Deterministic = "", 0, false
	if cfg.DataDigest != "" {
		cfg.DataFile, cfg.DataDir = "", ""
	}
	mine, _ := json.Marshal(cfg)
	if err := g.Set(fmt.Sprintf("config-json/%d", g.Rank()), string(mine)); err != nil {
		return fmt.Errorf("publish config: %w", err)
	}
	sum := sha256.Sum256(mine)
	q, _, err := firstOther(ctx, g, "config", hex.EncodeToString(sum[:8]))
	if err != nil || q < 0 {
		return err
	}
	theirs, err := await(ctx, g, q, fmt.Sprintf("config-json/%d", q)) // published before its hash
	if err != nil {
		return fmt.Errorf("read rank %d's config: %w", q, err)
	}
	return SettingsError{fmt.Errorf("rank %d's config differs from rank %d's in %s: start every rank with the same flags and data", q, g.Rank(), configDiff(mine, []byte(theirs)))}
}

// configDiff names the fields in which two configs as JSON differ, with the first
// one's values; different data first, in words.
func configDiff(mine, theirs []byte) string {
	var a, b map[string]json.RawMessage
	if json.Unmarshal(mine, &a) != nil || json.Unmarshal(theirs, &b) != nil {
		return "a config this rank cannot read"
	}
	var keys []string
	for k := range a {
		if string(a[k]) != string(b[k]) {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "the order of its fields" // never, for one build
	}
	slices.Sort(keys)
	if i := slices.Index(keys, "data_digest"); i >= 0 {
		// The data's statistics and columns differ with them: named, not shown.
		return fmt.Sprintf("the data it read (their SHA-256 differ; so do %s)", strings.Join(slices.Delete(keys, i, i+1), ", "))
	}
	show := func(v json.RawMessage) string {
		if v == nil {
			return "none"
		}
		s := string(v)
		if utf8.RuneCountInString(s) <= 40 {
			return s
		}
		return string([]rune(s)[:37]) + "…"
	}
	diff := fmt.Sprintf("%q (%s here, %s there)", keys[0], show(a[keys[0]]), show(b[keys[0]]))
	if len(keys) > 1 {
		diff += fmt.Sprintf(" and %d more: %s", len(keys)-1, strings.Join(keys[1:], ", "))
	}
	return diff
}

// progress is how far the run has trained: its epochs and each optimiser's steps,
// which Join does not copy from rank 0 (Adam's bias correction reads the steps).
func (r *Run) progress() string {
	p := fmt.Sprintf("epoch %d", r.epoch)
	for _, opt := range []*torch.Adam{r.optA, r.optB} {
		if opt != nil && opt.Len() > 0 {
			s := torch.NoGrad()
			_, _, steps := opt.State(s, 0)
			s.Close()
			p += fmt.Sprintf(", step %d", steps)
		}
	}
	return p
}

// sameProgress refuses ranks resumed from checkpoints of different epochs, as a
// stale copy of the run folder on one machine gives.
func sameProgress(ctx context.Context, g *torch.Group, mine string) error {
	q, theirs, err := firstOther(ctx, g, "progress", mine)
	if err == nil && q >= 0 {
		err = fmt.Errorf("rank %d resumes after %s, rank %d after %s: every machine must see the same run folder", q, theirs, g.Rank(), mine)
	}
	return err
}

// firstOther publishes this rank's value under key and returns the first rank whose
// value differs, with it (-1 where all agree). Rank 0, which serves the store,
// returns only after every rank has said, as its last use of the store here, that it
// has read: on a difference rank 0 exits and takes the store with it, and a rank
// still reading failed with "Broken pipe" instead of the difference (1 run in 140
// under load).
func firstOther(ctx context.Context, g *torch.Group, key, mine string) (int, string, error) {
	if err := g.Set(fmt.Sprintf("%s/%d", key, g.Rank()), mine); err != nil {
		return 0, "", fmt.Errorf("publish %s: %w", key, err) // the caller names this rank
	}
	first, value := -1, ""
	for q := 0; q < g.Size() && first < 0; q++ {
		theirs, err := await(ctx, g, q, fmt.Sprintf("%s/%d", key, q))
		if err != nil {
			return 0, "", fmt.Errorf("read rank %d's %s: %w", q, key, err)
		}
		if theirs != mine {
			first, value = q, theirs
		}
	}
	if g.Rank() != 0 {
		if err := g.Set(fmt.Sprintf("%s-read/%d", key, g.Rank()), "1"); err != nil {
			return 0, "", fmt.Errorf("publish %s read: %w", key, err)
		}
		return first, value, nil
	}
	for q := 1; q < g.Size(); q++ {
		if _, err := await(ctx, g, q, fmt.Sprintf("%s-read/%d", key, q)); err != nil {
			return 0, "", fmt.Errorf("wait for rank %d to read the %s: %w", q, key, err)
		}
	}
	return first, value, nil
}

// RankFailedError is what a rank met while another waited for it: the error that
// rank published (PublishFailure) before it stopped, and whether it was interrupted.
type RankFailedError struct {
	Rank        int
	Err         string
	Interrupted bool
}

func (e RankFailedError) Error() string { return fmt.Sprintf("rank %d stopped: %s", e.Rank, e.Err) }

// failedKey is where rank q's failure is published in the group's store.
func failedKey(q int) string { return fmt.Sprintf("failed/%d", q) }

// interruptedMark begins a published failure that was an interrupt (no NUL: the
// store takes C strings).
const interruptedMark = "[interrupt] "

// publishWait bounds PublishFailure: a store whose server hangs would hold a stopping
// rank for --dist-timeout.
const publishWait = 3 * time.Second

// PublishFailure tells the other ranks, through the store, that this rank stops on
// err (an interrupt where interrupted), so that one waiting for it says why at once
// rather than after --dist-timeout. It returns the store's error: where rank 0, which
// served it, is gone, or where the store does not answer within publishWait.
func PublishFailure(g *torch.Group, err error, interrupted bool) error {
	value := err.Error()
	if interrupted {
		value = interruptedMark + value
	}
	done := make(chan error, 1)
	go func() { done <- g.Set(failedKey(g.Rank()), value) }()
	select {
	case err := <-done:
		return err
	case <-time.After(publishWait):
		return errors.New("the store did not answer")
	}
}

// Failed reports whether rank q published a failure, as the error it met.
func Failed(g *torch.Group, q int) (*RankFailedError, error) {
	ok, err := g.Has(failedKey(q))
	if !ok || err != nil {
		return nil, err
	}
	msg, err := g.Get(failedKey(q))
	if err != nil {
		return nil, err
	}
	rest, interrupted := strings.CutPrefix(msg, interruptedMark)
	return &RankFailedError{Rank: q, Err: rest, Interrupted: interrupted}, nil
}

// awaitPoll is how often await looks at the store.
const awaitPoll = 50 * time.Millisecond

// AwaitTimeoutError is a rank that did not answer within the group's timeout: still
// loading its data, hung, gone, or, where Gloo let this rank join without it (libtorch
// 2.6 does), still joining a group of another size, which the store cannot tell apart.
type AwaitTimeoutError struct {
	Rank    int
	Timeout time.Duration
}

func (e AwaitTimeoutError) Error() string {
	return fmt.Sprintf("rank %d did not answer within --dist-timeout %v (still loading its data, hung, gone, or started with another WORLD_SIZE)", e.Rank, e.Timeout)
}

// await returns rank q's value of key in g's store, waiting up to g's timeout. It
// polls where a get would block in libtorch, so that rank q's failure
// (PublishFailure) ends the wait at once: a blocking get waited out the whole
// --dist-timeout, and a signal started that wait again. The polls run aside, so that
// an interrupt (ctx) ends it at once too, and so does the timeout, even where the
// store stops answering.
func await(ctx context.Context, g *torch.Group, q int, key string) (string, error) {
	type answer struct {
		value string
		err   error
	}
	done := make(chan answer, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		deadline := time.Now().Add(g.Timeout())
		for {
			ok, err := g.Has(key)
			switch {
			case err != nil:
				done <- answer{err: err}
				return
			case ok:
				v, err := g.Get(key)
				done <- answer{v, err}
				return
			}
			if failed, err := Failed(g, q); err != nil || failed != nil {
				if failed != nil {
					err = *failed
				}
				done <- answer{err: err}
				return
			}
			if time.Now().After(deadline) {
				done <- answer{err: AwaitTimeoutError{Rank: q, Timeout: g.Timeout()}}
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(awaitPoll):
			}
		}
	}()
	// A store read that hangs (its server stopped, not gone) would outlast the deadline.
	overdue := time.NewTimer(g.Timeout() + time.Second)
	defer overdue.Stop()
	select {
	case a := <-done:
		return a.value, a.err
	case <-ctx.Done():
		return "", ctx.Err()
	case <-overdue.C:
		return "", AwaitTimeoutError{Rank: q, Timeout: g.Timeout()}
	}
}

// syncGroup is the group whose batch statistics the losses use, or nil.
func (r *Run) syncGroup() *torch.Group {
	if r.group == nil || r.Cfg.LocalStats || r.group.Size() == 1 {
		return nil
	}
	return r.group
}

// rankRows is the slice of each global batch this rank trains on.
func (r *Run) rankRows() (offset, rows int) {
	if r.group == nil {
		return 0, r.Cfg.BatchSize
	}
	b := r.Cfg.BatchSize / r.group.Size()
	return r.group.Rank() * b, b
}

// worldSize is the number of ranks training r, 1 when alone.
func (r *Run) worldSize() int {
	if r.group == nil {
		return 1
	}
	return r.group.Size()
}

// globalMean is the mean of t over the ranks, t itself when alone. It carries no
// gradient.
func (r *Run) globalMean(s *torch.Scope, t *torch.Tensor) *torch.Tensor {
	if r.group == nil || s.Err() != nil {
		return t
	}
	sum := s.Clone(t)
	s.Fail(r.group.AllReduce(sum))
	return s.DivScalar(sum, float64(r.group.Size()))
}

// stopEvery is how many steps apart ranks agree on whether to stop.
const stopEvery = 16

// stopRequested returns ctx's error when training should stop before step. Ranks
// must stop at the same step, or the others would wait in a collective for the one
// that left: every stopEvery steps they agree, stopping if any rank was cancelled.
func (r *Run) stopRequested(ctx context.Context, step int) error {
	if r.group == nil {
		return ctx.Err()
	}
	if step%stopEvery != 0 {
		return nil
	}
	s := torch.NoGrad()
	defer s.Close()
	flag := 0.0
	if ctx.Err() != nil {
		flag = 1
	}
	t := s.Full([]int{1}, flag, torch.Float32, r.Dev)
	if err := s.Err(); err != nil {
		return err
	}
	if err := r.group.AllReduce(t); err != nil {
		return err
	}
	if s.Item(t) > 0 {
		return context.Canceled
	}
	return s.Err()
}
