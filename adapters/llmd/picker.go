// SPDX-License-Identifier: Apache-2.0

package llmd

import (
	"context"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/plugin"
	fwksched "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/scheduling"
)

// PickerParameters of a wsel-picker.
type PickerParameters struct {
	// Scorer is the name of the wsel-scorer whose choice is taken
	// (default "wsel-scorer", the name of an unnamed one).
	Scorer string `json:"scorer,omitempty"`
}

// Picker takes the choice its profile's wsel-scorer left in the cycle
// state; without one (no such scorer, or it failed) the highest weighted
// score, ties to the first endpoint by name.
type Picker struct {
	typedName plugin.TypedName
	key       plugin.StateKey
}

var _ fwksched.Picker = (*Picker)(nil)

// PickerFactory is the registry's factory of "wsel-picker".
func PickerFactory(name string, raw json.RawMessage, _ plugin.Handle) (plugin.Plugin, error) {
	var p PickerParameters
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("wsel-picker: parameters: %w", err)
		}
	}
	return NewPicker(name, p), nil
}

// NewPicker returns a picker of the named scorer's choice.
func NewPicker(name string, p PickerParameters) *Picker {
	if name == "" {
		name = PickerType
	}
	if p.Scorer == "" {
		p.Scorer = ScorerType
	}
	return &Picker{typedName: plugin.TypedName{Type: PickerType, Name: name}, key: choiceKey(p.Scorer)}
}

// TypedName is the plugin's type and name.
func (p *Picker) TypedName() plugin.TypedName { return p.typedName }

// Pick returns the wsel choice when it is among the scored endpoints.
func (p *Picker) Pick(_ context.Context, cs *fwksched.CycleState, scored []*fwksched.ScoredEndpoint) *fwksched.ProfileRunResult {
	if len(scored) == 0 {
		return &fwksched.ProfileRunResult{}
	}
	if cs != nil {
		if c, err := fwksched.ReadCycleStateKey[*choiceState](cs, p.key); err == nil {
			for _, s := range scored {
				if s.Endpoint == c.ep {
					return &fwksched.ProfileRunResult{TargetEndpoints: []fwksched.Endpoint{s.Endpoint}}
				}
			}
		}
	}
	best := scored[0]
	for _, s := range scored[1:] {
		if s.Score > best.Score || s.Score == best.Score && endpointName(s) < endpointName(best) {
			best = s
		}
	}
	return &fwksched.ProfileRunResult{TargetEndpoints: []fwksched.Endpoint{best.Endpoint}}
}

func endpointName(s *fwksched.ScoredEndpoint) string {
	if m := s.GetMetadata(); m != nil {
		return m.NamespacedName.String()
	}
	return ""
}
