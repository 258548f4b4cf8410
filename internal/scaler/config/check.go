package config

// crossCheck applies the rules that span scalers and files: names are
// unique, no two scalers declare the same label set, and each label set's
// resources, resolved over the defaults, still request no more than they
// limit. defaultsOK is false when the defaults block had a problem, which
// then was reported already.
func (p *parser) crossCheck(raws []*rawScaler, defaults Resources, defaultsOK bool) {
	names := map[string]*rawScaler{}
	for _, r := range raws {
		if r.s.Name == "" {
			continue
		}
		if first, dup := names[r.s.Name]; dup {
			p.errorAt(r.nameAt, join(r.path, "name"), "scaler name %q is already used (at %s)", r.s.Name, first.nameAt)
			continue
		}
		names[r.s.Name] = r
	}

	type decl struct {
		r  *rawScaler
		at pos
	}
	declared := map[string]decl{}
	for _, r := range raws {
		for _, set := range r.sets {
			if !set.labelsOK || len(set.ls.Labels) == 0 {
				continue
			}
			key := set.ls.Key()
			first, ok := declared[key]
			if !ok {
				declared[key] = decl{r: r, at: set.labelsAt}
				continue
			}
			// The same set twice in one scaler is allowed (the first one
			// wins in matching); a duplicated name was reported above.
			if first.r == r || first.r.s.Name != "" && first.r.s.Name == r.s.Name {
				continue
			}
			p.errorAt(set.labelsAt, join(set.path, "labels"),
				"label set %q is also declared by scaler %s (at %s): two scalers may not declare the same label set",
				key, first.r.ident(), first.at)
		}
	}

	if !defaultsOK {
		return
	}
	for _, r := range raws {
		for _, set := range r.sets {
			at, ok := set.keys["resources"]
			if !ok || !set.resOK {
				continue
			}
			if msg := effective(set.ls.Resources, defaults).exceeds(); msg != "" {
				p.errorAt(at, join(set.path, "resources"), "resolved over defaults.resources, %s", msg)
			}
		}
	}
}
