// SPDX-License-Identifier: Apache-2.0

// Package wsel is the Go binding of libwsel-host and libwsel-router (cgo,
// linked through `pkg-config wsel-router`: set PKG_CONFIG_PATH to
// <prefix>/lib/pkgconfig for a prefix outside the default path).
//
// Thread rules are the headers': Select, RequestFinished, RequestOutcome,
// Counters and every Router method run from any goroutine at once. The
// control-thread calls (Switch, Reclaim, TopologyChanged, PolicyName) are
// serialised by a mutex of the host's, never blocking selects. Close
// waits for calls in flight (a read-write lock: selects share it), so a
// Host or Router is never freed under a running call; calls after Close
// return ErrClosed. Errors are *Error with the host's own message.
package wsel

/*
#cgo pkg-config: wsel-router
#include <stdlib.h>
#include <wsel_router.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

const errSize = 512

// Row flags (wsel_table.flags / RankState.Flags).
const (
	RowBusy     = uint8(C.WSEL_ROW_BUSY)
	RowExcluded = uint8(C.WSEL_ROW_EXCLUDED)
	RowNoLoad   = uint8(C.WSEL_ROW_NO_LOAD)
)

// Error is a negative WSEL_E* code with the host's message.
type Error struct {
	Code    int32
	Name    string
	Message string
}

func (e *Error) Error() string { return e.Name + ": " + e.Message }

// ErrClosed is returned by calls on a closed Host or Router.
var ErrClosed = &Error{Code: int32(C.WSEL_ESTATE), Name: "WSEL_ESTATE", Message: "closed"}

func newError(rc C.int32_t, msg string) *Error {
	if msg == "" {
		msg = C.GoString(C.wsel_strerror(rc))
	}
	return &Error{Code: int32(rc), Name: C.GoString(C.wsel_errname(rc)), Message: msg}
}

func check(rc C.int32_t) error {
	if rc < 0 {
		return newError(rc, "")
	}
	return nil
}

// withErr runs a C call that takes an err buffer.
func withErr(call func(err *C.char, size C.size_t) C.int32_t) (C.int32_t, error) {
	var buf [errSize]C.char
	rc := call(&buf[0], errSize)
	if rc < 0 {
		return rc, newError(rc, C.GoString(&buf[0]))
	}
	return rc, nil
}

// RankState is what the router knows about one (worker, dp_rank): the
// layout of wsel_rank_state (checked by TestRankStateMatchesC).
type RankState struct {
	WorkerID            uint64
	DPRank              uint32
	OverlapBlocks       uint32
	ActivePrefillTokens uint64
	ActiveBlocks        uint64
	KVCapacityBlocks    uint64
	ActiveRequests      uint32
	Flags               uint8
	_                   [3]uint8
}

// RequestSpec is a request's inputs (wsel_request).
type RequestSpec struct {
	RequestID          uint64
	ISLTokens          uint32
	BlockSize          uint32 // 0: 64
	BlockHashes        []uint64
	OverlapScoreWeight float64  // 0: 1.0
	Temperature        *float64 // this request's own, 0 included; nil: the policy's
	AffinityKey        uint64
	TimestampUS        uint64
}

// Request is a request prepared by a host, in C memory; Free it (or let
// the garbage collector). One goroutine at a time: select advances its
// random stream.
type Request struct {
	c      *C.wsel_request
	rng    *C.wsel_rng
	hashes *C.uint64_t
}

func (r *Request) free() {
	C.free(unsafe.Pointer(r.c))
	C.free(unsafe.Pointer(r.rng))
	C.free(unsafe.Pointer(r.hashes))
	r.c, r.rng, r.hashes = nil, nil, nil
}

// Free releases the request now.
func (r *Request) Free() { runtime.SetFinalizer(r, nil); r.free() }

// Uniform is the request's uniform draw in [0, 1).
func (r *Request) Uniform() float64 { return float64(r.c.uniform) }

// Validate returns WSEL_EREQUEST naming the field if the request is invalid.
func (r *Request) Validate() error {
	_, err := withErr(func(e *C.char, n C.size_t) C.int32_t { return C.wsel_request_validate(r.c, e, n) })
	return err
}

// Table is a candidate table in C memory, rebuilt per request; Free it
// (or let the garbage collector). One goroutine builds it at a time.
type Table struct {
	buf *C.wsel_table_buf
}

// NewTable allocates columns for up to capacity rows.
func NewTable(capacity uint32) (*Table, error) {
	buf := (*C.wsel_table_buf)(C.calloc(1, C.sizeof_wsel_table_buf))
	if err := check(C.wsel_table_buf_init(buf, C.uint32_t(capacity))); err != nil {
		C.free(unsafe.Pointer(buf))
		return nil, err
	}
	t := &Table{buf: buf}
	runtime.SetFinalizer(t, (*Table).Free)
	return t, nil
}

// Free releases the columns.
func (t *Table) Free() {
	if t.buf != nil {
		runtime.SetFinalizer(t, nil)
		C.wsel_table_buf_free(t.buf)
		C.free(unsafe.Pointer(t.buf))
		t.buf = nil
	}
}

// Build fills the columns from rank states in canonical order (worker
// id, then dp rank); WSEL_ETABLE names the offending rank.
func (t *Table) Build(req *Request, ranks []RankState, epoch uint64) error {
	var p *C.wsel_rank_state
	if len(ranks) > 0 {
		p = (*C.wsel_rank_state)(unsafe.Pointer(&ranks[0]))
	}
	_, err := withErr(func(e *C.char, n C.size_t) C.int32_t {
		return C.wsel_table_build(t.buf, req.c, p, C.uint32_t(len(ranks)), C.uint64_t(epoch), e, n)
	})
	runtime.KeepAlive(ranks)
	return err
}

// Len is the number of rows.
func (t *Table) Len() int { return int(t.buf.table.num_rows) }

func (t *Table) row(row int) int {
	if row < 0 || row >= t.Len() {
		panic(fmt.Sprintf("wsel: row %d out of range", row))
	}
	return row
}

// Worker is (worker id, dp rank) of a row.
func (t *Table) Worker(row int) (uint64, uint32) {
	i := t.row(row)
	w := unsafe.Slice(t.buf.table.worker_id, t.Len())
	d := unsafe.Slice(t.buf.table.dp_rank, t.Len())
	return uint64(w[i]), uint32(d[i])
}

// Cost is Dynamo's default cost of a row.
func (t *Table) Cost(row int) float64 {
	return float64(unsafe.Slice(t.buf.table.cost, t.Len())[t.row(row)])
}

// Validate checks the table as wsel_table_validate does.
func (t *Table) Validate() error {
	_, err := withErr(func(e *C.char, n C.size_t) C.int32_t { return C.wsel_table_validate(&t.buf.table, e, n) })
	return err
}

// Choice is a select's answer with the plugin's explanation.
type Choice struct {
	Row      int
	WorkerID uint64
	DPRank   uint32
	Fallback bool     // the host's built-in policy answered
	Reason   uint32   // WSEL_REASON_*; 0: none given
	Score    *float64 // the chosen row's score when the plugin gave one
}

// Outcome is what a finished request cost (wsel_outcome).
type Outcome struct {
	RequestID, WorkerID                      uint64
	DPRank                                   uint32
	TTFTUS, E2EUS, FinishedUS                uint64
	PromptTokens, CachedTokens, OutputTokens uint32
	Failed                                   bool
}

// HostCounters is wsel_host_counters with fallbacks by reason name.
type HostCounters struct {
	Selects, PluginAnswers, Fallbacks   uint64
	FallbackByReason                    map[string]uint64
	Switches, FailedSwitches, Ejections uint64
	LogDropped                          uint64
	AnswersByReason                     [16]uint64
}

// ChildCounters describes one child of the live policy.
type ChildCounters struct {
	Depth                      uint32
	Name                       string
	Scores, Answers, Fallbacks uint64
	Ejected                    bool
}

// HostOptions configures NewHost; the zero value is the host's defaults.
type HostOptions struct {
	Seed                   uint64
	MaxConsecutiveFailures uint32
	AllowedDirs            []string // nil: any folder
	Isolated               bool
	SelectDeadlineUS       uint32
	HelperPath             string
}

// Host is a live policy with fallback, switching and counters.
type Host struct {
	ptr     *C.wsel_host
	life    sync.RWMutex // calls share it; Close takes it whole
	control sync.Mutex   // one control-thread call at a time
	routers int
}

// NewHost creates a host with no policy (the built-in one serves).
func NewHost(o HostOptions) (*Host, error) {
	var opts C.wsel_host_options
	C.wsel_host_options_default(&opts)
	opts.seed = C.uint64_t(o.Seed)
	if o.MaxConsecutiveFailures != 0 {
		opts.max_consecutive_failures = C.uint32_t(o.MaxConsecutiveFailures)
	}
	var cstrs []*C.char
	defer func() {
		for _, s := range cstrs {
			C.free(unsafe.Pointer(s))
		}
	}()
	if o.AllowedDirs != nil {
		dirs := (**C.char)(C.calloc(C.size_t(len(o.AllowedDirs)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
		defer C.free(unsafe.Pointer(dirs))
		list := unsafe.Slice(dirs, len(o.AllowedDirs)+1)
		for i, d := range o.AllowedDirs {
			list[i] = C.CString(d)
			cstrs = append(cstrs, list[i])
		}
		opts.trust.allowed_dirs = dirs
	}
	if o.Isolated {
		opts.isolated = 1
	}
	opts.select_deadline_us = C.uint32_t(o.SelectDeadlineUS)
	if o.HelperPath != "" {
		h := C.CString(o.HelperPath)
		cstrs = append(cstrs, h)
		*(**C.char)(unsafe.Pointer(&opts.anon1)) = h
	}
	var out *C.wsel_host
	if err := check(C.wsel_host_create(&opts, &out)); err != nil {
		return nil, err
	}
	return &Host{ptr: out}, nil
}

// Close destroys the host after the calls in flight; it refuses while a
// Router built on it is open.
func (h *Host) Close() error {
	h.life.Lock()
	defer h.life.Unlock()
	if h.ptr == nil {
		return nil
	}
	if h.routers > 0 {
		return &Error{Code: int32(C.WSEL_ESTATE), Name: "WSEL_ESTATE",
			Message: fmt.Sprintf("%d router(s) still use this host", h.routers)}
	}
	C.wsel_host_destroy(h.ptr)
	h.ptr = nil
	return nil
}

// enter holds the host open for one call.
func (h *Host) enter() error {
	h.life.RLock()
	if h.ptr == nil {
		h.life.RUnlock()
		return ErrClosed
	}
	return nil
}

// Switch loads the plugin at path with JSON config ("" = defaults) and
// makes it live; on error the old policy keeps serving.
func (h *Host) Switch(path, config string) error {
	if err := h.enter(); err != nil {
		return err
	}
	defer h.life.RUnlock()
	h.control.Lock()
	defer h.control.Unlock()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var ccfg *C.char
	if config != "" {
		ccfg = C.CString(config)
		defer C.free(unsafe.Pointer(ccfg))
	}
	_, err := withErr(func(e *C.char, n C.size_t) C.int32_t { return C.wsel_host_switch(h.ptr, cpath, ccfg, e, n) })
	return err
}

// Reclaim destroys replaced instances past their grace; how many live on.
func (h *Host) Reclaim() uint32 {
	if h.enter() != nil {
		return 0
	}
	defer h.life.RUnlock()
	h.control.Lock()
	defer h.control.Unlock()
	return uint32(C.wsel_host_reclaim(h.ptr))
}

// PolicyName is the live policy's name ("builtin" when none or ejected).
func (h *Host) PolicyName() string {
	if h.enter() != nil {
		return ""
	}
	defer h.life.RUnlock()
	h.control.Lock()
	defer h.control.Unlock()
	return C.GoString(C.wsel_host_policy_name(h.ptr))
}

// Request prepares a request (random stream seeded from the host's seed
// and the request id), in C memory.
func (h *Host) Request(s RequestSpec) (*Request, error) {
	if err := h.enter(); err != nil {
		return nil, err
	}
	defer h.life.RUnlock()
	r := &Request{
		c:   (*C.wsel_request)(C.calloc(1, C.sizeof_wsel_request)),
		rng: (*C.wsel_rng)(C.calloc(1, C.sizeof_wsel_rng)),
	}
	r.c.request_id = C.uint64_t(s.RequestID)
	C.wsel_host_prepare_request_sized(h.ptr, r.c, C.sizeof_wsel_request, r.rng)
	r.c.isl_tokens = C.uint32_t(s.ISLTokens)
	r.c.block_size = 64
	if s.BlockSize != 0 {
		r.c.block_size = C.uint32_t(s.BlockSize)
	}
	r.c.overlap_score_weight = 1.0
	if s.OverlapScoreWeight != 0 {
		r.c.overlap_score_weight = C.double(s.OverlapScoreWeight)
	}
	r.c.affinity_key = C.uint64_t(s.AffinityKey)
	r.c.timestamp_us = C.uint64_t(s.TimestampUS)
	if s.Temperature != nil {
		r.c.temperature = C.double(*s.Temperature)
		r.c.overrides |= C.WSEL_OVERRIDE_TEMPERATURE
	}
	if n := len(s.BlockHashes); n > 0 {
		r.hashes = (*C.uint64_t)(C.malloc(C.size_t(n * 8)))
		copy(unsafe.Slice((*uint64)(unsafe.Pointer(r.hashes)), n), s.BlockHashes)
		r.c.block_hashes, r.c.num_block_hashes = r.hashes, C.uint32_t(n)
	}
	runtime.SetFinalizer(r, (*Request).free)
	return r, nil
}

// Select chooses a row of table for req. [any goroutine]
func (h *Host) Select(req *Request, table *Table) (Choice, error) {
	if err := h.enter(); err != nil {
		return Choice{}, err
	}
	var c C.wsel_choice
	c.struct_size = C.sizeof_wsel_choice
	rc := C.wsel_host_select(h.ptr, req.c, &table.buf.table, &c)
	h.life.RUnlock()
	runtime.KeepAlive(req)
	if rc < 0 {
		return Choice{}, newError(rc, "")
	}
	row := int(c.row)
	w, d := table.Worker(row)
	ch := Choice{Row: row, WorkerID: w, DPRank: d, Fallback: rc == C.WSEL_ANSWER_FALLBACK,
		Reason: uint32(c.reason)}
	if c.flags&C.WSEL_CHOICE_SCORED != 0 {
		s := float64(c.score)
		ch.Score = &s
	}
	return ch, nil
}

// RequestFinished tells the live policy a request finished.
func (h *Host) RequestFinished(requestID, workerID uint64, dpRank uint32) {
	if h.enter() != nil {
		return
	}
	defer h.life.RUnlock()
	C.wsel_host_request_finished(h.ptr, C.uint64_t(requestID), C.uint64_t(workerID), C.uint32_t(dpRank))
}

// RequestOutcome tells the live policy a request finished and its cost.
func (h *Host) RequestOutcome(o Outcome) {
	if h.enter() != nil {
		return
	}
	defer h.life.RUnlock()
	c := C.wsel_outcome{struct_size: C.sizeof_wsel_outcome, dp_rank: C.uint32_t(o.DPRank),
		request_id: C.uint64_t(o.RequestID), worker_id: C.uint64_t(o.WorkerID),
		ttft_us: C.uint64_t(o.TTFTUS), e2e_us: C.uint64_t(o.E2EUS),
		finished_us: C.uint64_t(o.FinishedUS), prompt_tokens: C.uint32_t(o.PromptTokens),
		cached_tokens: C.uint32_t(o.CachedTokens), output_tokens: C.uint32_t(o.OutputTokens)}
	if o.Failed {
		c.flags = C.WSEL_OUTCOME_FAILED
	}
	C.wsel_host_request_outcome(h.ptr, &c)
}

// TopologyChanged tells the live policy the set of ranks changed.
func (h *Host) TopologyChanged(t *Table) {
	if h.enter() != nil {
		return
	}
	defer h.life.RUnlock()
	h.control.Lock()
	defer h.control.Unlock()
	C.wsel_host_topology_changed(h.ptr, &t.buf.table)
}

// Counters is a snapshot of the host's counters.
func (h *Host) Counters() HostCounters {
	var c C.wsel_host_counters
	if h.enter() != nil {
		return HostCounters{}
	}
	C.wsel_host_read_counters(h.ptr, &c, C.sizeof_wsel_host_counters)
	h.life.RUnlock()
	out := HostCounters{Selects: uint64(c.selects), PluginAnswers: uint64(c.plugin_answers),
		Fallbacks: uint64(c.fallbacks), FallbackByReason: map[string]uint64{},
		Switches: uint64(c.switches), FailedSwitches: uint64(c.failed_switches),
		Ejections: uint64(c.ejections), LogDropped: uint64(c.log_dropped)}
	for r := 0; r < C.WSEL_FALLBACK_REASONS_MAX; r++ {
		var n C.uint64_t
		if r < C.WSEL_FALLBACK_REASONS {
			n = c.fallback_by_reason[r]
		} else {
			n = c.fallback_by_reason_more[r-C.WSEL_FALLBACK_REASONS]
		}
		if n != 0 {
			out.FallbackByReason[C.GoString(C.wsel_fallback_reason_name(C.uint32_t(r)))] = uint64(n)
		}
	}
	for i := range out.AnswersByReason {
		out.AnswersByReason[i] = uint64(c.answers_by_reason[i])
	}
	return out
}

// ChildCounters lists the live policy's children, depth first.
func (h *Host) ChildCounters() ([]ChildCounters, error) {
	if err := h.enter(); err != nil {
		return nil, err
	}
	defer h.life.RUnlock()
	var out []ChildCounters
	for {
		var c C.wsel_child_counters
		c.struct_size = C.sizeof_wsel_child_counters
		rc := C.wsel_host_read_child_counters(h.ptr, C.uint32_t(len(out)), &c, C.sizeof_wsel_child_counters)
		if rc == C.WSEL_ENOENT {
			return out, nil
		}
		if err := check(rc); err != nil {
			return nil, err
		}
		out = append(out, ChildCounters{Depth: uint32(c.depth), Name: C.GoString(&c.name[0]),
			Scores: uint64(c.scores), Answers: uint64(c.answers), Fallbacks: uint64(c.fallbacks),
			Ejected: c.ejected != 0})
	}
}

// Is reports whether err is a wsel error with the given name ("WSEL_ENOENT").
func Is(err error, name string) bool {
	var e *Error
	return errors.As(err, &e) && e.Name == name
}
