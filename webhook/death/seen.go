package guard

import "sync"

// seenSet is a bounded set of keys that forgets the oldest first: enough to
// keep the several reviews of one delete from writing a record twice,
// without growing with the cluster's history.
type seenSet struct {
	mu    sync.Mutex
	max   int
	keys  map[string]struct{}
	order []string
}

func newSeenSet(max int) *seenSet {
	return &seenSet{max: max, keys: make(map[string]struct{}, max)}
}

// add reports whether key was new, and remembers it.
func (s *seenSet) add(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[key]; ok {
		return false
	}
	if len(s.order) >= s.max {
		delete(s.keys, s.order[0])
		s.order = s.order[1:]
	}
	s.keys[key] = struct{}{}
	s.order = append(s.order, key)
	return true
}
