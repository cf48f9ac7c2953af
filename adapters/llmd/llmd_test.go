// SPDX-License-Identifier: Apache-2.0

package llmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
	fwksched "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/picker"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/plugins/scheduling/profile"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/scheduling"

	"wsel"
	llmd "wsel-llmd"
	"wsel-llmd/internal/synth"
)

func init() {
	// What the EPP runner and llm-d's main do before reading the config.
	llmd.Register()
	plugin.Register(profile.SingleProfileHandlerType, profile.SingleProfileHandlerFactory)
	plugin.Register(picker.MaxScorePickerType, picker.MaxScorePickerFactory)
}

func policy(t *testing.T, name string) string {
	dir := os.Getenv("WSEL_PLUGIN_DIR")
	if dir == "" {
		t.Skip("WSEL_PLUGIN_DIR (the installed plugins) is not set")
	}
	return filepath.Join(dir, name+".so")
}

// instantiate calls the registry's factory as the config loader does for
// a plugins entry {type, name, parameters}.
func instantiate(t *testing.T, typ, name, params string) plugin.Plugin {
	f, ok := plugin.Registry[typ]
	if !ok {
		t.Fatalf("plugin type %q is not registered", typ)
	}
	p, err := f(name, json.RawMessage(params), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newScheduler is llm-d's scheduler with one profile: the wsel scorer
// (weight 1) and pickerType.
func newScheduler(t *testing.T, scorerParams, pickerType string) (*scheduling.Scheduler, *llmd.Scorer) {
	scorer := instantiate(t, llmd.ScorerType, "wsel", scorerParams).(*llmd.Scorer)
	t.Cleanup(func() { _ = scorer.Close() })
	pickerParams := `{"scorer": "wsel"}`
	if pickerType != llmd.PickerType {
		pickerParams = `{"maxNumOfEndpoints": 1}`
	}
	prof := scheduling.NewSchedulerProfile()
	if err := prof.AddPlugins(scheduling.NewWeightedScorer(scorer, 1),
		instantiate(t, pickerType, "picker", pickerParams)); err != nil {
		t.Fatal(err)
	}
	handler := instantiate(t, profile.SingleProfileHandlerType, "handler", "").(fwksched.ProfileHandler)
	cfg := scheduling.NewSchedulerConfig(handler, map[string]fwksched.SchedulerProfile{"default": prof})
	return scheduling.NewSchedulerWithConfig(cfg), scorer
}

func params(path, config string) string {
	if config == "" {
		return fmt.Sprintf(`{"policy": %q, "seed": 11}`, path)
	}
	return fmt.Sprintf(`{"policy": %q, "config": %s, "seed": 11}`, path, config)
}

// reference is what the wsel policy answers for the same table, asked
// through the binding directly: the endpoint's name.
type reference struct {
	host *wsel.Host
}

func newReference(t *testing.T, path, config string) *reference {
	h, err := wsel.NewHost(wsel.HostOptions{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := h.Switch(path, config); err != nil {
		t.Fatal(err)
	}
	return &reference{host: h}
}

func (r *reference) pick(t *testing.T, specs []synth.Spec, req synth.Request) string {
	ranks := make([]wsel.RankState, len(specs))
	for i, s := range specs {
		ranks[i] = synth.Rank(s, req)
	}
	sort.Slice(ranks, func(i, j int) bool {
		a, b := ranks[i], ranks[j]
		return a.WorkerID < b.WorkerID || a.WorkerID == b.WorkerID && a.DPRank < b.DPRank
	})
	wreq, err := r.host.Request(synth.RequestSpec(req))
	if err != nil {
		t.Fatal(err)
	}
	defer wreq.Free()
	table, err := wsel.NewTable(uint32(len(ranks)))
	if err != nil {
		t.Fatal(err)
	}
	defer table.Free()
	if err := table.Build(wreq, ranks, 1); err != nil {
		t.Fatal(err)
	}
	c, err := r.host.Select(wreq, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if synth.WorkerID(s.Pod) == c.WorkerID && uint32(s.Rank) == c.DPRank {
			return fmt.Sprintf("%s/%s-rank-%d", synth.Namespace, s.Pod, s.Rank)
		}
	}
	t.Fatalf("wsel chose worker %d rank %d, which no endpoint is", c.WorkerID, c.DPRank)
	return ""
}

func schedule(t *testing.T, s *scheduling.Scheduler, specs []synth.Spec, req synth.Request) string {
	llmReq := &fwksched.LLMRequest{RequestId: req.ID, TargetModel: "m"}
	res, err := s.Schedule(context.Background(), llmReq, synth.Endpoints(specs, req))
	if err != nil {
		t.Fatal(err)
	}
	eps := res.ProfileResults[res.PrimaryProfileName].TargetEndpoints
	if len(eps) != 1 {
		t.Fatalf("scheduler picked %d endpoints", len(eps))
	}
	return eps[0].GetMetadata().NamespacedName.String()
}

// run schedules n random requests over 4 pods of 2 DP ranks each and
// returns the picks, each checked against the reference's.
func run(t *testing.T, s *scheduling.Scheduler, ref *reference, n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 1))
	picks := make([]string, n)
	for i := range picks {
		req := synth.Request{ID: fmt.Sprintf("req-%d-%d", seed, i), TotalBlocks: 1 + rng.IntN(32), BlockSz: 16}
		specs := synth.Random(rng, 4, 2, req)
		picks[i] = schedule(t, s, specs, req)
		if want := ref.pick(t, specs, req); picks[i] != want {
			t.Fatalf("request %d: the scheduler picked %s, the wsel policy answers %s", i, picks[i], want)
		}
	}
	return picks
}

var policies = []struct{ name, config string }{
	{"softmax", `{"temperature": 0}`},
	{"softmax", `{"temperature": 2}`}, // sampled: the same draw from (seed, request id)
	{"llmd_default", ""},
	{"p2c", ""},
}

func TestSchedulerPicksWhatThePolicyAnswers(t *testing.T) {
	for _, pol := range policies {
		for _, pk := range []string{llmd.PickerType, picker.MaxScorePickerType} {
			t.Run(pol.name+pol.config+"/"+pk, func(t *testing.T) {
				path := policy(t, pol.name)
				s, scorer := newScheduler(t, params(path, pol.config), pk)
				run(t, s, newReference(t, path, pol.config), 200, 3)
				if c := scorer.Host().Counters(); c.PluginAnswers != 200 || c.Fallbacks != 0 {
					t.Fatalf("%d plugin answers, %d fallbacks of 200 selects", c.PluginAnswers, c.Fallbacks)
				}
			})
		}
	}
}

func TestSwitchingThePolicyByPathChangesPicks(t *testing.T) {
	cheapest, llmdDefault := policy(t, "softmax"), policy(t, "llmd_default")
	s, scorer := newScheduler(t, params(cheapest, `{"temperature": 0}`), llmd.PickerType)
	before := run(t, s, newReference(t, cheapest, `{"temperature": 0}`), 100, 5)
	if err := scorer.Switch(llmdDefault, ""); err != nil {
		t.Fatal(err)
	}
	after := run(t, s, newReference(t, llmdDefault, ""), 100, 5)
	differ := 0
	for i := range before {
		if before[i] != after[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("the same 100 requests were picked alike by softmax and llmd_default")
	}
	t.Logf("%d of 100 picks changed with the policy", differ)
}

func TestWselPickerOverridesOtherScorers(t *testing.T) {
	path := policy(t, "softmax")
	scorer := instantiate(t, llmd.ScorerType, "wsel", params(path, `{"temperature": 0}`)).(*llmd.Scorer)
	t.Cleanup(func() { _ = scorer.Close() })
	prof := scheduling.NewSchedulerProfile()
	// A second scorer that prefers the other endpoint with ten times the weight.
	if err := prof.AddPlugins(scheduling.NewWeightedScorer(scorer, 1),
		scheduling.NewWeightedScorer(contrary{}, 10), llmd.NewPicker("p", llmd.PickerParameters{Scorer: "wsel"})); err != nil {
		t.Fatal(err)
	}
	handler := profile.NewSingleProfileHandler()
	s := scheduling.NewSchedulerWithConfig(scheduling.NewSchedulerConfig(handler,
		map[string]fwksched.SchedulerProfile{"default": prof}))
	req := synth.Request{ID: "r", TotalBlocks: 4, BlockSz: 16}
	specs := []synth.Spec{{Pod: "busy", Running: 12, KVUsage: 0.9, KVBlocks: 100},
		{Pod: "idle", KVUsage: 0.1, KVBlocks: 100}}
	if got := schedule(t, s, specs, req); got != "llm/idle-rank-0" {
		t.Fatalf("picked %s, the wsel policy answers llm/idle-rank-0", got)
	}
}

// contrary scores the endpoint named busy 1.
type contrary struct{}

func (contrary) TypedName() plugin.TypedName {
	return plugin.TypedName{Type: "contrary", Name: "contrary"}
}
func (contrary) Category() fwksched.ScorerCategory { return fwksched.Distribution }
func (contrary) Score(_ context.Context, _ *fwksched.CycleState, _ *fwksched.LLMRequest,
	eps []fwksched.Endpoint) map[fwksched.Endpoint]float64 {
	out := map[fwksched.Endpoint]float64{}
	for _, ep := range eps {
		if ep.GetMetadata().PodName == "busy" {
			out[ep] = 1
		}
	}
	return out
}

func TestAMissingPolicyFailsTheFactoryNamingThePath(t *testing.T) {
	_, err := plugin.Registry[llmd.ScorerType]("w", json.RawMessage(`{"policy": "/nonexistent/p.so"}`), nil)
	if !wsel.Is(err, "WSEL_ENOENT") || !strings.Contains(err.Error(), "/nonexistent/p.so") {
		t.Fatalf("error %v", err)
	}
	if _, err := plugin.Registry[llmd.ScorerType]("w", json.RawMessage(`{}`), nil); err == nil {
		t.Fatal("a scorer without parameters.policy was created")
	}
}

func TestTheLibrariesLoadedAreTheInstalledOnes(t *testing.T) {
	prefix := os.Getenv("WSEL_PREFIX")
	if prefix == "" {
		t.Skip("WSEL_PREFIX (the installed prefix) is not set")
	}
	scorer, err := llmd.NewScorer("w", llmd.Parameters{Policy: policy(t, "softmax")})
	if err != nil {
		t.Fatal(err)
	}
	defer scorer.Close()
	real, err := filepath.EvalSymlinks(prefix)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(f[5], "libwsel-") {
			continue
		}
		if p, _ := filepath.EvalSymlinks(f[5]); !strings.HasPrefix(p, real+string(os.PathSeparator)) {
			t.Fatalf("%s is not under %s", f[5], real)
		}
		seen++
	}
	if seen == 0 {
		t.Fatal("no libwsel- library is mapped")
	}
}
