package workflow

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"go.yaml.in/yaml/v3"
)

// Concurrency puts a run (workflow level) or a job (job level) in a group
// of which one member runs at a time; the others wait, or, with
// CancelInProgress, the one in progress is cancelled for the newcomer.
type Concurrency struct {
	// Group is the group's name; its event.* and inputs.* references are
	// filled when the run is created (Bind), its matrix.* and env.*
	// references at compile time.
	Group            string `json:"group"`
	CancelInProgress bool   `json:"cancelInProgress,omitempty"`
}

// Retry causes: why a job's attempt ended, as `retry.when` names them.
const (
	RetryAgentLost      = "agent-lost"     // the agent vanished mid-job
	RetryInfrastructure = "infrastructure" // spawning compute or fetching the code failed
	RetryTimeout        = "timeout"        // the job's timeout ended it
	RetryFailure        = "failure"        // a step failed
)

// RetryCauses lists the retry causes in the order the docs give them.
var RetryCauses = []string{RetryAgentLost, RetryInfrastructure, RetryTimeout, RetryFailure}

// MaxRetries bounds retry.max.
const MaxRetries = 5

// Retry says how often a job is tried again, and after which ends.
type Retry struct {
	Max  int      `json:"max"`
	When []string `json:"when"`
}

// DefaultRetry is what a job without `retry:` gets: one more attempt after
// an infrastructure failure (its agent lost, its compute not spawned, its
// code not fetched), none after its own failure.
var DefaultRetry = Retry{Max: 1, When: []string{RetryAgentLost, RetryInfrastructure}}

// EffectiveRetry is the job's retry policy, the default when it sets none.
func (j Job) EffectiveRetry() Retry {
	if j.Retry != nil {
		return *j.Retry
	}
	return DefaultRetry
}

// Image pull policies.
const (
	PullAlways       = "always"
	PullIfNotPresent = "if-not-present"
	PullNever        = "never"
)

var pullPolicies = []string{PullAlways, PullIfNotPresent, PullNever}

// Container is an image a job's steps (Job.Image) or a service runs in.
type Container struct {
	Image string `json:"image"`
	// Pull is PullAlways, PullIfNotPresent or PullNever; empty means
	// PullIfNotPresent.
	Pull string `json:"pull,omitempty"`
}

// Service is a sidecar container of a job, reachable from the steps by
// its Name as host name.
type Service struct {
	Name string `json:"name"`
	Container
	Env map[string]string `json:"env,omitempty"`
}

// MaxServices bounds the services of one job.
const MaxServices = 8

