package redis_test

import (
	"testing"

	"github.com/mementohq/memento/internal/testenv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mementohq/memento/pii"
	"github.com/mementohq/memento/session"
	mredis "github.com/mementohq/memento/store/redis"
	"github.com/mementohq/memento/storetest"
)

// openClusterStore opens the store on the tests' Redis Cluster (fails in CI
// without one) under a random key prefix, deleted when the test ends.
func openClusterStore(t testing.TB) *mredis.Store {
	t.Helper()
	url := testenv.RedisClusterURL(t)
	prefix := testenv.RandomID("mt-") + ":"
	s, err := mredis.Open(t.Context(), url, mredis.Options{Prefix: prefix})
	if err != nil {
		t.Fatalf("open the Redis store on the cluster %s: %v", url, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	testenv.CleanupRedisKeys(t, s.Client(), prefix+"*")
	return s
}

// TestClusterSessionStoreSuite runs the session conformance suite on a
// real three-master Redis Cluster: a script whose keys spanned slots would
// fail there with CROSSSLOT.
func TestClusterSessionStoreSuite(t *testing.T) {
	s := openClusterStore(t)
	if _, ok := s.Client().(*goredis.ClusterClient); !ok {
		t.Fatalf("a cluster URL made a %T, want a cluster client", s.Client())
	}
	storetest.SessionStoreSuite(t, func(t *testing.T) session.Store { return s })
}

func TestClusterPIIVaultSuite(t *testing.T) {
	s := openClusterStore(t)
	storetest.PIIVaultSuite(t, func(t *testing.T) pii.Store { return s })
}

// TestClusterSpreadsSessions checks that sessions of one user land on
// several nodes (the hash tag is per session, not per user) and that the
// user's listing still finds them all.
func TestClusterSpreadsSessions(t *testing.T) {
	s := openClusterStore(t)
	cc := s.Client().(*goredis.ClusterClient)
	ctx := t.Context()
	svc := session.NewService(s, session.Options{})
	nodes := map[string]bool{}
	for range 12 {
		id := testenv.RandomID("s")
		if _, _, err := svc.Put(ctx, "t", id, session.PutRequest{UserID: "u"}); err != nil {
			t.Fatalf("put: %v", err)
		}
		node, err := cc.MasterForKey(ctx, s.Prefix()+"{t:t:s:"+id+"}")
		if err != nil {
			t.Fatalf("master for key: %v", err)
		}
		nodes[node.Options().Addr] = true
	}
	if len(nodes) < 2 {
		t.Fatalf("12 sessions on %d node(s): want them spread over the cluster", len(nodes))
	}
	list, err := svc.ListUser(ctx, "t", "u", 100)
	if err != nil || len(list) != 12 {
		t.Fatalf("list across nodes: %d sessions, %v; want 12", len(list), err)
	}
}
