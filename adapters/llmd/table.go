// SPDX-License-Identifier: Apache-2.0

package llmd

import (
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"

	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	fwksched "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
	attrprefix "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/datalayer/attribute/prefix"

	"wsel"
)

// rankSuffix is how the EPP's datastore names the endpoint of each
// InferencePool target port of a pod: "<pod>-rank-<index>".
const rankSuffix = "-rank-"

func hash64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// workerRank maps an endpoint onto (worker id, dp rank): the worker is the
// pod (namespace/pod name, hashed, so stable across requests), the rank is
// the index of its target port. An endpoint without the suffix is rank 0.
func workerRank(m *fwkdl.EndpointMetadata) (uint64, uint32) {
	name, rank := m.NamespacedName.Name, uint32(0)
	if i := strings.LastIndex(name, rankSuffix); i >= 0 {
		if n, err := strconv.ParseUint(name[i+len(rankSuffix):], 10, 32); err == nil {
			name, rank = name[:i], uint32(n)
		}
	}
	if m.PodName != "" {
		name = m.PodName
	}
	return hash64(m.NamespacedName.Namespace + "/" + name), rank
}

// prefixInfo is the prefix producer's match on an endpoint, if any.
func prefixInfo(ep fwksched.Endpoint) *attrprefix.PrefixCacheMatchInfo {
	v, ok := ep.Get(attrprefix.PrefixCacheMatchInfoKey)
	if !ok {
		return nil
	}
	p, _ := v.(*attrprefix.PrefixCacheMatchInfo)
	return p
}

// requestSpec is the wsel request for an llm-d request: its size in tokens
// and blocks from the prefix producer's match when there is one (the
// producer's blocks are the table's blocks), else estimated.
func (s *Scorer) requestSpec(req *fwksched.LLMRequest, eps []fwksched.Endpoint) wsel.RequestSpec {
	spec := wsel.RequestSpec{BlockSize: s.params.BlockSize, OverlapScoreWeight: s.params.OverlapScoreWeight}
	if req != nil {
		spec.RequestID = hash64(req.RequestId)
		if h := s.params.AffinityHeader; h != "" && req.Headers[h] != "" {
			spec.AffinityKey = hash64(req.Headers[h])
		}
	}
	for _, ep := range eps {
		if p := prefixInfo(ep); p != nil && p.BlockSizeTokens() > 0 {
			spec.BlockSize = uint32(p.BlockSizeTokens())
			spec.ISLTokens = uint32(p.TotalBlocks() * p.BlockSizeTokens())
			return spec
		}
	}
	spec.ISLTokens = estimateTokens(req)
	return spec
}

// estimateTokens is the prompt's length in tokens: the tokenizer's when it
// ran, else four bytes a token.
func estimateTokens(req *fwksched.LLMRequest) uint32 {
	switch {
	case req == nil:
		return 0
	case req.TokenizedPrompt != nil:
		return uint32(len(req.TokenizedPrompt.TokenIDs))
	case req.RequestSizeBytes > 0:
		return uint32(req.RequestSizeBytes / 4)
	case req.Body != nil:
		return uint32(len(req.Body.PromptText()) / 4)
	}
	return 0
}

// rankState maps one endpoint's metrics onto a wsel rank (the mapping
// docs/integrations.md states, with its approximations).
func (s *Scorer) rankState(ep fwksched.Endpoint, spec *wsel.RequestSpec) wsel.RankState {
	w, d := workerRank(ep.GetMetadata())
	r := wsel.RankState{WorkerID: w, DPRank: d}
	if p := prefixInfo(ep); p != nil && p.MatchBlocks() > 0 {
		r.OverlapBlocks = uint32(p.MatchBlocks())
	}
	m := ep.GetMetrics()
	if m == nil || m.UpdateTime.IsZero() { // never scraped
		r.Flags = wsel.RowNoLoad
		return r
	}
	r.ActiveRequests = uint32(m.RunningRequestsSize + m.WaitingQueueSize)
	r.ActivePrefillTokens = uint64(m.WaitingQueueSize) * uint64(spec.ISLTokens)
	switch {
	case m.CacheNumBlocks > 0:
		r.KVCapacityBlocks = uint64(m.CacheNumBlocks)
	case m.KvCacheMaxTokenCapacity > 0 && spec.BlockSize > 0:
		r.KVCapacityBlocks = uint64(m.KvCacheMaxTokenCapacity) / uint64(spec.BlockSize)
	default:
		r.KVCapacityBlocks = s.params.KVCapacityBlocks
	}
	usage := math.Min(math.Max(m.KVCacheUsagePercent, 0), 1)
	r.ActiveBlocks = uint64(math.Round(usage * float64(r.KVCapacityBlocks)))
	if s.params.BusyQueue > 0 && m.WaitingQueueSize >= s.params.BusyQueue {
		r.Flags = wsel.RowBusy
	}
	return r
}

// candidates is the table's input for eps: rank states in canonical order
// (worker, then rank) and, for each, the endpoint it came from.
type candidates struct {
	ranks []wsel.RankState
	eps   []fwksched.Endpoint
}

func (c *candidates) Len() int { return len(c.ranks) }
func (c *candidates) Less(i, j int) bool {
	a, b := &c.ranks[i], &c.ranks[j]
	return a.WorkerID < b.WorkerID || a.WorkerID == b.WorkerID && a.DPRank < b.DPRank
}
func (c *candidates) Swap(i, j int) {
	c.ranks[i], c.ranks[j] = c.ranks[j], c.ranks[i]
	c.eps[i], c.eps[j] = c.eps[j], c.eps[i]
}

func (s *Scorer) candidates(eps []fwksched.Endpoint, spec *wsel.RequestSpec) *candidates {
	c := &candidates{ranks: make([]wsel.RankState, len(eps)), eps: append([]fwksched.Endpoint(nil), eps...)}
	for i, ep := range c.eps {
		c.ranks[i] = s.rankState(ep, spec)
	}
	sort.Sort(c)
	return c
}
