package store

import "testing"

func TestRebind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		dialect dialect
		query   string
		want    string
	}{
		{name: "sqlite keeps marks", dialect: sqliteDialect, query: "SELECT ? WHERE a = ?", want: "SELECT ? WHERE a = ?"},
		{name: "postgres numbers marks", dialect: postgresDialect, query: "SELECT ? WHERE a = ? AND b IN (?, ?)",
			want: "SELECT $1 WHERE a = $2 AND b IN ($3, $4)"},
		{name: "no marks", dialect: postgresDialect, query: "SELECT 1", want: "SELECT 1"},
		{name: "mark in string literal", dialect: postgresDialect, query: "SELECT '?', ? FROM t WHERE x = 'a?b'",
			want: "SELECT '?', $1 FROM t WHERE x = 'a?b'"},
		{name: "mark in quoted identifier", dialect: postgresDialect, query: `SELECT "odd?" FROM t WHERE x = ?`,
			want: `SELECT "odd?" FROM t WHERE x = $1`},
		{name: "escaped quote", dialect: postgresDialect, query: "SELECT 'it''s?' WHERE x = ?",
			want: "SELECT 'it''s?' WHERE x = $1"},
		{name: "ten or more", dialect: postgresDialect, query: "? ? ? ? ? ? ? ? ? ? ?",
			want: "$1 $2 $3 $4 $5 $6 $7 $8 $9 $10 $11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.dialect.rebind(tt.query); got != tt.want {
				t.Errorf("rebind(%q): got %q, want %q", tt.query, got, tt.want)
			}
		})
	}
}
