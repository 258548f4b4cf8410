package scaler

import (
	"slices"
	"sort"
)

// Offer is one scaler as a cluster worker advertises it to coordinators:
// the label sets its agents serve (auto labels included, as a job's
// runs-on must match them), the labels a job must ask for to be routed to
// it, and how many more agents it may start now.
type Offer struct {
	Scaler    string     `json:"scaler"`
	Type      string     `json:"type"`
	LabelSets [][]string `json:"label_sets"`
	Mandatory []string   `json:"mandatory,omitempty"`
	Free      int        `json:"free"`
}

// Offers describes every running scaler (retiring ones left out), in
// configuration order.
func (m *Manager) Offers() []Offer {
	m.mu.Lock()
	defer m.mu.Unlock()
	global := m.cfg.GlobalMaxAgents - m.totalActive()
	out := make([]Offer, 0, len(m.order))
	for _, name := range m.order {
		st := m.scalers[name]
		if st.retiring {
			continue
		}
		o := Offer{Scaler: name, Type: st.cfg.Type, Mandatory: NormalizeLabels(st.cfg.MandatoryLabels),
			Free: max(0, min(st.cfg.MaxAgents-st.active, global))}
		for _, ls := range st.cfg.LabelSets {
			o.LabelSets = append(o.LabelSets, enrichedLabels(st.cfg, ls))
		}
		out = append(out, o)
	}
	return out
}

// Covers reports whether the offer has a label set for a job with the
// given runs-on labels, none of the excluded labels, and every mandatory
// label: the rule RequestScale matches by.
func (o Offer) Covers(labels, exclude []string) bool {
	want := NormalizeLabels(labels)
	if !subset(NormalizeLabels(o.Mandatory), want) {
		return false
	}
	excl := NormalizeLabels(exclude)
	for _, set := range o.LabelSets {
		if subset(want, set) && !intersects(excl, set) {
			return true
		}
	}
	return false
}

// AgentIDs returns the agents the manager is spawning or has running,
// sorted.
func (m *Manager) AgentIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.agents))
	for id := range m.agents {
		out = append(out, id)
	}
	sort.Strings(out)
	return slices.Clip(out)
}