var (
	// imageRE is a Docker image reference: [registry[:port]/]path[:tag][@digest].
	imageRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$`)
	// hostRE is a service name: a DNS label.
	hostRE = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// environmentRE is an environment name.
	environmentRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// ValidEnvironment reports whether name can name an environment.
func ValidEnvironment(name string) bool { return environmentRE.MatchString(name) }

// maxGroupLen bounds a concurrency group's name, references filled.
const maxGroupLen = 200

// parseConcurrency reads `concurrency: GROUP` or
// `concurrency: {group: GROUP, cancel-in-progress: BOOL}`.
func (p *fileParser) parseConcurrency(n *yaml.Node, what string) (*Concurrency, *yaml.Node) {
	r := resolve(n)
	if r.Kind == yaml.ScalarNode {
		g, ok := p.str(r, what)
		if !ok {
			return nil, r
		}
		return p.checkGroup(&Concurrency{Group: g}, r, what), r
	}
	fields, ok := p.mapping(n, what)
	if !ok {
		return nil, r
	}
	p.checkKeys(fields, what, "group", "cancel-in-progress")
	c := &Concurrency{}
	groupN := r
	for _, f := range fields {
		switch f.key {
		case "group":
			c.Group, _ = p.str(f.value, what+".group")
			groupN = f.value
		case "cancel-in-progress":
			c.CancelInProgress, _ = p.boolean(f.value, what+".cancel-in-progress")
		}
	}
	return p.checkGroup(c, groupN, what), groupN
}

func (p *fileParser) checkGroup(c *Concurrency, n *yaml.Node, what string) *Concurrency {
	if strings.TrimSpace(c.Group) == "" {
		p.errorf(n, "%s: a concurrency group needs a name (group: ...)", what)
		return nil
	}
	if len(c.Group) > maxGroupLen {
		p.errorf(n, "%s: group is %d bytes, over the limit of %d", what, len(c.Group), maxGroupLen)
		return nil
	}
	return c
}

// parseRetry reads `retry: N` or `retry: {max: N, when: [...]}`.
func (p *fileParser) parseRetry(n *yaml.Node, what string) *Retry {
	r := resolve(n)
	if r.Kind == yaml.ScalarNode {
		max, ok := p.count(r, what, MaxRetries)
		if !ok {
			return nil
		}
		return &Retry{Max: max, When: slices.Clone(DefaultRetry.When)}
	}
	fields, ok := p.mapping(n, what)
	if !ok {
		return nil
	}
	p.checkKeys(fields, what, "max", "when")
	out := &Retry{When: slices.Clone(DefaultRetry.When)}
	for _, f := range fields {
		switch f.key {
		case "max":
			out.Max, _ = p.count(f.value, what+".max", MaxRetries)
		case "when":
			list, _ := p.strList(f.value, what+".when")
			out.When = nil
			for _, w := range list {
				if !slices.Contains(RetryCauses, w) {
					p.errorf(f.value, "%s.when: unknown cause %q; known: %s", what, w, strings.Join(RetryCauses, ", "))
					continue
				}
				if !slices.Contains(out.When, w) {
					out.When = append(out.When, w)
				}
			}
			if len(list) == 0 {
				p.errorf(f.value, "%s.when: name at least one cause (%s)", what, strings.Join(RetryCauses, ", "))
			}
		}
	}
	return out
}

// count reads a whole number from 0 to max.
func (p *fileParser) count(n *yaml.Node, what string, max int) (int, bool) {
	n = resolve(n)
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil || v < 0 || v > max {
		p.errorf(n, "%s: expected a whole number from 0 to %d, got %s", what, max, describe(n))
		return 0, false
	}
	return v, true
}

// describe names a node's value for an error: its text for a scalar, its
// kind otherwise.
func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		return strconv.Quote(n.Value)
	}
	return kindName(n)
}

// parseContainer reads `IMAGE` or `{image: IMAGE, pull: POLICY}` (plus, for
// a service, env: given in extra).
func (p *fileParser) parseContainer(n *yaml.Node, what string, extra ...string) (Container, []pair, bool) {
	r := resolve(n)
	if r.Kind == yaml.ScalarNode {
		img, ok := p.str(r, what)
		if !ok {
			return Container{}, nil, false
		}
		return p.checkImage(Container{Image: img}, r, what)
	}
	fields, ok := p.mapping(n, what)
	if !ok {
		return Container{}, nil, false
	}
	p.checkKeys(fields, what, append([]string{"image", "pull"}, extra...)...)
	var c Container
	imageN := r
	var rest []pair
	for _, f := range fields {
		switch f.key {
		case "image":
			c.Image, _ = p.str(f.value, what+".image")
			imageN = f.value
		case "pull":
			c.Pull, _ = p.str(f.value, what+".pull")
			if c.Pull != "" && !slices.Contains(pullPolicies, c.Pull) {
				p.errorf(f.value, "%s.pull: unknown policy %q; known: %s", what, c.Pull, strings.Join(pullPolicies, ", "))
			}
		default:
			rest = append(rest, f)
		}
	}
	c, _, ok = p.checkImage(c, imageN, what)
	return c, rest, ok
}

func (p *fileParser) checkImage(c Container, n *yaml.Node, what string) (Container, []pair, bool) {
	if c.Image == "" {
		p.errorf(n, "%s: name an image (image: NAME[:TAG])", what)
		return c, nil, false
	}
	if strings.Contains(c.Image, "${{") {
		return c, nil, true // checked once filled, per matrix combination
	}
	if len(c.Image) > 255 || !imageRE.MatchString(c.Image) {
		p.errorf(n, "%s: %q is not an image reference such as golang:1.26 or registry.example.com/team/tool@sha256:…", what, c.Image)
		return c, nil, false
	}
	return c, nil, true
}

// parseServices reads `services: {NAME: IMAGE | {image, pull, env}}`.
func (p *fileParser) parseServices(n *yaml.Node, what string) []rawService {
	pairs, ok := p.mapping(n, what)
	if !ok {
		return nil
	}
	if len(pairs) > MaxServices {
		p.errorf(n, "%s: %d services, over the limit of %d", what, len(pairs), MaxServices)
		return nil
	}
	var out []rawService
	for _, kv := range pairs {
		sw := what + "." + kv.key
		if !hostRE.MatchString(kv.key) {
			p.errorf(kv.keyN, "%s: service name %q must be a host name: lower-case letters, digits and -, starting with a letter, up to 63", what, kv.key)
			continue
		}
		c, rest, ok := p.parseContainer(kv.value, sw, "env")
		if !ok {
			continue
		}
		s := rawService{name: kv.key, c: c, n: kv.value}
		for _, f := range rest {
			if f.key == "env" {
				s.env = p.parseEnv(f.value, sw+".env")
			}
		}
		out = append(out, s)
	}
	return out
}

type rawService struct {
	name string
	c    Container
	n    *yaml.Node
	env  []envEntry
}

// fillImage fills the matrix.* and env.* references of an image and
// checks the result is an image reference.
func (p *fileParser) fillImage(c Container, n *yaml.Node, combo, env map[string]string, what string) Container {
	if !strings.Contains(c.Image, "${{") {
		return c
	}
	img, problems := interpolate(c.Image, interpScope{matrix: combo, env: env}, modeStatic)
	for _, m := range problems {
		p.errorf(n, "%s: %s", what, m)
	}
	c.Image = img
	if len(problems) == 0 {
		p.checkImage(c, n, what)
	}
	return c
}

// parseMatrixOption reads the fail-fast and max-parallel keys of a matrix.
func (p *fileParser) parseMatrixOption(m *rawMatrix, kv pair, what string) {
	switch kv.key {
	case "fail-fast":
		m.failFast, _ = p.boolean(kv.value, what+".fail-fast")
	case "max-parallel":
		m.maxParallel, _ = p.count(kv.value, what+".max-parallel", 1000)
		if m.maxParallel == 0 {
			p.errorf(kv.value, "%s.max-parallel: want at least 1", what)
		}
	}
}

// buildFeatures fills the job's concurrency, retry, environment, image and
// services for one matrix combination.
func (p *fileParser) buildFeatures(job *Job, j *rawJob, combo, env map[string]string, inputs map[string]bool, what string) {
	if j.concurrency != nil {
		c := *j.concurrency
		g, problems := interpolate(c.Group, interpScope{matrix: combo, env: env, inputs: inputs}, modeDeferred)
		for _, m := range problems {
			p.errorf(j.concurrencyN, "%s.concurrency: %s", what, m)
		}
		c.Group = g
		job.Concurrency = &c
	}
	if j.retry != nil {
		r := *j.retry
		job.Retry = &r
	}
	job.Environment = j.environment
	if j.image != nil {
		c := p.fillImage(*j.image, j.imageN, combo, env, what+".image")
		job.Image = &c
	}
	for _, s := range j.services {
		sw := fmt.Sprintf("%s.services.%s", what, s.name)
		svc := Service{Name: s.name, Container: p.fillImage(s.c, s.n, combo, env, sw)}
		if e := p.buildEnv(s.env, env, combo, inputs, sw+".env"); len(e) > 0 {
			svc.Env = e
		}
		job.Services = append(job.Services, svc)
	}
	if j.matrix != nil {
		job.FailFast, job.MaxParallel = j.matrix.failFast, j.matrix.maxParallel
	}
	job.Cache = p.buildCaches(j, combo, env, inputs, what)
	if j.artifacts != nil {
		a := *j.artifacts
		a.Paths = slices.Clone(a.Paths)
		job.Artifacts = &a
	}
}

// bindString fills the event.* and inputs.* references of s, as Bind does.
func bindString(s string, ev EventVars, inputs map[string]string) string {
	if !strings.Contains(s, "${{") {
		return s
	}
	return interpRE.ReplaceAllStringFunc(s, func(m string) string {
		ns, key, ok := parseRef(strings.TrimSpace(m[3 : len(m)-2]))
		switch {
		case !ok:
			return m
		case ns == "event":
			return ev.field(key)
		case ns == "inputs":
			return inputs[key]
		}
		return m
	})
}

// BindGroup returns the concurrency group with its event.* and inputs.*
// references filled, cut to maxGroupLen bytes.
func (c *Concurrency) BindGroup(ev EventVars, inputs map[string]string) string {
	if c == nil {
		return ""
	}
	g := bindString(c.Group, ev, inputs)
	if len(g) > maxGroupLen {
		g = g[:maxGroupLen]
	}
	return g
}

// checkFeatures holds a plan that did not come out of Compile (a lock file
// a pull request can commit) to what the parser allows of the job's
// concurrency, retry, environment, image and services.
func (j *Job) checkFeatures() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("job %q: %s", j.Name, fmt.Sprintf(format, args...))
	}
	image := func(c Container, what string) error {
		if len(c.Image) > 255 || !imageRE.MatchString(c.Image) {
			return bad("%s %q is not an image reference", what, c.Image)
		}
		if c.Pull != "" && !slices.Contains(pullPolicies, c.Pull) {
			return bad("%s pull policy %q is unknown", what, c.Pull)
		}
		return nil
	}
	if c := j.Concurrency; c != nil && (strings.TrimSpace(c.Group) == "" || len(c.Group) > maxGroupLen) {
		return bad("concurrency group must have 1 to %d bytes", maxGroupLen)
	}
	if r := j.Retry; r != nil {
		if r.Max < 0 || r.Max > MaxRetries {
			return bad("retry max %d is not from 0 to %d", r.Max, MaxRetries)
		}
		for _, w := range r.When {
			if !slices.Contains(RetryCauses, w) {
				return bad("retry cause %q is unknown", w)
			}
		}
	}
	if j.Environment != "" && !ValidEnvironment(j.Environment) {
		return bad("environment name %q is invalid", j.Environment)
	}
	if j.Image != nil {
		if err := image(*j.Image, "image"); err != nil {
			return err
		}
	}
	if len(j.Services) > MaxServices {
		return bad("%d services, over the limit of %d", len(j.Services), MaxServices)
	}
	names := map[string]bool{}
	for _, s := range j.Services {
		if !hostRE.MatchString(s.Name) || names[s.Name] {
			return bad("service name %q is not a host name, or appears twice", s.Name)
		}
		names[s.Name] = true
		if err := image(s.Container, "service "+s.Name+" image"); err != nil {
			return err
		}
	}
	if j.MaxParallel < 0 {
		return bad("max-parallel %d is negative", j.MaxParallel)
	}
	if len(j.Cache) > MaxCaches {
		return bad("%d caches, over the limit of %d", len(j.Cache), MaxCaches)
	}
	for _, c := range j.Cache {
		if len(c.Paths) == 0 || len(c.Paths) > MaxCachePaths || len(c.RestoreKeys) > MaxRestoreKeys {
			return bad("a cache has %d paths and %d restore keys (1 to %d, at most %d)", len(c.Paths), len(c.RestoreKeys), MaxCachePaths, MaxRestoreKeys)
		}
		for _, k := range append([]string{c.Key}, c.RestoreKeys...) {
			if strings.TrimSpace(k) == "" || len(k) > maxKeyLen {
				return bad("cache key %q must have 1 to %d bytes", k, maxKeyLen)
			}
			if _, _, err := HashFilesPatterns(k); err != nil {
				return bad("cache key %q: %v", k, err)
			}
		}
		for _, p := range c.Paths {
			if !validCachePath(p) {
				return bad("cache path %q is outside the workspace and ~/", p)
			}
		}
	}
	if a := j.Artifacts; a != nil {
		if len(a.Paths) == 0 || len(a.Paths) > MaxArtifactPaths {
			return bad("artifacts have %d paths, want 1 to %d", len(a.Paths), MaxArtifactPaths)
		}
		for _, p := range a.Paths {
			if !ValidWorkspacePattern(p) {
				return bad("artifact path %q is not a pattern inside the workspace", p)
			}
		}
		if a.ExpireMS < 0 || a.ExpireMS > maxExpiry.Milliseconds() || a.When != "" && a.When != ArtifactsOnSuccess && a.When != ArtifactsAlways {
			return bad("artifacts expire %d ms or when %q is out of range", a.ExpireMS, a.When)
		}
	}
	return nil
}

// Cache is one entry of a job's `cache:` list: the paths are restored
// before the steps from the newest entry saved under Key (or, failing
// that, under the newest key starting with one of RestoreKeys), and saved
// under Key after a success when Key itself missed.
type Cache struct {
	// Key may hold `${{ hashFiles('PATTERN', ...) }}`, which the agent
	// fills with a digest of the workspace files the patterns match; the
	// other references are filled at compile time and by Bind.
	Key         string   `json:"key"`
	Paths       []string `json:"paths"`
	RestoreKeys []string `json:"restoreKeys,omitempty"`
}

// Artifacts are files a job keeps with its run.
type Artifacts struct {
	// Paths are doublestar patterns relative to the workspace.
	Paths []string `json:"paths"`
	// ExpireMS is how long they are kept, in milliseconds; 0 means as
	// long as the run.
	ExpireMS int64 `json:"expireMs,omitempty"`
	// When is "on-success" (the default when empty) or "always".
	When string `json:"when,omitempty"`
}

// Artifact upload conditions.
const (
	ArtifactsOnSuccess = "on-success"
	ArtifactsAlways    = "always"
)

// Bounds of cache and artifact declarations.
const (
	MaxCaches        = 8
	MaxCachePaths    = 16
	MaxRestoreKeys   = 8
	MaxArtifactPaths = 32
	maxKeyLen        = 512
	maxHashPatterns  = 8
)

// hashFilesRE matches one `${{ hashFiles('a', 'b') }}` of a cache key.
var hashFilesRE = regexp.MustCompile(`\$\{\{\s*hashFiles\(([^)]*)\)\s*\}\}`)

// hashArgRE matches one single-quoted argument of hashFiles.
var hashArgRE = regexp.MustCompile(`^\s*'([^']+)'\s*$`)

