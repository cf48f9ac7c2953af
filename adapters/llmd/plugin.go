// SPDX-License-Identifier: Apache-2.0

// Package llmd plugs a wsel policy, loaded by path through the Go binding,
// into llm-d's scheduler: the scheduling framework of the Gateway API
// Inference Extension (sigs.k8s.io/gateway-api-inference-extension,
// pkg/epp/framework) that llm-d's endpoint picker runs.
//
// Two plugin types, registered with the framework's plugin registry by
// Register (call it before the EPP runner parses its configuration, as
// llm-d's cmd/epp/main.go does for its own plugins):
//
//   - "wsel-scorer" (Scorer): maps the candidate endpoints onto a wsel
//     table, asks the policy to select, and scores the answer 1 and every
//     other endpoint 0. It also reports each request's outcome to the
//     policy (PreRequest, ResponseHeader, ResponseBody).
//   - "wsel-picker" (Picker): picks the endpoint the wsel scorer of its
//     profile chose, whatever the other scorers' weights; without one, the
//     highest score.
//
// Endpoints, metrics and the prefix producer's match map onto wsel's table
// as docs/integrations.md states.
package llmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/requestcontrol"
	fwksched "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"

	"wsel"
)

// Plugin types, as named in an EndpointPickerConfig.
const (
	ScorerType = "wsel-scorer"
	PickerType = "wsel-picker"
)

// Register adds the two plugin types to the framework's registry.
func Register() {
	plugin.Register(ScorerType, ScorerFactory)
	plugin.Register(PickerType, PickerFactory)
}

// Parameters of a wsel-scorer (its `parameters` in the plugin config).
type Parameters struct {
	// Policy is the wsel plugin's path (required).
	Policy string `json:"policy"`
	// Config is the policy's JSON configuration: an object, or a string
	// holding one; absent: the policy's defaults.
	Config json.RawMessage `json:"config,omitempty"`
	// Seed of the host's random streams (each request's from its id).
	Seed uint64 `json:"seed,omitempty"`
	// BlockSize in tokens when no prefix producer ran (default 64).
	BlockSize uint32 `json:"blockSize,omitempty"`
	// OverlapScoreWeight of Dynamo's cost column (default 1).
	OverlapScoreWeight float64 `json:"overlapScoreWeight,omitempty"`
	// KVCapacityBlocks assumed when an endpoint reports no KV capacity
	// (default 1024): KV usage times it is the rank's active blocks.
	KVCapacityBlocks uint64 `json:"kvCapacityBlocks,omitempty"`
	// BusyQueue marks an endpoint busy from this waiting-queue length on
	// (0: never).
	BusyQueue int `json:"busyQueue,omitempty"`
	// AffinityHeader names a request header whose value, hashed, is the
	// request's affinity key (session-affine policies).
	AffinityHeader string `json:"affinityHeader,omitempty"`
}

func (p *Parameters) defaults() error {
	if p.Policy == "" {
		return errors.New("wsel-scorer: parameters.policy (the wsel plugin's path) is required")
	}
	if p.BlockSize == 0 {
		p.BlockSize = 64
	}
	if p.KVCapacityBlocks == 0 {
		p.KVCapacityBlocks = 1024
	}
	return nil
}

// configText is the policy's configuration as the host takes it.
func (p *Parameters) configText() (string, error) {
	if len(p.Config) == 0 || string(p.Config) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(p.Config, &s) == nil {
		return s, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(p.Config, &obj); err != nil {
		return "", fmt.Errorf("wsel-scorer: parameters.config is neither an object nor a string: %w", err)
	}
	return string(p.Config), nil
}

// Scorer asks a wsel policy to choose among the candidate endpoints.
// Safe for concurrent scheduling cycles (wsel_host_select's thread rule).
type Scorer struct {
	typedName plugin.TypedName
	params    Parameters
	host      *wsel.Host
	tables    sync.Pool // *pooledTable, one per concurrent cycle
	inflight  sync.Map  // request id -> *flight
	now       func() time.Time
}

type flight struct {
	workerID    uint64
	dpRank      uint32
	start, head time.Time
}

var (
	_ fwksched.Scorer               = (*Scorer)(nil)
	_ requestcontrol.PreRequest     = (*Scorer)(nil)
	_ requestcontrol.ResponseHeader = (*Scorer)(nil)
	_ requestcontrol.ResponseBody   = (*Scorer)(nil)
)

// ScorerFactory is the registry's factory of "wsel-scorer".
func ScorerFactory(name string, raw json.RawMessage, _ plugin.Handle) (plugin.Plugin, error) {
	var p Parameters
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("wsel-scorer: parameters: %w", err)
		}
	}
	return NewScorer(name, p)
}

// NewScorer creates a host and loads the policy at p.Policy.
func NewScorer(name string, p Parameters) (*Scorer, error) {
	if err := p.defaults(); err != nil {
		return nil, err
	}
	cfg, err := p.configText()
	if err != nil {
		return nil, err
	}
	host, err := wsel.NewHost(wsel.HostOptions{Seed: p.Seed})
	if err != nil {
		return nil, err
	}
	if err := host.Switch(p.Policy, cfg); err != nil {
		_ = host.Close()
		return nil, fmt.Errorf("wsel-scorer: %w", err)
	}
	if name == "" {
		name = ScorerType
	}
	return &Scorer{typedName: plugin.TypedName{Type: ScorerType, Name: name}, params: p, host: host,
		now: time.Now}, nil
}

