package config

import (
	"maps"
	"slices"

	"github.com/kici-dev/kici/internal/scaler"
)

// ManagerConfig converts the file into the configuration the
// scaler.Manager runs. Each label set's Requests and Limits are resolved
// side by side and dimension by dimension: the label set's own value,
// else defaults.resources', else 0 (not declared). Both layers have had
// the mirror rule applied. Only the manager's share of the file is
// converted: warm pools, resource caps and the container options are
// read from File by whoever needs them. The result shares no memory with
// f.
func (f *File) ManagerConfig() scaler.Config {
	cfg := scaler.Config{GlobalMaxAgents: f.GlobalMaxAgents}
	for _, s := range f.Scalers {
		cfg.Scalers = append(cfg.Scalers, f.managerScaler(s))
	}
	return cfg
}

func (f *File) managerScaler(s Scaler) scaler.ScalerConfig {
	sc := scaler.ScalerConfig{
		Name:                s.Name,
		Type:                s.Type,
		MaxAgents:           s.MaxAgents,
		MaxConcurrentSpawns: s.MaxConcurrentSpawns,
		OrchestratorURL:     s.OrchestratorURL,
		MandatoryLabels:     slices.Clone(s.MandatoryLabels),
		FailJobsAfter:       s.FailJobsAfter,
	}
	sc.ResourceCap = scaler.Spec{CPUs: s.ResourceCap.MaxCPUs, MemoryBytes: s.ResourceCap.MaxMemoryBytes}
	if s.WarmPool.Enabled && s.WarmPool.Size > 0 {
		sc.WarmPool = scaler.WarmPool{Size: s.WarmPool.Size, IdleTimeout: s.WarmPool.IdleTimeout}
	}
	for _, ls := range s.LabelSets {
		res := effective(ls.Resources, f.Defaults.Resources)
		sc.LabelSets = append(sc.LabelSets, scaler.LabelSet{
			Labels:     slices.Clone(ls.Labels),
			Image:      ls.Image,
			PullPolicy: ls.ImagePullPolicy,
			BinaryPath: ls.BinaryPath,
			Env:        maps.Clone(ls.Env),
			Volumes:    slices.Clone(ls.Volumes),
			Requests:   res.Requests,
			Limits:     res.Limits,
			Firecracker: scaler.FirecrackerGuest{
				RootfsPath: ls.Firecracker.RootfsPath, KernelPath: ls.Firecracker.KernelPath,
				VCPUCount: ls.Firecracker.VCPUCount, MemSizeMib: ls.Firecracker.MemSizeMib,
				OverlayDriveSizeMib: ls.Firecracker.OverlayDriveSizeMib, WarmStart: ls.Firecracker.WarmStart,
			},
		})
	}
	return sc
}
