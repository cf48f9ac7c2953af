// SPDX-License-Identifier: Apache-2.0

package wsel

// #include <stddef.h>
// #include <wsel_router.h>
// static size_t wsel_go_rank_off(int i) {
//     static const size_t o[] = {offsetof(wsel_rank_state, worker_id),
//         offsetof(wsel_rank_state, dp_rank), offsetof(wsel_rank_state, overlap_blocks),
//         offsetof(wsel_rank_state, active_prefill_tokens),
//         offsetof(wsel_rank_state, active_blocks),
//         offsetof(wsel_rank_state, kv_capacity_blocks),
//         offsetof(wsel_rank_state, active_requests), offsetof(wsel_rank_state, flags)};
//     return o[i];
// }
import "C"

import "unsafe"

// rankStateLayout is RankState's (size, offsets) against wsel_rank_state's:
// Table.Build passes a []RankState to C as it is.
func rankStateLayout() (goLayout, cLayout []uintptr) {
	var r RankState
	goLayout = []uintptr{unsafe.Sizeof(r), unsafe.Offsetof(r.WorkerID), unsafe.Offsetof(r.DPRank),
		unsafe.Offsetof(r.OverlapBlocks), unsafe.Offsetof(r.ActivePrefillTokens),
		unsafe.Offsetof(r.ActiveBlocks), unsafe.Offsetof(r.KVCapacityBlocks),
		unsafe.Offsetof(r.ActiveRequests), unsafe.Offsetof(r.Flags)}
	cLayout = []uintptr{C.sizeof_wsel_rank_state}
	for i := 0; i < 8; i++ {
		cLayout = append(cLayout, uintptr(C.wsel_go_rank_off(C.int(i))))
	}
	return goLayout, cLayout
}
