package memory

import (
	"context"
	"sync"
)

// keyLocks makes this process's writes to one key of a subject take turns.
// Concurrent adds to a key race the store's check of its current claim, and
// only one of them wins each round; without turns, a burst of writers here
// spends its retries losing to itself. Writers in other processes still
// race, and write retries those.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	turn chan struct{} // holds one token while a writer has the key
	refs int           // writers holding or waiting; the entry goes at 0
}

// lock waits for the key's turn, or for ctx to end.
func (k *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyLock{turn: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
		return func() { <-l.turn; k.release(key, l) }, nil
	case <-ctx.Done():
		k.release(key, l)
		return nil, ctx.Err()
	}
}

func (k *keyLocks) release(key string, l *keyLock) {
	k.mu.Lock()
	if l.refs--; l.refs == 0 {
		delete(k.m, key)
	}
	k.mu.Unlock()
}
