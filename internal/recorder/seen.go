package recorder

import "sync"

// SeenSet is a bounded set of keys that forgets the oldest first: enough to
// keep the several reviews of one delete from writing a record twice,
// without growing with the cluster's history.
type SeenSet struct {
	mu    sync.Mutex
	max   int
	keys  map[string]struct{}
	order []string
}

// NewSeenSet returns an empty set that holds at most max keys.
func NewSeenSet(max int) *SeenSet {
	return &SeenSet{max: max, keys: make(map[string]struct{}, max)}
}

// Has reports whether key is remembered.
func (s *SeenSet) Has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[key]
	return ok
}

// Add reports whether key was new, and remembers it.
func (s *SeenSet) Add(key string) bool {
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