// HashFilesPatterns returns the patterns of each hashFiles call of a cache
// key, in order, with the text spans they occupy.
func HashFilesPatterns(key string) (calls [][2]int, patterns [][]string, err error) {
	for _, m := range hashFilesRE.FindAllStringSubmatchIndex(key, -1) {
		args := key[m[2]:m[3]]
		var pats []string
		for a := range strings.SplitSeq(args, ",") {
			am := hashArgRE.FindStringSubmatch(a)
			if am == nil {
				return nil, nil, fmt.Errorf("hashFiles takes single-quoted patterns, got (%s)", args)
			}
			if !ValidWorkspacePattern(am[1]) {
				return nil, nil, fmt.Errorf("hashFiles: %q is not a pattern relative to the workspace", am[1])
			}
			pats = append(pats, am[1])
		}
		if len(pats) == 0 || len(pats) > maxHashPatterns {
			return nil, nil, fmt.Errorf("hashFiles takes 1 to %d patterns", maxHashPatterns)
		}
		calls = append(calls, [2]int{m[0], m[1]})
		patterns = append(patterns, pats)
	}
	return calls, patterns, nil
}

// ValidWorkspacePattern reports whether p is a doublestar pattern that
// stays inside the workspace: relative, without "..", valid.
func ValidWorkspacePattern(p string) bool {
	if p == "" || len(p) > 1024 || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return false
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == ".." {
			return false
		}
	}
	return doublestar.ValidatePattern(p)
}

