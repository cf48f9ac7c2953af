// SPDX-License-Identifier: Apache-2.0

// Command wsel-llmd-bench PLUGIN PODS ITERATIONS: the cost of one pick of
// the llm-d adapter over PODS endpoints (one rank each), each call timed
// with time.Now after a tenth as many to warm up. Prints, in ns, "name p50
// p99" for:
//
//	select    Host.Select over the table already built (the cgo crossing)
//	choose    Scorer.Choose: endpoints mapped to ranks, request, table, select
//	schedule  llm-d's scheduler: a profile of the wsel scorer and picker
//
// adapters/llmd/bench.sh runs it beside bindings/bench's C loop.
package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"time"

	fwksched "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/profile"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/scheduling"

	"wsel"
	llmd "wsel-llmd"
	"wsel-llmd/internal/synth"
)

func die(err error) {
	fmt.Fprintln(os.Stderr, "wsel-llmd-bench:", err)
	os.Exit(1)
}

func measure(name string, iters int, call func()) {
	for i := 0; i < iters/10; i++ {
		call()
	}
	ns := make([]int64, iters)
	for i := range ns {
		t0 := time.Now()
		call()
		ns[i] = time.Since(t0).Nanoseconds()
	}
	sort.Slice(ns, func(a, b int) bool { return ns[a] < ns[b] })
	fmt.Printf("%s %d %d\n", name, ns[iters/2], ns[iters*99/100])
}

func main() {
	if len(os.Args) != 4 {
		die(fmt.Errorf("usage: wsel-llmd-bench PLUGIN PODS ITERATIONS"))
	}
	pods, _ := strconv.Atoi(os.Args[2])
	iters, _ := strconv.Atoi(os.Args[3])
	scorer, err := llmd.NewScorer("wsel", llmd.Parameters{Policy: os.Args[1]})
	if err != nil {
		die(err)
	}
	req := synth.Request{ID: "bench", TotalBlocks: 16, BlockSz: 64}
	specs := synth.Random(rand.New(rand.NewPCG(1, 2)), pods, 1, req)
	eps := synth.Endpoints(specs, req)
	llmReq := &fwksched.LLMRequest{RequestId: req.ID}

	host := scorer.Host()
	wreq, _ := host.Request(synth.RequestSpec(req))
	table, _ := wsel.NewTable(uint32(pods))
	ranks := make([]wsel.RankState, pods)
	for i, s := range specs {
		ranks[i] = synth.Rank(s, req)
	}
	sort.Slice(ranks, func(i, j int) bool { return ranks[i].WorkerID < ranks[j].WorkerID })
	if err := table.Build(wreq, ranks, 1); err != nil {
		die(err)
	}
	measure("select", iters, func() { _, _ = host.Select(wreq, table) })
	measure("choose", iters, func() { _, _, _ = scorer.Choose(llmReq, eps) })

	prof := scheduling.NewSchedulerProfile()
	if err := prof.AddPlugins(scheduling.NewWeightedScorer(scorer, 1),
		llmd.NewPicker("p", llmd.PickerParameters{Scorer: "wsel"})); err != nil {
		die(err)
	}
	s := scheduling.NewSchedulerWithConfig(scheduling.NewSchedulerConfig(profile.NewSingleProfileHandler(),
		map[string]fwksched.SchedulerProfile{"default": prof}))
	ctx := context.Background()
	measure("schedule", iters, func() { _, _ = s.Schedule(ctx, llmReq, eps) })
}
