// SPDX-License-Identifier: Apache-2.0

// Package synth makes synthetic llm-d endpoints (metadata, scraped metrics,
// the prefix producer's match) and the wsel rank each one stands for, for
// the adapter's test and benchmark.
package synth

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/types"
	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	fwksched "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
	attrprefix "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/attribute/prefix"

	"wsel"
)

// Namespace of every synthetic pod.
const Namespace = "llm"

// Spec is one endpoint: a pod's target port (rank) and its state.
type Spec struct {
	Pod              string
	Rank             int
	Running, Waiting int
	KVUsage          float64 // fraction, as vLLM's gpu_cache_usage_perc
	KVBlocks         int     // vLLM's num_gpu_blocks
	Match            int     // prefix blocks the producer matched
}

// Request is one request's size as the prefix producer saw it.
type Request struct {
	ID                   string
	TotalBlocks, BlockSz int
}

// Random makes pods x ranks endpoints with random load and matches.
func Random(rng *rand.Rand, pods, ranks int, req Request) []Spec {
	var out []Spec
	for p := 0; p < pods; p++ {
		for r := 0; r < ranks; r++ {
			out = append(out, Spec{Pod: fmt.Sprintf("vllm-%d", p), Rank: r,
				Running: rng.IntN(16), Waiting: rng.IntN(4), KVUsage: rng.Float64(),
				KVBlocks: 2048, Match: rng.IntN(req.TotalBlocks + 1)})
		}
	}
	return out
}

// Endpoints are the scheduler's candidates for specs, named as the EPP's
// datastore names a pod's target ports ("<pod>-rank-<i>").
func Endpoints(specs []Spec, req Request) []fwksched.Endpoint {
	eps := make([]fwksched.Endpoint, len(specs))
	now := time.Now()
	for i, s := range specs {
		meta := &fwkdl.EndpointMetadata{
			NamespacedName: types.NamespacedName{Namespace: Namespace, Name: fmt.Sprintf("%s-rank-%d", s.Pod, s.Rank)},
			PodName:        s.Pod, Address: fmt.Sprintf("10.0.0.%d", i+1), Port: fmt.Sprint(8000 + s.Rank)}
		m := fwkdl.NewMetrics()
		m.RunningRequestsSize, m.WaitingQueueSize = s.Running, s.Waiting
		m.KVCacheUsagePercent, m.CacheNumBlocks, m.UpdateTime = s.KVUsage, s.KVBlocks, now
		attrs := fwkdl.NewAttributes()
		attrs.Put(attrprefix.PrefixCacheMatchInfoKey,
			attrprefix.NewPrefixCacheMatchInfo(s.Match, req.TotalBlocks, req.BlockSz))
		eps[i] = fwksched.NewEndpoint(meta, m, attrs)
	}
	return eps
}

func hash64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// WorkerID is the wsel worker a pod stands for.
func WorkerID(pod string) uint64 { return hash64(Namespace + "/" + pod) }

// Rank is the wsel rank state s stands for (docs/integrations.md's mapping).
func Rank(s Spec, req Request) wsel.RankState {
	isl := uint64(req.TotalBlocks * req.BlockSz)
	return wsel.RankState{WorkerID: WorkerID(s.Pod), DPRank: uint32(s.Rank), OverlapBlocks: uint32(s.Match),
		ActiveRequests: uint32(s.Running + s.Waiting), ActivePrefillTokens: uint64(s.Waiting) * isl,
		KVCapacityBlocks: uint64(s.KVBlocks), ActiveBlocks: uint64(math.Round(s.KVUsage * float64(s.KVBlocks)))}
}

// RequestSpec is the wsel request req stands for.
func RequestSpec(req Request) wsel.RequestSpec {
	return wsel.RequestSpec{RequestID: hash64(req.ID), ISLTokens: uint32(req.TotalBlocks * req.BlockSz),
		BlockSize: uint32(req.BlockSz)}
}
