package store

// WriteConnsOpened is how many connections the SQLite writer has opened.
func (s *Store) WriteConnsOpened() int64 { return s.writeConns.Load() }
