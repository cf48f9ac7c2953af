// SPDX-License-Identifier: Apache-2.0

// Command wsel-route-example PLUGIN_DIR routes two requests with the
// bundled softmax policy through libwsel-router, then selects on a table
// of its own (docs/integrations.md).
package main

import (
	"fmt"
	"log"
	"os"

	"wsel"
)

func main() {
	plugins := os.Args[1]
	host, err := wsel.NewHost(wsel.HostOptions{Seed: 42})
	if err != nil {
		log.Fatal(err)
	}
	defer host.Close()
	if err := host.Switch(plugins+"/softmax.so", `{"temperature": 0}`); err != nil {
		log.Fatal(err)
	}

	router, err := wsel.NewRouter(host, wsel.RouterOptions{BlockSize: 16})
	if err != nil {
		log.Fatal(err)
	}
	defer router.Close()
	_ = router.AddWorker(1, "127.0.0.1:8001", 2, nil)
	_ = router.AddWorker(2, "127.0.0.1:8002", 1, nil)
	prompt := make([]uint32, 128)
	for i := range prompt {
		prompt[i] = uint32(i)
	}
	for i := 0; i < 2; i++ {
		res, err := router.Route(wsel.Route{Tokens: prompt})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("to", res.Address, "rank", res.DPRank, "cached", res.OverlapBlocks)
		_ = router.FirstToken(res.RequestID)
		_ = router.Finished(res.RequestID, wsel.Finish{OutputTokens: 32})
	}

	// Or without the router: your own table of ranks, the host selects.
	req, _ := host.Request(wsel.RequestSpec{RequestID: 7, ISLTokens: 512, BlockSize: 16})
	defer req.Free()
	table, _ := wsel.NewTable(8)
	defer table.Free()
	if err := table.Build(req, []wsel.RankState{{WorkerID: 1, ActiveBlocks: 30},
		{WorkerID: 1, DPRank: 1, ActiveBlocks: 2}}, 1); err != nil {
		log.Fatal(err)
	}
	c, err := host.Select(req, table)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("row", c.Row, "worker", c.WorkerID, "rank", c.DPRank, "reason", c.Reason, "score", *c.Score)
}