// validCachePath reports whether a cache path is inside the workspace or
// under the home directory (~/...), without "..".
func validCachePath(p string) bool {
	rest, home := strings.CutPrefix(p, "~/")
	if home {
		p = rest
	}
	return ValidWorkspacePattern(p) && !strings.ContainsAny(p, "*?[{")
}

// parseCache reads `cache: [{key, paths, restore-keys}]`.
func (p *fileParser) parseCache(n *yaml.Node, what string) []rawCache {
	r := resolve(n)
	if r.Kind != yaml.SequenceNode {
		p.errorf(r, "%s: expected a list of {key, paths, restore-keys}, got %s", what, kindName(r))
		return nil
	}
	if len(r.Content) > MaxCaches {
		p.errorf(r, "%s: %d caches, over the limit of %d", what, len(r.Content), MaxCaches)
		return nil
	}
	var out []rawCache
	for i, c := range r.Content {
		cw := fmt.Sprintf("%s[%d]", what, i)
		fields, ok := p.mapping(c, cw)
		if !ok {
			continue
		}
		p.checkKeys(fields, cw, "key", "paths", "restore-keys")
		rc := rawCache{n: resolve(c)}
		for _, f := range fields {
			switch f.key {
			case "key":
				rc.c.Key, _ = p.str(f.value, cw+".key")
				rc.keyN = f.value
			case "paths":
				rc.c.Paths, _ = p.strList(f.value, cw+".paths")
				for _, path := range rc.c.Paths {
					if !validCachePath(path) {
						p.errorf(f.value, "%s.paths: %q must be a directory or file inside the workspace, or under ~/, without .. or wildcards", cw, path)
					}
				}
				if len(rc.c.Paths) > MaxCachePaths {
					p.errorf(f.value, "%s.paths: %d paths, over the limit of %d", cw, len(rc.c.Paths), MaxCachePaths)
				}
			case "restore-keys":
				rc.c.RestoreKeys, _ = p.strList(f.value, cw+".restore-keys")
				if len(rc.c.RestoreKeys) > MaxRestoreKeys {
					p.errorf(f.value, "%s.restore-keys: %d keys, over the limit of %d", cw, len(rc.c.RestoreKeys), MaxRestoreKeys)
				}
			}
		}
		if strings.TrimSpace(rc.c.Key) == "" {
			p.errorf(rc.n, "%s: a cache needs a key", cw)
			continue
		}
		if len(rc.c.Paths) == 0 {
			p.errorf(rc.n, "%s: a cache needs at least one path", cw)
			continue
		}
		out = append(out, rc)
	}
	return out
}

