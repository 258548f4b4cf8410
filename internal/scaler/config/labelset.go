package config

import (
	"go.yaml.in/yaml/v3"
)

// rawLabelSet is one label set as read, with the positions that the
// checks made once its scaler's type is known point at.
type rawLabelSet struct {
	ls   LabelSet
	path string
	at   pos
	keys map[string]pos
	// labelsAt is where the labels were written; labelsOK is false when
	// one of them was refused, so that the cross checks skip the set.
	labelsAt pos
	labelsOK bool
	// resOK is false when the set's resources were refused.
	resOK bool
}

var labelSetSchema = schema{
	known: append([]string{"labels", "image", "imagePullPolicy", "binaryPath", "env", "volumes", "resources"}, firecrackerLabelSetKeys...),
	unsupported: map[string]string{
		"containerSocket":  notYet,
		"backpressureMode": notYet,
		"networkPolicy":    notYet + " (there are no network isolation rules yet)",
	},
}

// labelSets reads a scaler's labelSets list into r.sets; r.s.LabelSets
// is filled from them once the type's rules were applied.
func (p *parser) labelSets(n *yaml.Node, path string, r *rawScaler) {
	items, ok := p.list(n, path)
	if !ok {
		return
	}
	if len(items) == 0 {
		p.errorf(n, path, "needs at least one label set")
		return
	}
	for i, item := range items {
		if set := p.labelSet(item, index(path, i)); set != nil {
			r.sets = append(r.sets, set)
		}
	}
}

func (p *parser) labelSet(n *yaml.Node, path string) *rawLabelSet {
	n = resolve(n)
	if isNull(n) {
		p.errorf(n, path, "expected a label set (a mapping with labels), got nothing")
		return nil
	}
	pairs, ok := p.mapping(n, path)
	if !ok {
		return nil
	}
	set := &rawLabelSet{path: path, at: p.at(n), keys: map[string]pos{}, resOK: true}
	ls := &set.ls
	for _, kv := range p.check(pairs, path, labelSetSchema) {
		set.keys[kv.key] = p.at(kv.keyN)
		what := join(path, kv.key)
		switch kv.key {
		case "labels":
			ls.Labels, set.labelsOK = p.labels(kv.value, what, true)
			set.labelsAt = p.at(resolve(kv.value))
		case "image":
			if s, ok := p.str(kv.value, what); ok {
				if msg := checkImage(s); msg != "" {
					p.errorf(kv.value, what, "%s", msg)
				} else {
					ls.Image = s
				}
			}
		case "imagePullPolicy":
			if s, ok := p.str(kv.value, what); ok {
				switch s {
				case PullAlways, PullIfNotPresent, PullNever:
					ls.ImagePullPolicy = s
				default:
					if c := closest(s, []string{PullAlways, PullIfNotPresent, PullNever}); c != "" {
						p.errorf(kv.value, what, "unknown pull policy %q (did you mean %q?)", s, c)
					} else {
						p.errorf(kv.value, what, "unknown pull policy %q: use %q, %q or %q", s, PullAlways, PullIfNotPresent, PullNever)
					}
				}
			}
		case "binaryPath":
			if s, ok := p.str(kv.value, what); ok {
				if msg := checkHostPath(s); msg != "" {
					p.errorf(kv.value, what, "%s", msg)
				} else {
					ls.BinaryPath = s
				}
			}
		case "env":
			ls.Env = p.env(kv.value, what)
		case "volumes":
			items, _ := p.list(kv.value, what)
			for i, item := range items {
				w := index(what, i)
				if s, ok := p.str(item, w); ok {
					if msg := checkVolume(s); msg != "" {
						p.errorf(item, w, "%s", msg)
					} else {
						ls.Volumes = append(ls.Volumes, s)
					}
				}
			}
		case "resources":
			ls.Resources, set.resOK = p.resources(kv.value, what)
		default:
			p.firecrackerLabelSetKey(kv, what, &ls.Firecracker)
		}
	}
	if _, ok := set.keys["labels"]; !ok {
		p.errorf(n, path, "missing required key \"labels\"")
	}
	return set
}

// checkLabelSetType applies the rules that depend on the scaler's type
// (nothing when the type is unknown) and fills the type's defaults.
func (p *parser) checkLabelSetType(set *rawLabelSet, typ string) {
	only := func(key, msg string) {
		if at, ok := set.keys[key]; ok {
			p.errorAt(at, join(set.path, key), "%s", msg)
		}
	}
	if typ != TypeFirecracker && typ != "" {
		for _, k := range firecrackerLabelSetKeys {
			only(k, "only for firecracker scalers")
		}
	}
	switch typ {
	case TypeFirecracker:
		if _, ok := set.keys["rootfsPath"]; !ok {
			p.errorAt(set.at, set.path, "missing required key \"rootfsPath\": a firecracker label set needs the guest's root filesystem image")
		}
		only("image", "not supported for firecracker scalers: the guest runs its rootfsPath image")
		only("imagePullPolicy", "only for container scalers")
		only("volumes", "only for container scalers")
		only("binaryPath", "only for bare-metal scalers: the guest's rootfs starts its own kici-agent")
		if set.ls.Firecracker.OverlayDriveSizeMib == 0 {
			set.ls.Firecracker.OverlayDriveSizeMib = DefaultOverlayDriveSizeMib
		}
	case TypeContainer:
		if _, ok := set.keys["image"]; !ok {
			p.errorAt(set.at, set.path, "missing required key \"image\": a container label set needs the image its agents run in")
		}
		only("binaryPath", "only for bare-metal scalers: a container agent runs its image's command")
		set.ls.Firecracker = FirecrackerLabelSet{}
		if set.ls.ImagePullPolicy == "" {
			set.ls.ImagePullPolicy = PullIfNotPresent
		}
	case TypeBareMetal:
		if _, ok := set.keys["binaryPath"]; !ok {
			p.errorAt(set.at, set.path, "missing required key \"binaryPath\": a bare-metal label set needs the absolute path of the kici-agent binary")
		}
		only("image", "not supported yet for bare-metal scalers (running a job in an image on a bare-metal host)")
		only("imagePullPolicy", "only for container scalers")
		only("volumes", "only for container scalers")
	}
}

// env reads an environment map: names that a shell could export, values
// any scalar as text.
func (p *parser) env(n *yaml.Node, path string) map[string]string {
	pairs, _ := p.mapping(n, path)
	if len(pairs) == 0 {
		return nil
	}
	out := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		what := join(path, kv.key)
		if !envKeyRE.MatchString(kv.key) {
			p.errorf(kv.keyN, what, "invalid variable name: use letters, digits and _, not starting with a digit")
			continue
		}
		if v, ok := p.text(kv.value, what); ok {
			if msg := checkEnvValue(v); msg != "" {
				p.errorf(kv.value, what, "%s", msg)
				continue
			}
			out[kv.key] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
