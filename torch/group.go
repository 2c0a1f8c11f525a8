package torch

/*
#include <stdlib.h>
#include "csrc/emtorch.h"
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Backend is a c10d collective backend.
type Backend int

// The backends: Gloo moves CPU (and CUDA) tensors over TCP, NCCL moves CUDA tensors.
const (
	Gloo Backend = C.ET_GLOO
	NCCL Backend = C.ET_NCCL
)

func (b Backend) String() string {
	switch b {
	case Gloo:
		return "gloo"
	case NCCL:
		return "nccl"
	}
	return fmt.Sprintf("backend(%d)", int(b))
}

// HasBackend reports whether the shim was built with b.
func HasBackend(b Backend) bool {
	return C.et_dist_backends()&(1<<uint(b)) != 0
}

// GroupConfig says how a process joins a group.
type GroupConfig struct {
	Backend Backend
	// Host and Port are the TCPStore's address; the store is served by this process
	// when ServeStore is set (rank 0, unless a launcher such as torchrun hosts it).
	// Port 0 then serves on a free port, which only a world of one can use.
	Host       string
	Port       int
	ServeStore bool
	// Prefix keeps this group's keys apart from others' in a shared store.
	Prefix      string
	Rank, World int
	// Timeout bounds every rendezvous, store read and collective.
	Timeout time.Duration
	// Interface is the network interface Gloo uses (GLOO_SOCKET_IFNAME); empty
	// resolves the host's name.
	Interface string
	// Device is the CUDA device NCCL uses.
	Device int
}

// Group is a c10d process group: the ranks of one training run. Every rank must call
// the same collectives in the same order.
type Group struct {
	h           C.et_group
	rank, world int
	backend     Backend
	timeout     time.Duration
	// mu keeps Close from freeing h under a store call: a wait given up (an
	// interrupt) may still be in one, on a goroutine of its own, as the process stops.
	mu sync.RWMutex
}

// AllowInProcessRanks makes it safe for several ranks to share one process, as tests'
// groups do: call it before the first group. It turns c10d's flight recorder off
// unless the environment sets its size. In PyTorch 2.11 (not 2.6), as its sources
// read, every Gloo collective is recorded in one recorder for the whole process, whose
// per-group map is written before its lock is taken, so two groups enqueueing at once
// can corrupt it: the likely cause of a SIGSEGV in _Rb_tree_insert_and_rebalance under
// ProcessGroupGloo::enqueue (docs/RESULTS.md sections 43 and 51, not yet reproduced on
// demand; pytorch/pytorch#179313). emclust's own ranks are processes of their own, one
// group each, and keep the recorder.
func AllowInProcessRanks() {
	_, fr := os.LookupEnv("TORCH_FR_BUFFER_SIZE")
	_, nccl := os.LookupEnv("TORCH_NCCL_TRACE_BUFFER_SIZE") // its older name
	if !fr && !nccl {
		os.Setenv("TORCH_FR_BUFFER_SIZE", "0") // cgo: the C environment too
	}
}

// NewGroup joins a process group; it returns when all World ranks have joined, or
// with an error after cfg.Timeout.
func NewGroup(cfg GroupConfig) (*Group, error) {
	if cfg.Timeout < time.Millisecond {
		// c10d counts in milliseconds, and 0 is its "no timeout".
		return nil, fmt.Errorf("torch: group: timeout %v: want 1ms or more", cfg.Timeout)
	}
	// The shim takes C ints: a larger value would wrap to another rank or port.
	for _, v := range []struct {
		name      string
		v, lo, hi int
	}{{"port", cfg.Port, 0, 65535}, {"world size", cfg.World, 1, math.MaxInt32}, {"rank", cfg.Rank, 0, cfg.World - 1}, {"device", cfg.Device, -1, math.MaxInt8}} {
		if v.v < v.lo || v.v > v.hi {
			return nil, fmt.Errorf("torch: group: %s %d: want %d to %d", v.name, v.v, v.lo, v.hi)
		}
	}
	// Gloo writes to its sockets from threads Go did not start, without
	// MSG_NOSIGNAL: a peer gone, SIGPIPE there ends the process without a word (a
	// rank resumed from SIGSTOP died so, 2 runs of 4). Ignored, the write fails and
	// the collective returns its error, as in Python, which ignores SIGPIPE too. For
	// the rest of the process: a rank's stdout piped into a reader that closed then
	// fails its writes rather than ending the rank.
	signal.Ignore(syscall.SIGPIPE)
	host, prefix, iface := C.CString(cfg.Host), C.CString(cfg.Prefix), C.CString(cfg.Interface)
	defer C.free(unsafe.Pointer(host))
	defer C.free(unsafe.Pointer(prefix))
	defer C.free(unsafe.Pointer(iface))
	var h C.et_group
	err := check("group_new", C.et_group_new(C.int(cfg.Backend), host, C.int(cfg.Port), cbool(cfg.ServeStore),
		prefix, C.int(cfg.Rank), C.int(cfg.World), C.int64_t(cfg.Timeout.Milliseconds()), iface,
		C.int(cfg.Device), &h))
	if err != nil {
		return nil, err
	}
	return &Group{h: h, rank: cfg.Rank, world: cfg.World, backend: cfg.Backend, timeout: cfg.Timeout}, nil
}

// Store is a TCPStore that this process serves for ranks joining it as clients
// (GroupConfig.ServeStore false), as torchrun's agent does.
type Store struct {
	h    C.et_store
	port int
}

// ServeStore serves a store for world ranks at host:port. Port 0 takes a port that
// the system finds free, which Port then tells: no other program can take it between
// the finding and the listening.
func ServeStore(host string, port, world int, timeout time.Duration) (*Store, error) {
	if timeout < time.Millisecond {
		return nil, fmt.Errorf("torch: store: timeout %v: want 1ms or more", timeout)
	}
	if port < 0 || port > 65535 || world < 1 || world > math.MaxInt32 {
		return nil, fmt.Errorf("torch: store: port %d, world size %d: want 0 to 65535 and 1 or more", port, world)
	}
	chost := C.CString(host)
	defer C.free(unsafe.Pointer(chost))
	var h C.et_store
	var bound C.int
	if err := check("store_serve", C.et_store_serve(chost, C.int(port), C.int(world), C.int64_t(timeout.Milliseconds()), &h, &bound)); err != nil {
		return nil, err
	}
	return &Store{h: h, port: int(bound)}, nil
}

// Port is the port the store listens on.
func (s *Store) Port() int { return s.port }

// Close stops serving: ranks still using the store then fail.
func (s *Store) Close() {
	if s != nil && s.h != nil {
		dropError(C.et_store_free(s.h))
		s.h = nil
	}
}

// Backend is the group's collective backend.
func (g *Group) Backend() Backend { return g.backend }

// Timeout is the group's GroupConfig.Timeout, which bounds each of its waits.
func (g *Group) Timeout() time.Duration { return g.timeout }

// Rank is this process's rank, 0 to Size()-1.
func (g *Group) Rank() int { return g.rank }

// Size is the number of ranks.
func (g *Group) Size() int { return g.world }

// Close leaves the group. Where a store call still runs on another goroutine, it
// leaves the group to the process's end rather than free it under the call.
func (g *Group) Close() {
	if g == nil || !g.mu.TryLock() {
		return
	}
	defer g.mu.Unlock()
	if g.h != nil {
		dropError(C.et_group_free(g.h))
		g.h = nil
	}
}

// storeHandle is h for a store call, which must call the returned release when done;
// an error where the group was closed.
func (g *Group) storeHandle(op string) (C.et_group, func(), error) {
	g.mu.RLock()
	if g.h == nil {
		g.mu.RUnlock()
		return nil, nil, fmt.Errorf("torch: %s: the group was closed", op)
	}
	return g.h, g.mu.RUnlock, nil
}

// AllReduce sums ts across ranks in place. The tensors must share a dtype and device.
func (g *Group) AllReduce(ts ...*Tensor) error {
	hs, err := handles("all_reduce", ts)
	if err != nil || len(hs) == 0 {
		return err
	}
	return check("all_reduce", C.et_group_all_reduce(g.h, &hs[0], C.int(len(hs))))
}

// ReduceGrads sums the gradients of params across ranks and scales them, in place:
// scale 1/Size() makes the gradient of the ranks' mean loss.
func (g *Group) ReduceGrads(params []*Tensor, scale float64) error {
	hs, err := handles("reduce_grads", params)
	if err != nil || len(hs) == 0 {
		return err
	}
	return check("reduce_grads", C.et_group_reduce_grads(g.h, &hs[0], C.int(len(hs)), C.double(scale)))
}

// Broadcast copies rank root's ts into every rank's, in place.
func (g *Group) Broadcast(root int, ts ...*Tensor) error {
	hs, err := handles("broadcast", ts)
	if err != nil || len(hs) == 0 {
		return err
	}
	return check("broadcast", C.et_group_broadcast(g.h, &hs[0], C.int(len(hs)), C.int(root)))
}

// Barrier returns when every rank has called it.
func (g *Group) Barrier() error { return check("barrier", C.et_group_barrier(g.h)) }

// Set stores value under key in the group's store.
func (g *Group) Set(key, value string) error {
	h, release, err := g.storeHandle("store_set")
	if err != nil {
		return err
	}
	defer release()
	k, v := C.CString(key), C.CString(value)
	defer C.free(unsafe.Pointer(k))
	defer C.free(unsafe.Pointer(v))
	return check("store_set", C.et_group_store_set(h, k, v))
}

// Get waits for key in the group's store, up to the group's timeout.
func (g *Group) Get(key string) (string, error) {
	h, release, err := g.storeHandle("store_get")
	if err != nil {
		return "", err
	}
	defer release()
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	var v *C.char
	if err := check("store_get", C.et_group_store_get(h, k, &v)); err != nil {
		return "", err
	}
	defer C.et_free_error(v)
	return C.GoString(v), nil
}

// Has reports whether key is in the group's store now, without waiting.
func (g *Group) Has(key string) (bool, error) {
	h, release, err := g.storeHandle("store_check")
	if err != nil {
		return false, err
	}
	defer release()
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	var found C.int
	err = check("store_check", C.et_group_store_check(h, k, &found))
	return found != 0, err
}

// AllReduceSum is the sum of x over the ranks of g, differentiable: its backward sums
// the incoming gradients over the ranks too.
func (s *Scope) AllReduceSum(g *Group, x *Tensor) *Tensor {
	if !s.ok("all_reduce_sum", x) {
		return nil
	}
	var h C.et_tensor
	return s.done("all_reduce_sum", C.et_all_reduce_sum(s.flags(), g.h, x.h, &h), h)
}

// SyncBatchNorm is BatchNorm in training with the statistics of the batch of all
// ranks together, each holding the same number of rows (torch.nn.SyncBatchNorm).
func (s *Scope) SyncBatchNorm(g *Group, x, weight, bias, runningMean, runningVar *Tensor, momentum, eps float64) *Tensor {
	if !s.ok("sync_batch_norm", x) {
		return nil
	}
	var h C.et_tensor
	e := C.et_sync_batch_norm(s.flags(), g.h, x.h, handle(weight), handle(bias), handle(runningMean), handle(runningVar),
		C.double(momentum), C.double(eps), &h)
	return s.done("sync_batch_norm", e, h)
}