// TypedName is the plugin's type and name.
func (s *Scorer) TypedName() plugin.TypedName { return s.typedName }

// Category is Balance: the policy decides between affinity and spread.
func (s *Scorer) Category() fwksched.ScorerCategory { return fwksched.Balance }

// Host is the wsel host (counters, explanations).
func (s *Scorer) Host() *wsel.Host { return s.host }

// Switch loads the policy at path with JSON config ("" = its defaults) and
// makes it live under traffic; on error the old policy keeps serving.
func (s *Scorer) Switch(path, config string) error { return s.host.Switch(path, config) }

// Close destroys the host after the cycles in flight.
func (s *Scorer) Close() error { return s.host.Close() }

// Choose asks the policy for one of eps: the endpoint and wsel's answer.
func (s *Scorer) Choose(req *fwksched.LLMRequest, eps []fwksched.Endpoint) (fwksched.Endpoint, wsel.Choice, error) {
	if len(eps) == 0 {
		return nil, wsel.Choice{}, errors.New("wsel-scorer: no candidate endpoints")
	}
	spec := s.requestSpec(req, eps)
	c := s.candidates(eps, &spec)
	r, err := s.host.Request(spec)
	if err != nil {
		return nil, wsel.Choice{}, err
	}
	defer r.Free()
	t, err := s.table(len(eps))
	if err != nil {
		return nil, wsel.Choice{}, err
	}
	defer s.tables.Put(t)
	if err := t.Build(r, c.ranks, 1); err != nil {
		return nil, wsel.Choice{}, err
	}
	ch, err := s.host.Select(r, t.Table)
	if err != nil {
		return nil, wsel.Choice{}, err
	}
	return c.eps[ch.Row], ch, nil
}

type pooledTable struct {
	*wsel.Table
	rows int
}

// table is a pooled table of at least n rows.
func (s *Scorer) table(n int) (*pooledTable, error) {
	if t, ok := s.tables.Get().(*pooledTable); ok {
		if t.rows >= n {
			return t, nil
		}
		t.Free()
	}
	rows := max(n, 64)
	t, err := wsel.NewTable(uint32(rows))
	if err != nil {
		return nil, err
	}
	return &pooledTable{Table: t, rows: rows}, nil
}

// choiceKey is where a wsel-scorer leaves its choice in the cycle state.
func choiceKey(scorer string) plugin.StateKey { return plugin.StateKey("wsel-choice/" + scorer) }

type choiceState struct{ ep fwksched.Endpoint }

func (c *choiceState) Clone() plugin.StateData { return &choiceState{ep: c.ep} }

// Score gives the policy's choice 1 and every other endpoint 0; on an
// error (logged by the caller's picker as an empty choice) all get 0.
func (s *Scorer) Score(_ context.Context, cs *fwksched.CycleState, req *fwksched.LLMRequest,
	eps []fwksched.Endpoint) map[fwksched.Endpoint]float64 {
	scores := make(map[fwksched.Endpoint]float64, len(eps))
	for _, ep := range eps {
		scores[ep] = 0
	}
	ep, _, err := s.Choose(req, eps)
	if err != nil {
		return scores
	}
	scores[ep] = 1
	if cs != nil {
		cs.Write(choiceKey(s.typedName.Name), &choiceState{ep: ep})
	}
	return scores
}

// PreRequest notes where the request went and when.
func (s *Scorer) PreRequest(_ context.Context, req *fwksched.LLMRequest, res *fwksched.SchedulingResult) {
	if req == nil || res == nil {
		return
	}
	pr := res.ProfileResults[res.PrimaryProfileName]
	if pr == nil || len(pr.TargetEndpoints) == 0 {
		return
	}
	w, d := workerRank(pr.TargetEndpoints[0].GetMetadata())
	s.inflight.Store(req.RequestId, &flight{workerID: w, dpRank: d, start: s.now()})
}

// ResponseHeader notes the time to the response's headers (the time to
// first token of a streamed response, to within the engine's flush).
func (s *Scorer) ResponseHeader(_ context.Context, req *fwksched.LLMRequest, _ *requestcontrol.Response,
	_ *datalayer.EndpointMetadata) {
	if req == nil {
		return
	}
	if v, ok := s.inflight.Load(req.RequestId); ok {
		f := v.(*flight)
		if f.head.IsZero() {
			f.head = s.now()
		}
	}
}

// ResponseBody reports the finished request's outcome to the policy.
func (s *Scorer) ResponseBody(_ context.Context, req *fwksched.LLMRequest, resp *requestcontrol.Response,
	_ *datalayer.EndpointMetadata) {
	if req == nil || resp == nil || !resp.EndOfStream {
		return
	}
	v, ok := s.inflight.LoadAndDelete(req.RequestId)
	if !ok {
		return
	}
	f, end := v.(*flight), s.now()
	o := wsel.Outcome{RequestID: hash64(req.RequestId), WorkerID: f.workerID, DPRank: f.dpRank,
		E2EUS: uint64(end.Sub(f.start).Microseconds()), FinishedUS: uint64(end.UnixMicro()),
		PromptTokens: uint32(resp.Usage.PromptTokens), OutputTokens: uint32(resp.Usage.CompletionTokens)}
	if !f.head.IsZero() {
		o.TTFTUS = uint64(f.head.Sub(f.start).Microseconds())
	}
	if d := resp.Usage.PromptTokenDetails; d != nil {
		o.CachedTokens = uint32(d.CachedTokens)
	}
	s.host.RequestOutcome(o) // the policy's finished hook, then its outcome hook
}