type rawCache struct {
	c    Cache
	n    *yaml.Node
	keyN *yaml.Node
}

// parseArtifacts reads `artifacts: {paths, expire, when}` (or a list of
// paths).
func (p *fileParser) parseArtifacts(n *yaml.Node, what string) *Artifacts {
	r := resolve(n)
	a := &Artifacts{}
	if r.Kind == yaml.SequenceNode || r.Kind == yaml.ScalarNode {
		a.Paths, _ = p.strList(r, what)
	} else {
		fields, ok := p.mapping(n, what)
		if !ok {
			return nil
		}
		p.checkKeys(fields, what, "paths", "expire", "when")
		for _, f := range fields {
			switch f.key {
			case "paths":
				a.Paths, _ = p.strList(f.value, what+".paths")
			case "expire":
				a.ExpireMS, _ = p.expiry(f.value, what+".expire")
			case "when":
				a.When, _ = p.str(f.value, what+".when")
				if a.When != ArtifactsOnSuccess && a.When != ArtifactsAlways {
					p.errorf(f.value, "%s.when: %q: want %s or %s", what, a.When, ArtifactsOnSuccess, ArtifactsAlways)
				}
			}
		}
	}
	if len(a.Paths) == 0 {
		p.errorf(r, "%s: name at least one path (paths: [dist/**])", what)
		return nil
	}
	if len(a.Paths) > MaxArtifactPaths {
		p.errorf(r, "%s: %d paths, over the limit of %d", what, len(a.Paths), MaxArtifactPaths)
	}
	for _, path := range a.Paths {
		if !ValidWorkspacePattern(path) {
			p.errorf(r, "%s: %q must be a pattern relative to the workspace, without ..", what, path)
		}
	}
	return a
}

