package workflow

import "strings"

// dashedNamespaces are the map-valued namespaces of `if:` whose keys may
// hold a '-': input names, matrix dimensions and job names all follow
// nameRE. env keys cannot (envKeyRE), and event fields are fixed.
var dashedNamespaces = map[string]bool{"inputs": true, "matrix": true, "needs": true}

// quoteDashedNames rewrites each `ns.name-with-dashes` of an expression,
// for ns one of dashedNamespaces, to the index form `ns["name-with-dashes"]`,
// so that `inputs.dry-run` reads the input "dry-run" instead of
// `inputs.dry - run`. As in GitHub Actions, a name runs greedily over
// letters, digits, '_' and '-': write `inputs.n - 1` (with spaces) for a
// subtraction. String literals and members of other values (`x.inputs.a-b`)
// are left alone. Text without such a name is returned unchanged.
func quoteDashedNames(src string) string {
	if !strings.Contains(src, "-") {
		return src
	}
	var b strings.Builder
	changed := false
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := stringEnd(src, i)
			b.WriteString(src[i:j])
			i = j
		case isIdentStart(c) && (i == 0 || !isIdentChar(src[i-1]) && src[i-1] != '.'):
			j := i + 1
			for j < len(src) && isIdentChar(src[j]) {
				j++
			}
			ns := src[i:j]
			b.WriteString(ns)
			i = j
			if !dashedNamespaces[ns] || i+1 >= len(src) || src[i] != '.' || !isIdentStart(src[i+1]) {
				continue
			}
			k := i + 2
			for k < len(src) && (isIdentChar(src[k]) || src[k] == '-') {
				k++
			}
			name := src[i+1 : k]
			if strings.Contains(name, "-") {
				b.WriteString(`["` + name + `"]`)
				changed = true
			} else {
				b.WriteString("." + name)
			}
			i = k
		default:
			b.WriteByte(c)
			i++
		}
	}
	if !changed {
		return src
	}
	return b.String()
}

// stringEnd returns the index just past the string literal that starts at
// src[i] (a quote), or len(src) when it is not closed. In '…' and "…" a
// backslash escapes the next byte; a `…` string has no escapes.
func stringEnd(src string, i int) int {
	q := src[i]
	for j := i + 1; j < len(src); j++ {
		switch {
		case src[j] == '\\' && q != '`':
			j++
		case src[j] == q:
			return j + 1
		}
	}
	return len(src)
}

func isIdentStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || '0' <= c && c <= '9'
}

// ifSource is the expr-lang text of an `if:` as written: braces stripped
// and dashed names quoted.
func ifSource(src string) string {
	return quoteDashedNames(stripBraces(src))
}
