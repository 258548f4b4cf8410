package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DropInDir is the name of the drop-in directory, beside the main file.
const DropInDir = "scalers.d"

// maxFileBytes bounds one configuration file. Real files are a few KiB.
const maxFileBytes = 1 << 20

// NamedFile is the content of one drop-in file and the name its errors
// carry.
type NamedFile struct {
	Name string
	Data []byte
}

// Load reads the main configuration file at path and merges the drop-ins
// of the scalers.d directory beside it: every regular file whose name ends
// in .yaml or .yml and does not start with ".", in name order. A missing
// scalers.d is no drop-ins. Problems in the files are returned as an
// ErrorList; failing to read them, as a plain error.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scaler config: %w", err)
	}
	dropIns, err := readDropIns(filepath.Join(filepath.Dir(path), DropInDir))
	if err != nil {
		return nil, err
	}
	return Parse(path, data, dropIns...)
}

func readDropIns(dir string) ([]NamedFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read scaler drop-in directory: %w", err)
	}
	// os.ReadDir sorts by name already; sort again so that the order is
	// stated here, where it matters.
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	var out []NamedFile
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		full := filepath.Join(dir, name)
		info, err := os.Stat(full) // follows symlinks
		if err != nil {
			return nil, fmt.Errorf("read scaler drop-in: %w", err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return nil, fmt.Errorf("read scaler drop-in: %w", err)
		}
		out = append(out, NamedFile{Name: full, Data: data})
	}
	return out, nil
}

// Parse reads a main configuration file from bytes and merges the given
// drop-ins in the order given (Load passes them in name order). name and
// each NamedFile.Name are only used in error positions. It returns the
// loaded file, or an ErrorList holding every problem found.
func Parse(name string, data []byte, dropIns ...NamedFile) (*File, error) {
	p := &parser{}
	order := map[string]int{name: 0}
	f := &File{GlobalMaxAgents: DefaultGlobalMaxAgents, Firecracker: defaultFirecrackerNetwork()}
	var raws []*rawScaler
	defaultsOK := true

	p.file = name
	if root := p.document(data, true); root != nil {
		var rs []*rawScaler
		rs, defaultsOK = p.mainFile(root, f)
		raws = append(raws, rs...)
	}
	for i, d := range dropIns {
		if _, seen := order[d.Name]; !seen {
			order[d.Name] = i + 1
		}
		p.file = d.Name
		if root := p.document(d.Data, false); root != nil {
			raws = append(raws, p.dropIn(root)...)
		}
	}
	p.crossCheck(raws, f.Defaults.Resources, defaultsOK)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int {
			if c := order[a.File] - order[b.File]; c != 0 {
				return c
			}
			if c := a.Line - b.Line; c != 0 {
				return c
			}
			return a.Col - b.Col
		})
		return nil, p.errs
	}
	for _, r := range raws {
		f.Scalers = append(f.Scalers, r.s)
	}
	return f, nil
}

// document parses one file into its root node. It returns nil when there
// is nothing to read: the problems, if any, are recorded. An empty main
// file is a problem; an empty drop-in is skipped.
func (p *parser) document(data []byte, main bool) *yaml.Node {
	if len(data) > maxFileBytes {
		p.errorf(nil, "", "file is %d bytes, over the limit of %d", len(data), maxFileBytes)
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if err != nil && !errors.Is(err, io.EOF) {
		p.yamlError(err)
		return nil
	}
	var root *yaml.Node
	if err == nil && len(doc.Content) > 0 && !isNull(doc.Content[0]) {
		root = doc.Content[0]
	}
	// The rest must be nothing: a second document would be ignored
	// silently otherwise. The first is still read, for its own problems.
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		p.errorf(&next, "", "a second YAML document (after ---): a scaler configuration file holds one document")
	case !errors.Is(err, io.EOF):
		p.yamlError(err)
	}
	if root == nil {
		if main {
			p.errorf(nil, "", "file is empty: a scaler configuration needs \"version: 1\" and \"scalers\"")
		}
		return nil
	}
	if expandedSize(root, map[*yaml.Node]int{}) > maxExpandedNodes {
		p.errorf(root, "", "aliases expand the document to more than %d nodes", maxExpandedNodes)
		return nil
	}
	return root
}

