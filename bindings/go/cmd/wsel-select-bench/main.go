// SPDX-License-Identifier: Apache-2.0

// Command wsel-select-bench PLUGIN ROWS ITERATIONS: Host.Select through
// the Go binding, each call timed with time.Now; prints "go p50_ns
// p99_ns" (bindings/bench/run.sh).
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"wsel"
)

func main() {
	rows, _ := strconv.Atoi(os.Args[2])
	iters, _ := strconv.Atoi(os.Args[3])
	host, err := wsel.NewHost(wsel.HostOptions{})
	if err == nil {
		err = host.Switch(os.Args[1], "")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ranks := make([]wsel.RankState, rows)
	for i := range ranks {
		ranks[i] = wsel.RankState{WorkerID: uint64(i), ActiveBlocks: uint64(i*7919) % 1000}
	}
	req, _ := host.Request(wsel.RequestSpec{RequestID: 1, ISLTokens: 1024})
	table, _ := wsel.NewTable(uint32(rows))
	if err := table.Build(req, ranks, 1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i := 0; i < iters/10; i++ {
		_, _ = host.Select(req, table)
	}
	ns := make([]int64, iters)
	for i := range ns {
		t0 := time.Now()
		_, _ = host.Select(req, table)
		ns[i] = time.Since(t0).Nanoseconds()
	}
	sort.Slice(ns, func(a, b int) bool { return ns[a] < ns[b] })
	fmt.Printf("go %d %d\n", ns[iters/2], ns[iters*99/100])
}
