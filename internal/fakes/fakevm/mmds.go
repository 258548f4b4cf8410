package fakevm

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of the MMDS data store and token flow (docs/mmds/).
const (
	// DefaultMMDSSizeLimit is Firecracker's default data store limit
	// (and API payload limit), in bytes.
	DefaultMMDSSizeLimit = 51200
	// minTokenTTL and maxTokenTTL bound X-metadata-token-ttl-seconds.
	minTokenTTL = 1
	maxTokenTTL = 21600
	// maxTokenLen makes longer tokens invalid without decoding them, as
	// Firecracker's TOKEN_LENGTH_LIMIT does.
	maxTokenLen = 70
)

// Errors of the MMDS data store, with Firecracker's texts.
var (
	errMMDSLimit          = errors.New("The MMDS patch request doesn't fit.")
	errMMDSNotFound       = errors.New("The MMDS resource does not exist.")
	errMMDSNotInitialized = errors.New("The MMDS data store is not initialized.")
	errMMDSUnsupported    = errors.New("Cannot retrieve value. The value has an unsupported type.")
)

// mmdsStore is the MMDS data store: one JSON document, replaced by PUT and
// merged into by PATCH, read by the guest through the MMDS network
// endpoint. It also holds the session-token authority of MMDS V2. Its
// methods are safe for concurrent use: the API and the guest endpoint use
// it at the same time, and each update is atomic for a guest's read.
type mmdsStore struct {
	mu          sync.Mutex
	data        any // nil until the first PUT
	initialized bool
	limit       int
	version     string // "V1" or "V2"
	imdsCompat  bool
	key         []byte // HMAC key of the tokens
	now         func() time.Time
}

// newMMDSStore returns an empty store with the given size limit in bytes.
func newMMDSStore(limit int, now func() time.Time) *mmdsStore {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails
	if now == nil {
		now = time.Now
	}
	return &mmdsStore{limit: limit, version: "V1", key: key, now: now}
}

// configure sets the MMDS version and IMDS compatibility.
func (s *mmdsStore) configure(version string, imdsCompat bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version, s.imdsCompat = version, imdsCompat
}

// put replaces the document.
func (s *mmdsStore) put(doc any) error {
	b, _ := json.Marshal(doc) // a decoded JSON value always marshals
	if len(b) > s.limit {
		return errMMDSLimit
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data, s.initialized = doc, true
	return nil
}

// patch merges an RFC 7396 merge patch into the document.
func (s *mmdsStore) patch(p any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.initialized {
		return errMMDSNotInitialized
	}
	merged := mergePatch(deepCopy(s.data), p)
	b, _ := json.Marshal(merged)
	if len(b) > s.limit {
		return errMMDSLimit
	}
	s.data = merged
	return nil
}

// document returns a copy of the document (nil before the first PUT).
func (s *mmdsStore) document() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return deepCopy(s.data)
}

// lookup returns the value at the JSON pointer of a guest request path,
// formatted as JSON or in the IMDS text form.
func (s *mmdsStore) lookup(path string, asJSON bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Firecracker drops one trailing slash before resolving the pointer.
	path = strings.TrimSuffix(path, "/")
	v, ok := jsonPointer(s.data, path)
	if !ok {
		return "", errMMDSNotFound
	}
	if asJSON && !s.imdsCompat {
		b, _ := json.Marshal(v)
		return string(b), nil
	}
	return imdsFormat(v)
}

// mmdsVersion returns the configured version.
func (s *mmdsStore) mmdsVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// newToken returns a session token valid for ttl seconds: the expiry in
// Unix milliseconds and a MAC over it, base64-encoded.
func (s *mmdsStore) newToken(ttl int) string {
	var buf [8 + 16]byte
	binary.BigEndian.PutUint64(buf[:8], uint64(s.now().Add(time.Duration(ttl)*time.Second).UnixMilli()))
	copy(buf[8:], s.mac(buf[:8]))
	return base64.StdEncoding.EncodeToString(buf[:])
}

// validToken reports whether tok is a token of this store that has not
// expired.
func (s *mmdsStore) validToken(tok string) bool {
	if len(tok) > maxTokenLen {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(tok)
	if err != nil || len(raw) != 24 || !hmac.Equal(raw[8:], s.mac(raw[:8])) {
		return false
	}
	expiry := int64(binary.BigEndian.Uint64(raw[:8]))
	return s.now().UnixMilli() < expiry
}

func (s *mmdsStore) mac(b []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(b)
	return m.Sum(nil)[:16]
}

// jsonPointer resolves an RFC 6901 pointer ("" is the whole document).
func jsonPointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, doc != nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// imdsFormat is the IMDS text form: an object's keys one a line (sorted,
// objects with a trailing slash), or a string's value. Other values have
// no IMDS form.
func imdsFormat(v any) (string, error) {
	switch c := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(c))
		for k, val := range c {
			if _, obj := val.(map[string]any); obj {
				k += "/"
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return strings.Join(keys, "\n"), nil
	case string:
		return c, nil
	default:
		return "", errMMDSUnsupported
	}
}

// mergePatch applies an RFC 7396 merge patch to target.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	var out any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	_ = d.Decode(&out)
	return out
}