// yamlError turns a parser error into positioned errors. go-yaml reports
// "yaml: line N: ..." without a column.
func (p *parser) yamlError(err error) {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	for _, m := range msgs {
		m = strings.TrimPrefix(m, "yaml: ")
		line := 1
		if strings.HasPrefix(m, "line ") {
			var n int
			if _, scanErr := fmt.Sscanf(m, "line %d:", &n); scanErr == nil && n > 0 {
				line = n
				m = strings.TrimSpace(m[strings.Index(m, ":")+1:])
			}
		}
		p.errorAt(pos{file: p.file, line: line, col: 1}, "", "invalid YAML: %s", m)
	}
}

const notYet = "not supported yet"

var mainSchema = schema{
	known: []string{"version", "globalMaxAgents", "defaults", "scalers", "firecracker"},
	unsupported: map[string]string{
		"globalResourceCap": notYet + " (a cap per scaler is: resourceCap)",
		"machinePools":      notYet,
	},
}

// mainFile reads the top level of the main file into f and returns its
// scalers, and whether defaults were read without problems.
func (p *parser) mainFile(root *yaml.Node, f *File) ([]*rawScaler, bool) {
	if resolve(root).Kind != yaml.MappingNode {
		p.errorf(root, "", "expected a mapping with version and scalers, got %s", kindName(resolve(root)))
		return nil, false
	}
	pairs, ok := p.mapping(root, "")
	if !ok {
		return nil, false
	}
	pairs = p.check(pairs, "", mainSchema)
	var raws []*rawScaler
	var haveVersion, haveScalers bool
	defaultsOK := true
	for _, kv := range pairs {
		switch kv.key {
		case "version":
			haveVersion = true
			p.version(kv.value)
		case "globalMaxAgents":
			if v, ok := p.integer(kv.value, kv.key, 1, maxCount); ok {
				f.GlobalMaxAgents = v
			}
		case "defaults":
			defaultsOK = p.defaults(kv.value, kv.key, &f.Defaults)
		case "scalers":
			haveScalers = true
			raws = p.scalers(kv.value)
		case "firecracker":
			p.firecrackerNetwork(kv.value, kv.key, &f.Firecracker)
		}
	}
	if !haveVersion {
		p.errorf(root, "", "missing required key \"version\" (write \"version: 1\")")
	}
	if !haveScalers {
		p.errorf(root, "", "missing required key \"scalers\" (write \"scalers: []\" for none)")
	}
	return raws, defaultsOK
}

func (p *parser) version(n *yaml.Node) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		p.errorf(n, "version", "expected the number 1, got %s", describe(n))
		return
	}
	// go-yaml truncates a float decoded into an integer, so only !!int
	// is decoded.
	var v int64
	if n.Tag != "!!int" || n.Decode(&v) != nil || v != Version {
		p.errorf(n, "version", "unsupported version %s: this kici reads version %d", n.Value, Version)
	}
}

func (p *parser) defaults(n *yaml.Node, path string, d *Defaults) bool {
	errs := len(p.errs)
	pairs, _ := p.mapping(n, path)
	for _, kv := range p.check(pairs, path, schema{known: []string{"resources"}}) {
		d.Resources, _ = p.resources(kv.value, join(path, kv.key))
	}
	return len(p.errs) == errs
}

// scalers reads the scalers list of one file.
func (p *parser) scalers(n *yaml.Node) []*rawScaler {
	items, ok := p.list(n, "scalers")
	if !ok {
		return nil
	}
	out := make([]*rawScaler, 0, len(items))
	for i, item := range items {
		if r := p.scaler(item, index("scalers", i)); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// dropIn reads one drop-in file: its scalers list and nothing else.
func (p *parser) dropIn(root *yaml.Node) []*rawScaler {
	if resolve(root).Kind != yaml.MappingNode {
		p.errorf(root, "", "expected a mapping with a scalers list, got %s", kindName(resolve(root)))
		return nil
	}
	pairs, ok := p.mapping(root, "")
	if !ok {
		return nil
	}
	var raws []*rawScaler
	for _, kv := range pairs {
		switch {
		case kv.key == "scalers":
			raws = p.scalers(kv.value)
		case contains(mainSchema.known, kv.key):
			p.errorf(kv.keyN, kv.key, "only allowed in the main file: a drop-in file contributes its \"scalers\" list and nothing else")
		case closest(kv.key, []string{"scalers"}) != "":
			p.errorf(kv.keyN, join("", kv.key), "unknown key (did you mean \"scalers\"?)")
		default:
			p.errorf(kv.keyN, join("", kv.key), "unknown key: a drop-in file holds only a \"scalers\" list")
		}
	}
	return raws
}
