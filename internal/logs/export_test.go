package logs

import "os"

// SetWrite replaces the function that writes a chunk's buffer to its file,
// to simulate a failing disk. Call it only while no Append runs.
func (s *Store) SetWrite(fn func(f *os.File, b []byte) (int, error)) {
	if fn == nil {
		fn = (*os.File).Write
	}
	s.write = fn
}
