// SPDX-License-Identifier: Apache-2.0

package wsel

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func plugin(t *testing.T, name string) string {
	dir := os.Getenv("WSEL_PLUGIN_DIR")
	if dir == "" {
		t.Skip("WSEL_PLUGIN_DIR (the installed plugins) is not set")
	}
	return filepath.Join(dir, name+".so")
}

// Row 2 (worker 11, rank 0) is the unique cheapest.
var ranks = []RankState{{WorkerID: 10, ActiveBlocks: 50}, {WorkerID: 10, DPRank: 1, ActiveBlocks: 40},
	{WorkerID: 11, ActiveBlocks: 5}}

func newHost(t *testing.T) *Host {
	h, err := NewHost(HostOptions{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func selectOnce(t *testing.T, h *Host, id uint64) (Choice, *Table) {
	req, err := h.Request(RequestSpec{RequestID: id, ISLTokens: 256, BlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer req.Free()
	table, err := NewTable(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := table.Build(req, ranks, 1); err != nil {
		t.Fatal(err)
	}
	c, err := h.Select(req, table)
	if err != nil {
		t.Fatal(err)
	}
	return c, table
}

func TestRankStateMatchesC(t *testing.T) {
	g, c := rankStateLayout()
	if !reflect.DeepEqual(g, c) {
		t.Fatalf("RankState layout %v, wsel_rank_state %v", g, c)
	}
}

func TestBuiltinPolicyAnswersBeforeAnySwitch(t *testing.T) {
	h := newHost(t)
	c, _ := selectOnce(t, h, 1)
	if !c.Fallback || c.WorkerID != 11 || h.PolicyName() != "builtin" {
		t.Fatalf("got %+v, policy %s", c, h.PolicyName())
	}
	if got := h.Counters().FallbackByReason; got["no_policy"] != 1 {
		t.Fatalf("fallbacks %v", got)
	}
}

func TestSwitchByPathMakesThePluginAnswerAndExplain(t *testing.T) {
	h := newHost(t)
	if err := h.Switch(plugin(t, "softmax"), `{"temperature": 0}`); err != nil {
		t.Fatal(err)
	}
	c, table := selectOnce(t, h, 2)
	if c.Fallback || c.Row != 2 || c.Reason != 1 || c.Score == nil || *c.Score != table.Cost(2) {
		t.Fatalf("got %+v", c)
	}
	k := h.Counters()
	if k.Selects != 1 || k.PluginAnswers != 1 || k.Switches != 1 || k.AnswersByReason[1] != 1 {
		t.Fatalf("counters %+v", k)
	}
}

func TestRefusedSwitchCarriesTheHostsMessage(t *testing.T) {
	h := newHost(t)
	p := plugin(t, "softmax")
	err := h.Switch(p, `{"no_such_key": 1}`)
	if !Is(err, "WSEL_ECONFIG") || !strings.Contains(err.Error(), "no_such_key") {
		t.Fatalf("got %v", err)
	}
	if err := h.Switch(filepath.Join(filepath.Dir(p), "missing.so"), ""); err == nil ||
		!strings.Contains(err.Error(), "missing.so") {
		t.Fatalf("got %v", err)
	}
	if h.Counters().FailedSwitches != 2 {
		t.Fatal("failed switches not counted")
	}
}

func TestTableOutOfOrderNamesTheRank(t *testing.T) {
	h := newHost(t)
	req, _ := h.Request(RequestSpec{RequestID: 3, ISLTokens: 64})
	table, _ := NewTable(2)
	defer table.Free()
	err := table.Build(req, []RankState{{WorkerID: 2}, {WorkerID: 1}}, 1)
	if !Is(err, "WSEL_ETABLE") || !strings.Contains(err.Error(), "ranks[1]") {
		t.Fatalf("got %v", err)
	}
}

func TestOutcomesAndChildrenReachThePolicy(t *testing.T) {
	h := newHost(t)
	sm := plugin(t, "softmax")
	if err := h.Switch(filepath.Join(filepath.Dir(sm), "pipeline.so"),
		`{"scorers": [{"path": "`+sm+`"}]}`); err != nil {
		t.Fatal(err)
	}
	kids, err := h.ChildCounters()
	if err != nil || len(kids) == 0 || kids[0].Name != "softmax" {
		t.Fatalf("children %+v %v", kids, err)
	}
	c, table := selectOnce(t, h, 4)
	h.RequestFinished(4, c.WorkerID, c.DPRank)
	h.RequestOutcome(Outcome{RequestID: 4, WorkerID: c.WorkerID, DPRank: c.DPRank, TTFTUS: 900})
	h.TopologyChanged(table)
}

func TestGoroutinesSelectWhileTheHostSwitches(t *testing.T) {
	h := newHost(t)
	p := plugin(t, "softmax")
	if err := h.Switch(p, ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for k := 0; k < 4; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			table, _ := NewTable(4)
			defer table.Free()
			for i := 0; i < 300; i++ {
				req, _ := h.Request(RequestSpec{RequestID: uint64(k*1000 + i), ISLTokens: 256, BlockSize: 16})
				if err := table.Build(req, ranks, 1); err != nil {
					t.Error(err)
					return
				}
				if c, err := h.Select(req, table); err != nil || c.Row != 2 {
					t.Errorf("select: %+v %v", c, err)
				}
				req.Free()
			}
		}(k)
	}
	for i := 0; i < 5; i++ {
		if err := h.Switch(p, `{"temperature": 0}`); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if n := h.Counters().Selects; n != 1200 {
		t.Fatalf("selects %d", n)
	}
}

func TestRouterRoutesAccountsAndRemembers(t *testing.T) {
	h := newHost(t)
	if err := h.Switch(plugin(t, "softmax"), ""); err != nil {
		t.Fatal(err)
	}
	r, err := NewRouter(h, RouterOptions{BlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); !Is(err, "WSEL_ESTATE") {
		t.Fatalf("host closed under its router: %v", err)
	}
	defer r.Close()
	if err := r.AddWorker(1, "127.0.0.1:8001", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.AddWorker(2, "127.0.0.1:8002", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.AddWorker(1, "x", 1, nil); !Is(err, "WSEL_ESTATE") {
		t.Fatalf("duplicate worker: %v", err)
	}
	prompt := make([]uint32, 128)
	for i := range prompt {
		prompt[i] = uint32(i)
	}
	first, err := r.Route(Route{Tokens: prompt})
	if err != nil || first.NumBlocks != 8 || first.Fallback {
		t.Fatalf("route %+v %v", first, err)
	}
	busy := 0
	for _, k := range r.Ranks() {
		busy += int(k.ActiveRequests)
	}
	if busy != 1 || r.Epoch() != 3 {
		t.Fatalf("ranks %+v", r.Ranks())
	}
	if err := r.FirstToken(first.RequestID); err != nil {
		t.Fatal(err)
	}
	if err := r.Finished(first.RequestID, Finish{OutputTokens: 5}); err != nil {
		t.Fatal(err)
	}
	again, _ := r.Route(Route{Tokens: prompt})
	if again.WorkerID != first.WorkerID || again.DPRank != first.DPRank || again.OverlapBlocks != 8 {
		t.Fatalf("history: %+v then %+v", first, again)
	}
	zero := 0.0
	if res, err := r.Route(Route{Text: strings.Repeat("hello ", 50), Temperature: &zero, Builtin: true}); err != nil || !res.Fallback {
		t.Fatalf("text route %+v %v", res, err)
	}
	_ = r.DrainWorker(2)
	_ = r.SetWorkerAvailable(1, false)
	if _, err := r.Route(Route{Tokens: prompt}); !Is(err, "WSEL_ENOCANDIDATE") {
		t.Fatalf("got %v", err)
	}
	if err := r.ApplyKVMessage(1, 0, [][]byte{[]byte("kv")}); err == nil {
		t.Fatal("a one-frame message was applied")
	}
	k := r.Counters()
	if k.Routes != 3 || k.BuiltinRoutes != 1 || k.NoCandidate != 1 || k.KVSkipped["frames"] != 1 {
		t.Fatalf("counters %+v", k)
	}
	if cpu, err := r.KVCPU(); err != nil || cpu.Messages < 1 {
		t.Fatalf("kv cpu %+v %v", cpu, err)
	}
}

func TestHashesAreChainedPerFullBlock(t *testing.T) {
	toks := make([]uint32, 40)
	for i := range toks {
		toks[i] = uint32(i)
	}
	h := HashTokens(toks, 16)
	if len(h) != 2 || !reflect.DeepEqual(h, HashTokens(toks[:32], 16)) {
		t.Fatalf("hashes %v", h)
	}
	if len(HashText(strings.Repeat("x", 100), 32)) != 3 || KVSkipName(0) != "frames" {
		t.Fatal("text hashes or skip names")
	}
}

func TestClosedHostRefusesCalls(t *testing.T) {
	h, _ := NewHost(HostOptions{})
	_ = h.Close()
	_ = h.Close()
	if _, err := h.Request(RequestSpec{RequestID: 1}); err != ErrClosed {
		t.Fatalf("got %v", err)
	}
}

func TestTheLibrariesLoadedAreTheInstalledOnes(t *testing.T) {
	prefix := os.Getenv("WSEL_PREFIX")
	if prefix == "" {
		t.Skip("WSEL_PREFIX (the installed prefix) is not set")
	}
	real, err := filepath.EvalSymlinks(prefix)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(f[5], "libwsel-") {
			continue
		}
		p, _ := filepath.EvalSymlinks(f[5])
		if !strings.HasPrefix(p, real+string(os.PathSeparator)) {
			t.Fatalf("%s is not under %s", f[5], real)
		}
		seen[strings.SplitN(filepath.Base(p), ".so", 2)[0]] = true
	}
	if !seen["libwsel-host"] || !seen["libwsel-router"] {
		t.Fatalf("loaded %v", seen)
	}
}
