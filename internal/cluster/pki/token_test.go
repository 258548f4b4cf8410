package pki

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// exampleToken is a well-formed token with recognisable parts.
var exampleToken = JoinToken{
	CAHash: strings.Repeat("0123456789abcdef", 4),
	ID:     "abcdefgh2345",
	Secret: strings.Repeat("fedcba9876543210", 4),
}

func TestJoinTokenRoundTrip(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	tok, err := NewJoinToken(ca.Hash())
	if err != nil {
		t.Fatal(err)
	}
	enc := tok.Encode()
	if len(enc) != JoinTokenLength || !strings.HasPrefix(enc, JoinTokenPrefix) {
		t.Fatalf("Encode() = %d bytes with prefix %q, want %d bytes starting with %q", len(enc), enc[:7], JoinTokenLength, JoinTokenPrefix)
	}
	for _, in := range []string{enc, "  " + enc + "\n"} {
		got, err := ParseJoinToken(in)
		if err != nil {
			t.Fatalf("ParseJoinToken: %v", err)
		}
		if got != tok {
			t.Errorf("round trip: got %#v, want %#v", got, tok)
		}
	}
	if tok.CAHash != ca.Hash() {
		t.Errorf("CAHash %s, want %s", tok.CAHash, ca.Hash())
	}
	again, err := NewJoinToken(ca.Hash())
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == tok.ID || again.Secret == tok.Secret {
		t.Error("two new tokens share an ID or a secret")
	}
}

func TestNewJoinTokenRefusesBadHash(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"", "abc", strings.Repeat("A", 64), strings.Repeat("g", 64)} {
		if _, err := NewJoinToken(h); err == nil {
			t.Errorf("NewJoinToken(%q) succeeded, want an error", h)
		}
	}
}

