package config

import (
	"errors"
	"fmt"
	"reflect"
)

// TypeChangeError is a reload that would change a scaler's backend type.
// A running backend cannot become another kind, so such a reload is
// refused and the change waits for a restart.
type TypeChangeError struct {
	Scaler   string
	From, To string
}

// Error says which scaler changes type and that a restart applies it.
func (e *TypeChangeError) Error() string {
	return fmt.Sprintf("scaler %q changes type from %s to %s; restart the orchestrator to apply", e.Scaler, e.From, e.To)
}

// ReloadPlan says what a reload from one file to another does to each
// scaler, by name. Every scaler of either file is in exactly one of
// Added, Removed, Updated, Unchanged and TypeChanged. Removed follows the
// old file's order, the others the new file's.
type ReloadPlan struct {
	// Added scalers are only in the new file: build their backends.
	Added []string
	// Removed scalers are only in the old file: retire them.
	Removed []string
	// Updated scalers are in both, with the same type, and differ in
	// anything else, including the resolved resources of a label set
	// after a change to defaults.resources.
	Updated []string
	// Unchanged scalers are in both and equal.
	Unchanged []string
	// TypeChanged holds the scalers whose type differs. The reload must be
	// refused when it is not empty; Err says why.
	TypeChanged []*TypeChangeError
	// GlobalChanged is set when globalMaxAgents or defaults.resources
	// differ.
	GlobalChanged bool
	// NetworkChangedUnder names the firecracker scalers of both files
	// when the firecracker network block differs: their VMs live on the
	// old bridge and pool, so such a reload is refused.
	NetworkChangedUnder []string
	// FirecrackerChanged names the firecracker scalers of both files whose
	// own firecracker keys (binaries, kernel, uid, gid, chroot base, sizes)
	// differ: a running backend keeps the ones it started with, so such a
	// reload is refused.
	FirecrackerChanged []string
}

// Err returns the plan's type changes joined into one error, or nil
// when the plan can be applied.
func (p ReloadPlan) Err() error {
	errs := make([]error, len(p.TypeChanged))
	for i, e := range p.TypeChanged {
		errs[i] = e
	}
	if len(p.FirecrackerChanged) > 0 {
		errs = append(errs, fmt.Errorf("the firecracker keys of scalers %v changed (firecrackerPath, jailerPath, kernelPath, uid, gid, chrootBaseDir, vcpuCount, memSizeMib); restart the orchestrator to apply", p.FirecrackerChanged))
	}
	if len(p.NetworkChangedUnder) > 0 {
		errs = append(errs, fmt.Errorf("the firecracker network block changed while firecracker scalers %v run on it; restart the orchestrator to apply", p.NetworkChangedUnder))
	}
	return errors.Join(errs...)
}

// Plan compares the file in use with a newly loaded one. It is a pure
// function of its arguments; a nil file has no scalers. Scalers are
// compared field by field, as Parse and Load build them (empty lists and
// maps are nil).
func Plan(from, to *File) ReloadPlan {
	if from == nil {
		from = &File{}
	}
	if to == nil {
		to = &File{}
	}
	old := make(map[string]Scaler, len(from.Scalers))
	for _, s := range from.Scalers {
		old[s.Name] = s
	}
	kept := make(map[string]bool, len(to.Scalers))
	var plan ReloadPlan
	for _, s := range to.Scalers {
		kept[s.Name] = true
		o, ok := old[s.Name]
		switch {
		case !ok:
			plan.Added = append(plan.Added, s.Name)
		case o.Type != s.Type:
			plan.TypeChanged = append(plan.TypeChanged, &TypeChangeError{Scaler: s.Name, From: o.Type, To: s.Type})
		case !reflect.DeepEqual(o, s) || !reflect.DeepEqual(from.managerScaler(o), to.managerScaler(s)):
			plan.Updated = append(plan.Updated, s.Name)
		default:
			plan.Unchanged = append(plan.Unchanged, s.Name)
		}
	}
	for _, s := range from.Scalers {
		if !kept[s.Name] {
			plan.Removed = append(plan.Removed, s.Name)
		}
	}
	plan.GlobalChanged = from.GlobalMaxAgents != to.GlobalMaxAgents || from.Defaults != to.Defaults
	for _, s := range to.Scalers {
		if o, ok := old[s.Name]; ok && o.Type == TypeFirecracker && s.Type == TypeFirecracker && o.Firecracker != s.Firecracker {
			plan.FirecrackerChanged = append(plan.FirecrackerChanged, s.Name)
		}
	}
	if from.Firecracker != to.Firecracker {
		for _, s := range to.Scalers {
			if o, ok := old[s.Name]; ok && o.Type == TypeFirecracker && s.Type == TypeFirecracker {
				plan.NetworkChangedUnder = append(plan.NetworkChangedUnder, s.Name)
			}
		}
	}
	return plan
}
