// SPDX-License-Identifier: Apache-2.0

package wsel

/*
#include <stdlib.h>
#include <wsel_router.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// RouterOptions configures NewRouter; zero fields are the defaults.
type RouterOptions struct {
	BlockSize          uint32
	KVEvents           bool // KV events from each rank; false: routing history
	MaxRows            uint32
	CapacityBlocks     uint32
	TextChunkChars     uint32
	BusyActiveRequests uint32
	MaxPromptBlocks    uint32
	BusyPrefillTokens  uint64
	KVThreadsNormal    bool // the caller's CPU class instead of SCHED_BATCH
}

// Route is one request to route: Tokens (exact blocks) or Text.
type Route struct {
	RequestID          uint64 // 0: the router assigns one
	Tokens             []uint32
	Text               string
	ISLTokens          uint32 // text only; 0: len / 4
	OverlapScoreWeight *float64
	Temperature        *float64
	Builtin            bool // the host's built-in rule, not the policy
	DeferHistory       bool // history mode: record at the next Flush
}

// RouteResult is where a request went.
type RouteResult struct {
	RequestID, WorkerID      uint64
	DPRank                   uint32
	Fallback                 bool
	NumBlocks, OverlapBlocks uint32
	Address                  string
}

// Finish is what the caller knows of how a request ended.
type Finish struct {
	Failed       bool
	OutputTokens uint32
	CachedTokens *uint32 // the engine's figure; nil: the router's estimate
	TTFTUS       uint64  // 0: the router's clock
	E2EUS        uint64
}

// RankInfo is one row as the next route would see it.
type RankInfo struct {
	WorkerID                                        uint64
	DPRank, ActiveRequests                          uint32
	ActivePrefillTokens, ActiveBlocks, CachedBlocks uint64
	Flags                                           uint32
}

// RouterCounters is wsel_router_counters, KV skips by reason name.
type RouterCounters struct {
	Routes, PluginAnswers, Fallbacks, NoCandidate                     uint64
	PromptBlocks, OverlapBlocks                                       uint64
	KVMessages, KVBlocksStored, KVBlocksRemoved, KVCleared, KVSeqGaps uint64
	KVSkipped                                                         map[string]uint64
	IndexBlocks, IndexEntries, IndexEvictions, IndexBytes             uint64
	Epoch, BuiltinRoutes                                              uint64
}

// KVCPU is the CPU time KV events have cost the router.
type KVCPU struct{ Messages, DecodeNS, ApplyNS uint64 }

// Router is libwsel-router over a Host. Every method runs from any
// goroutine; Close waits for calls in flight.
type Router struct {
	ptr  *C.wsel_router
	host *Host
	life sync.RWMutex
}

// NewRouter creates a router with no workers on host (which then refuses
// to close until the router is closed).
func NewRouter(host *Host, o RouterOptions) (*Router, error) {
	if err := host.enter(); err != nil {
		return nil, err
	}
	defer host.life.RUnlock()
	opts := C.wsel_router_options{struct_size: C.sizeof_wsel_router_options,
		block_size: C.uint32_t(o.BlockSize), max_rows: C.uint32_t(o.MaxRows),
		capacity_blocks: C.uint32_t(o.CapacityBlocks), text_chunk_chars: C.uint32_t(o.TextChunkChars),
		busy_active_requests: C.uint32_t(o.BusyActiveRequests),
		max_prompt_blocks:    C.uint32_t(o.MaxPromptBlocks),
		busy_prefill_tokens:  C.uint64_t(o.BusyPrefillTokens), host: host.ptr}
	if o.KVEvents {
		opts.kv_source = C.WSEL_ROUTER_KV_EVENTS
	}
	if o.KVThreadsNormal {
		opts.kv_threads = C.WSEL_ROUTER_KV_THREADS_NORMAL
	}
	var out *C.wsel_router
	if _, err := withErr(func(e *C.char, n C.size_t) C.int32_t { return C.wsel_router_create(&opts, &out, e, n) }); err != nil {
		return nil, err
	}
	host.control.Lock()
	host.routers++
	host.control.Unlock()
	return &Router{ptr: out, host: host}, nil
}

// Close stops the KV threads and frees the router.
func (r *Router) Close() {
	r.life.Lock()
	defer r.life.Unlock()
	if r.ptr == nil {
		return
	}
	C.wsel_router_destroy(r.ptr)
	r.ptr = nil
	r.host.control.Lock()
	r.host.routers--
	r.host.control.Unlock()
}

func (r *Router) enter() error {
	r.life.RLock()
	if r.ptr == nil {
		r.life.RUnlock()
		return ErrClosed
	}
	return nil
}

// AddWorker adds a worker of dpSize ranks; kvEndpoints (one per rank) or nil.
func (r *Router) AddWorker(workerID uint64, address string, dpSize uint32, kvEndpoints []string) error {
	if err := r.enter(); err != nil {
		return err
	}
	defer r.life.RUnlock()
	w := C.wsel_router_worker{worker_id: C.uint64_t(workerID), address: C.CString(address),
		dp_size: C.uint32_t(dpSize)}
	defer C.free(unsafe.Pointer(w.address))
	if kvEndpoints != nil {
		eps := (**C.char)(C.calloc(C.size_t(len(kvEndpoints)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
		list := unsafe.Slice(eps, len(kvEndpoints)+1)
		for i, e := range kvEndpoints {
			list[i] = C.CString(e)
		}
		defer func() {
			for _, p := range list {
				C.free(unsafe.Pointer(p))
			}
			C.free(unsafe.Pointer(eps))
		}()
		w.kv_endpoints = eps
	}
	_, err := withErr(func(e *C.char, n C.size_t) C.int32_t { return C.wsel_router_add_worker(r.ptr, &w, e, n) })
	return err
}

func (r *Router) call(f func() C.int32_t) error {
	if err := r.enter(); err != nil {
		return err
	}
	defer r.life.RUnlock()
	return check(f())
}

// DrainWorker excludes a worker's rows and removes it once idle.
func (r *Router) DrainWorker(id uint64) error {
	return r.call(func() C.int32_t { return C.wsel_router_drain_worker(r.ptr, C.uint64_t(id)) })
}

// RemoveWorker removes a worker now.
func (r *Router) RemoveWorker(id uint64) error {
	return r.call(func() C.int32_t { return C.wsel_router_remove_worker(r.ptr, C.uint64_t(id)) })
}

// SetWorkerAvailable marks a worker unavailable (its rows excluded) or back.
func (r *Router) SetWorkerAvailable(id uint64, available bool) error {
	a := C.int(0)
	if available {
		a = 1
	}
	return r.call(func() C.int32_t { return C.wsel_router_set_worker_available(r.ptr, C.uint64_t(id), a) })
}

// Epoch is the topology epoch (starts at 1, +1 per change).
func (r *Router) Epoch() uint64 {
	if r.enter() != nil {
		return 0
	}
	defer r.life.RUnlock()
	return uint64(C.wsel_router_epoch(r.ptr))
}

// Route routes one request and accounts it as started on the chosen rank.
func (r *Router) Route(q Route) (RouteResult, error) {
	var pin runtime.Pinner
	defer pin.Unpin()
	c := C.wsel_route_request{struct_size: C.sizeof_wsel_route_request,
		request_id: C.uint64_t(q.RequestID), overlap_score_weight: 1.0}
	if q.Tokens != nil {
		if len(q.Tokens) > 0 {
			pin.Pin(&q.Tokens[0])
			c.tokens = (*C.uint32_t)(unsafe.Pointer(&q.Tokens[0]))
		}
		c.num_tokens = C.uint32_t(len(q.Tokens))
	} else if q.Text != "" {
		p := unsafe.StringData(q.Text)
		pin.Pin(p)
		c.text, c.text_len, c.isl_tokens = (*C.char)(unsafe.Pointer(p)), C.size_t(len(q.Text)), C.uint32_t(q.ISLTokens)
	}
	if q.OverlapScoreWeight != nil {
		c.overlap_score_weight = C.double(*q.OverlapScoreWeight)
		c.overrides |= C.WSEL_ROUTE_SET_WEIGHT
	}
	if q.Temperature != nil {
		c.temperature = C.double(*q.Temperature)
		c.overrides |= C.WSEL_ROUTE_SET_TEMPERATURE
	}
	if q.Builtin {
		c.overrides |= C.WSEL_ROUTE_BUILTIN
	}
	if q.DeferHistory {
		c.overrides |= C.WSEL_ROUTE_DEFER_HISTORY
	}
	var res C.wsel_route_result
	if err := r.call(func() C.int32_t { return C.wsel_router_route(r.ptr, &c, &res) }); err != nil {
		return RouteResult{}, err
	}
	return RouteResult{RequestID: uint64(res.request_id), WorkerID: uint64(res.worker_id),
		DPRank: uint32(res.dp_rank), Fallback: res.answer == C.WSEL_ANSWER_FALLBACK,
		NumBlocks: uint32(res.num_blocks), OverlapBlocks: uint32(res.overlap_blocks),
		Address: C.GoString(&res.address[0])}, nil
}

// Flush records the history a DeferHistory route left waiting.
func (r *Router) Flush() {
	_ = r.call(func() C.int32_t { C.wsel_router_flush(r.ptr); return 0 })
}

// FirstToken: the request's prefill leaves the rank's backlog.
func (r *Router) FirstToken(requestID uint64) error {
	return r.call(func() C.int32_t { return C.wsel_router_first_token(r.ptr, C.uint64_t(requestID)) })
}

// Finished: the request ended; its load leaves the rank and the policy
// is told its outcome.
func (r *Router) Finished(requestID uint64, f Finish) error {
	info := C.wsel_router_finish{struct_size: C.sizeof_wsel_router_finish,
		output_tokens: C.uint32_t(f.OutputTokens), ttft_us: C.uint64_t(f.TTFTUS), e2e_us: C.uint64_t(f.E2EUS)}
	if f.Failed {
		info.flags |= C.WSEL_ROUTER_FINISH_FAILED
	}
	if f.CachedTokens != nil {
		info.flags |= C.WSEL_ROUTER_FINISH_CACHED_KNOWN
		info.cached_tokens = C.uint32_t(*f.CachedTokens)
	}
	return r.call(func() C.int32_t { return C.wsel_router_finished_ex(r.ptr, C.uint64_t(requestID), &info) })
}

// ApplyKVMessage applies one KV event message (topic, sequence, batch).
func (r *Router) ApplyKVMessage(workerID uint64, dpRank uint32, frames [][]byte) error {
	n := len(frames)
	ptrs := (*unsafe.Pointer)(C.calloc(C.size_t(n+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	sizes := (*C.size_t)(C.calloc(C.size_t(n+1), C.sizeof_size_t))
	defer C.free(unsafe.Pointer(ptrs))
	defer C.free(unsafe.Pointer(sizes))
	var pin runtime.Pinner
	defer pin.Unpin()
	pl, sl := unsafe.Slice(ptrs, n+1), unsafe.Slice(sizes, n+1)
	for i, f := range frames {
		if len(f) > 0 {
			pin.Pin(&f[0])
			pl[i] = unsafe.Pointer(&f[0])
		}
		sl[i] = C.size_t(len(f))
	}
	return r.call(func() C.int32_t {
		return C.wsel_router_apply_kv_message(r.ptr, C.uint64_t(workerID), C.uint32_t(dpRank), ptrs, sizes, C.uint32_t(n))
	})
}

// Counters is a snapshot of the router's counters.
func (r *Router) Counters() RouterCounters {
	var c C.wsel_router_counters
	_ = r.call(func() C.int32_t { C.wsel_router_read_counters(r.ptr, &c); return 0 })
	out := RouterCounters{Routes: uint64(c.routes), PluginAnswers: uint64(c.plugin_answers),
		Fallbacks: uint64(c.fallbacks), NoCandidate: uint64(c.no_candidate),
		PromptBlocks: uint64(c.prompt_blocks), OverlapBlocks: uint64(c.overlap_blocks),
		KVMessages: uint64(c.kv_messages), KVBlocksStored: uint64(c.kv_blocks_stored),
		KVBlocksRemoved: uint64(c.kv_blocks_removed), KVCleared: uint64(c.kv_cleared),
		KVSeqGaps: uint64(c.kv_seq_gaps), KVSkipped: map[string]uint64{},
		IndexBlocks: uint64(c.index_blocks), IndexEntries: uint64(c.index_entries),
		IndexEvictions: uint64(c.index_evictions), IndexBytes: uint64(c.index_bytes),
		Epoch: uint64(c.epoch), BuiltinRoutes: uint64(c.builtin_routes)}
	for i := 0; i < C.WSEL_KV_SKIP_REASONS; i++ {
		if c.kv_skipped[i] != 0 {
			out.KVSkipped[C.GoString(C.wsel_router_kv_skip_name(C.uint32_t(i)))] = uint64(c.kv_skipped[i])
		}
	}
	return out
}

// KVCPU is the CPU time KV events have cost so far.
func (r *Router) KVCPU() (KVCPU, error) {
	k := C.wsel_router_kv_cpu{struct_size: C.sizeof_wsel_router_kv_cpu}
	err := r.call(func() C.int32_t { return C.wsel_router_read_kv_cpu(r.ptr, &k) })
	return KVCPU{uint64(k.messages), uint64(k.decode_ns), uint64(k.apply_ns)}, err
}

// Ranks lists every row, canonical order, as the next route would see it.
func (r *Router) Ranks() []RankInfo {
	if r.enter() != nil {
		return nil
	}
	defer r.life.RUnlock()
	n := C.wsel_router_read_ranks(r.ptr, nil, 0)
	for {
		buf := make([]C.wsel_router_rank_info, n+1)
		got := C.wsel_router_read_ranks(r.ptr, &buf[0], n)
		if got <= n {
			out := make([]RankInfo, got)
			for i := range out {
				b := buf[i]
				out[i] = RankInfo{uint64(b.worker_id), uint32(b.dp_rank), uint32(b.active_requests),
					uint64(b.active_prefill_tokens), uint64(b.active_blocks), uint64(b.cached_blocks),
					uint32(b.flags)}
			}
			return out
		}
		n = got
	}
}

// HashTokens is Dynamo's chained XXH3 hash of each full block of tokens.
func HashTokens(tokens []uint32, blockSize uint32) []uint64 {
	if blockSize == 0 || len(tokens) < int(blockSize) {
		return nil
	}
	out := make([]uint64, len(tokens)/int(blockSize))
	got := C.wsel_router_hash_tokens((*C.uint32_t)(unsafe.Pointer(&tokens[0])), C.uint32_t(len(tokens)),
		C.uint32_t(blockSize), (*C.uint64_t)(unsafe.Pointer(&out[0])), C.uint32_t(len(out)))
	return out[:got]
}

// HashText is the same over chunk-byte chunks of text.
func HashText(text string, chunk uint32) []uint64 {
	if chunk == 0 || len(text) < int(chunk) {
		return nil
	}
	out := make([]uint64, len(text)/int(chunk))
	b := []byte(text)
	got := C.wsel_router_hash_text((*C.char)(unsafe.Pointer(&b[0])), C.size_t(len(b)), C.uint32_t(chunk),
		(*C.uint64_t)(unsafe.Pointer(&out[0])), C.uint32_t(len(out)))
	return out[:got]
}

// KVSkipName names a WSEL_KV_SKIP_* reason.
func KVSkipName(reason uint32) string {
	return C.GoString(C.wsel_router_kv_skip_name(C.uint32_t(reason)))
}