func TestParseJoinTokenErrors(t *testing.T) {
	t.Parallel()
	h, id, secret := exampleToken.CAHash, exampleToken.ID, exampleToken.Secret
	tests := []struct {
		name     string
		in       string
		wantText string
	}{
		{name: "empty", in: "", wantText: "empty"},
		{name: "blank", in: " \n\t", wantText: "empty"},
		{name: "too long", in: strings.Repeat("k", 600), wantText: "600 bytes"},
		{name: "no prefix", in: h + "." + id + "." + secret, wantText: `does not start with "kjoin1."`},
		{name: "other version", in: "kjoin2." + h + "." + id + "." + secret, wantText: `does not start with "kjoin1."`},
		{name: "uppercase prefix", in: "KJOIN1." + h + "." + id + "." + secret, wantText: `does not start with "kjoin1."`},
		{name: "job token", in: "kjt_" + secret, wantText: `does not start with "kjoin1."`},
		{name: "prefix only", in: "kjoin1.", wantText: "1 dot-separated parts"},
		{name: "two parts", in: "kjoin1." + h + "." + secret, wantText: "2 dot-separated parts"},
		{name: "five parts", in: "kjoin1." + h + "." + id + "." + secret + ".x", wantText: "4 dot-separated parts"},
		{name: "empty hash", in: "kjoin1.." + id + "." + secret, wantText: "CA hash: empty"},
		{name: "short hash", in: "kjoin1." + h[:63] + "." + id + "." + secret, wantText: "CA hash: 63 characters, want 64"},
		{name: "long hash", in: "kjoin1." + h + "0." + id + "." + secret, wantText: "CA hash: 65 characters"},
		{name: "uppercase hash", in: "kjoin1." + strings.ToUpper(h) + "." + id + "." + secret, wantText: "CA hash: character 11 is not a lowercase hex digit"},
		{name: "non-hex hash", in: "kjoin1.z" + h[1:] + "." + id + "." + secret, wantText: "CA hash: character 1"},
		{name: "empty id", in: "kjoin1." + h + ".." + secret, wantText: "id: empty"},
		{name: "short id", in: "kjoin1." + h + ".abc." + secret, wantText: "id: 3 characters, want 12"},
		{name: "id with a digit outside base32", in: "kjoin1." + h + ".abcdefgh2341." + secret, wantText: "id: character 12"},
		{name: "empty secret", in: "kjoin1." + h + "." + id + ".", wantText: "secret: empty"},
		{name: "short secret", in: "kjoin1." + h + "." + id + "." + secret[:40], wantText: "secret: 40 characters, want 64"},
		{name: "base64 secret", in: "kjoin1." + h + "." + id + "." + secret[:63] + "_", wantText: "secret: character 64"},
		{name: "inner space", in: "kjoin1." + h + "." + id + " ." + secret, wantText: "id: 13 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseJoinToken(tt.in)
			if err == nil {
				t.Fatalf("ParseJoinToken: got no error, want one containing %q", tt.wantText)
			}
			if !errors.Is(err, ErrMalformedToken) {
				t.Errorf("error %v does not wrap ErrMalformedToken", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q, want it to contain %q", err, tt.wantText)
			}
			if strings.Contains(err.Error(), secret[:16]) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}

func TestJoinTokenRedactsSecret(t *testing.T) {
	t.Parallel()
	tok := exampleToken
	type holder struct {
		Name  string
		Token JoinToken
		Ptr   *JoinToken
	}
	h := holder{Name: "w1", Token: tok, Ptr: &tok}
	outputs := map[string]string{
		"%v":          fmt.Sprintf("%v", tok),
		"%+v":         fmt.Sprintf("%+v", tok),
		"%#v":         fmt.Sprintf("%#v", tok),
		"%s":          fmt.Sprintf("%s", tok),
		"%q":          fmt.Sprintf("%q", tok),
		"pointer %v":  fmt.Sprintf("%v", &tok),
		"pointer %#v": fmt.Sprintf("%#v", &tok),
		"holder %+v":  fmt.Sprintf("%+v", h),
		"holder %#v":  fmt.Sprintf("%#v", h),
		"error %v":    fmt.Errorf("join with %v", tok).Error(),
	}
	for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
		"slog text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"slog json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(newHandler(&buf))
		log.Info("joining", "token", tok, "token_ptr", &tok)
		log.Info("joining", slog.Any("token", tok))
		outputs[name] = buf.String()
	}
	for name, out := range outputs {
		if strings.Contains(out, tok.Secret) || strings.Contains(out, tok.Secret[:16]) {
			t.Errorf("%s prints the secret: %s", name, out)
		}
		if name != "%#v" && name != "pointer %#v" && !strings.Contains(out, tok.ID) {
			t.Errorf("%s leaves out the token ID: %s", name, out)
		}
	}
	t.Logf("%%v: %v", tok)
}

func TestSecretMatches(t *testing.T) {
	t.Parallel()
	tok := exampleToken
	stored := HashSecret(tok.Secret)
	if len(stored) != 64 || strings.Contains(stored, tok.Secret) {
		t.Fatalf("HashSecret = %q, want 64 hex digits unlike the secret", stored)
	}
	if !SecretMatches(stored, tok.Secret) {
		t.Error("SecretMatches(hash of secret, secret) = false, want true")
	}
	if SecretMatches(stored, strings.Repeat("0", 64)) || SecretMatches(stored, "") || SecretMatches("", tok.Secret) {
		t.Error("SecretMatches accepted a wrong secret or an empty hash")
	}
}

func TestVerifyCA(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	other := newTestCA(t, "c1")
	tok, err := NewJoinToken(ca.Hash())
	if err != nil {
		t.Fatal(err)
	}
	_, leafPEM := issueClient(t, ca, "node-1", time.Hour, time.Now())
	leafTok := tok
	leafTok.CAHash = certHash(mustParseCert(t, leafPEM).Raw)

	cert, err := tok.VerifyCA(ca.CertPEM())
	if err != nil {
		t.Fatalf("VerifyCA(the pinned CA): %v", err)
	}
	if !cert.Equal(ca.Certificate()) {
		t.Error("VerifyCA returned another certificate than the CA")
	}

	tests := []struct {
		name     string
		tok      JoinToken
		pem      []byte
		wantErr  error
		wantText []string
	}{
		{
			name: "another CA", tok: tok, pem: other.CertPEM(), wantErr: ErrCAMismatch,
			wantText: []string{"does not match", "man in the middle", other.Hash()[:16], ca.Hash()[:16]},
		},
		{name: "garbage", tok: tok, pem: []byte("hello"), wantText: []string{"not PEM"}},
		{name: "empty", tok: tok, pem: nil, wantText: []string{"no CERTIFICATE PEM block"}},
		{name: "two blocks", tok: tok, pem: append(ca.CertPEM(), other.CertPEM()...), wantText: []string{"2 PEM blocks, want exactly one"}},
		{name: "same block twice", tok: tok, pem: append(ca.CertPEM(), ca.CertPEM()...), wantText: []string{"2 PEM blocks, want exactly one"}},
		{name: "trailing text", tok: tok, pem: append(ca.CertPEM(), "junk"...), wantText: []string{"text that is not PEM after PEM block 1"}},
		{name: "leading text", tok: tok, pem: append([]byte("junk\n"), ca.CertPEM()...), wantText: []string{"not PEM"}},
		{name: "leaf certificate", tok: leafTok, pem: leafPEM, wantText: []string{"not a CA"}},
		{name: "leaf against the CA's token", tok: tok, pem: leafPEM, wantErr: ErrCAMismatch},
		{name: "request instead", tok: tok, pem: mustCSR(t, "node-1"), wantText: []string{`"CERTIFICATE REQUEST", want "CERTIFICATE"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cert, err := tt.tok.VerifyCA(tt.pem)
			if err == nil {
				t.Fatalf("VerifyCA: got %v, want an error", cert.Subject)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want it to wrap %v", err, tt.wantErr)
			}
			for _, w := range tt.wantText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), tt.tok.Secret) {
				t.Errorf("error %q holds the token's secret", err)
			}
		})
	}
}

// mustCSR returns a CSR for nodeID with a fresh key.
func mustCSR(t *testing.T, nodeID string) []byte {
	t.Helper()
	key, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewCSR(key, nodeID)
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

func FuzzParseJoinToken(f *testing.F) {
	f.Add(exampleToken.Encode())
	f.Add(" " + exampleToken.Encode() + "\n")
	f.Add("kjoin1.")
	f.Add("kjoin1...")
	f.Add("kjoin1." + exampleToken.CAHash + "..")
	f.Add("kjt_" + exampleToken.Secret)
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseJoinToken(s)
		if err != nil {
			if !errors.Is(err, ErrMalformedToken) {
				t.Fatalf("error %v does not wrap ErrMalformedToken", err)
			}
			return
		}
		enc := tok.Encode()
		if enc != strings.TrimSpace(s) {
			t.Fatalf("Encode() = %q, want the parsed input %q", enc, strings.TrimSpace(s))
		}
		again, err := ParseJoinToken(enc)
		if err != nil {
			t.Fatalf("ParseJoinToken(Encode()): %v", err)
		}
		if again != tok {
			t.Fatalf("round trip: got %#v, want %#v", again, tok)
		}
		if strings.Contains(tok.String(), tok.Secret) || strings.Contains(fmt.Sprintf("%+v", tok), tok.Secret) {
			t.Fatal("String() shows the secret")
		}
	})
}