// maxExpiry bounds an artifact expiry.
const maxExpiry = 365 * 24 * time.Hour

// expiry reads a duration that may also be given in days ("7d").
func (p *fileParser) expiry(n *yaml.Node, what string) (int64, bool) {
	r := resolve(n)
	if r.Kind == yaml.ScalarNode {
		if days, ok := strings.CutSuffix(r.Value, "d"); ok {
			d, err := strconv.Atoi(days)
			if err != nil || d < 1 || time.Duration(d)*24*time.Hour > maxExpiry {
				p.errorf(r, "%s: %q: want 1d to %dd, or a duration such as 12h", what, r.Value, int(maxExpiry.Hours()/24))
				return 0, false
			}
			return (time.Duration(d) * 24 * time.Hour).Milliseconds(), true
		}
	}
	return p.duration(n, what)
}

// buildCaches fills the matrix.* and env.* references of the cache keys
// (event.* and inputs.* wait for Bind, hashFiles for the agent) and
// checks their hashFiles calls.
func (p *fileParser) buildCaches(j *rawJob, combo, env map[string]string, inputs map[string]bool, what string) []Cache {
	var out []Cache
	for i, rc := range j.caches {
		cw := fmt.Sprintf("%s.cache[%d]", what, i)
		c := rc.c
		keys := append([]string{c.Key}, c.RestoreKeys...)
		for k, key := range keys {
			calls, _, err := HashFilesPatterns(key)
			if err != nil {
				p.errorf(rc.keyN, "%s.key: %s", cw, err)
				continue
			}
			// Interpolate around the hashFiles calls, which stay as they are.
			var b strings.Builder
			last := 0
			for _, span := range calls {
				filled, problems := interpolate(key[last:span[0]], interpScope{matrix: combo, env: env, inputs: inputs}, modeDeferred)
				for _, m := range problems {
					p.errorf(rc.keyN, "%s.key: %s", cw, m)
				}
				b.WriteString(filled)
				b.WriteString(key[span[0]:span[1]])
				last = span[1]
			}
			filled, problems := interpolate(key[last:], interpScope{matrix: combo, env: env, inputs: inputs}, modeDeferred)
			for _, m := range problems {
				p.errorf(rc.keyN, "%s.key: %s", cw, m)
			}
			b.WriteString(filled)
			if len(b.String()) > maxKeyLen {
				p.errorf(rc.keyN, "%s.key: %d bytes, over the limit of %d", cw, b.Len(), maxKeyLen)
			}
			keys[k] = b.String()
		}
		c.Key, c.RestoreKeys = keys[0], keys[1:]
		if len(c.RestoreKeys) == 0 {
			c.RestoreKeys = nil
		}
		out = append(out, c)
	}
	return out
}
