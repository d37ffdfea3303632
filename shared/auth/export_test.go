package auth

import "time"

// HoldHashing takes every hashing slot of s until release is called, as
// MaxHashing concurrent sign-ins would, and makes a waiting request give
// up after wait.
func (s *Service) HoldHashing(wait time.Duration) (release func()) {
	s.hashWait = wait
	for range cap(s.hashing) {
		s.hashing <- struct{}{}
	}
	return func() {
		for range cap(s.hashing) {
			<-s.hashing
		}
	}
}
