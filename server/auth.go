package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mementohq/memento/problem"
	"github.com/mementohq/memento/run"
)

// DefaultTenant is the only tenant of a server with no API keys.
const DefaultTenant = "default"

// MinAPIKeyLength keeps guessable keys out of configuration.
const MinAPIKeyLength = 16

// Role is what a key may do. Roles are ordered: each includes the ones before.
type Role int

// The roles an API key can carry.
const (
	RoleReader Role = iota + 1 // read-only: GET and HEAD
	RoleWriter                 // reads and writes runs, sessions, memories
	RoleAdmin                  // also operator actions (retention, approvals, ...)
)

// String returns the role's configuration name.
func (r Role) String() string {
	switch r {
	case RoleReader:
		return "reader"
	case RoleWriter:
		return "writer"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	switch s {
	case "reader":
		return RoleReader, nil
	case "writer":
		return RoleWriter, nil
	case "admin":
		return RoleAdmin, nil
	}
	return 0, fmt.Errorf("unknown role %q (want reader, writer or admin)", s)
}

// Principal is who a request acts as. User, when set, binds the key to
// one end user: such a key serves the MCP endpoint only, where every tool
// acts as that user (the /v1 API names users in its arguments).
type Principal struct {
	Tenant string
	Role   Role
	User   string
}

type keyEntry struct {
	hash [sha256.Size]byte
	p    Principal
}

// KeySet holds API keys as sha256 hashes only; the keys themselves are not kept.
type KeySet struct {
	entries []keyEntry
}

// NewKeySet returns an empty key set.
func NewKeySet() *KeySet { return &KeySet{} }

// Add registers a key for a tenant and role.
func (ks *KeySet) Add(key, tenant string, role Role) error {
	return ks.AddPrincipal(key, Principal{Tenant: tenant, Role: role})
}

// AddPrincipal registers a key for a principal (a user-bound key when p.User is set).
func (ks *KeySet) AddPrincipal(key string, p Principal) error {
	tenant, role := p.Tenant, p.Role
	if len(key) < MinAPIKeyLength {
		return fmt.Errorf("api key for tenant %q is shorter than %d characters", tenant, MinAPIKeyLength)
	}
	if strings.ContainsAny(key, " \t\r\n,") {
		return fmt.Errorf("api key for tenant %q contains whitespace or a comma", tenant)
	}
	if err := run.ValidID("tenant", tenant); err != nil {
		return fmt.Errorf("api key tenant: %w", err)
	}
	if role < RoleReader || role > RoleAdmin {
		return fmt.Errorf("api key for tenant %q: invalid role %d", tenant, role)
	}
	if p.User != "" {
		if err := run.ValidID("api key user", p.User); err != nil {
			return fmt.Errorf("api key for tenant %q: %w", tenant, err)
		}
	}
	h := sha256.Sum256([]byte(key))
	for _, e := range ks.entries {
		if e.hash == h {
			return fmt.Errorf("api key for tenant %q is configured twice", tenant)
		}
	}
	ks.entries = append(ks.entries, keyEntry{hash: h, p: p})
	return nil
}

// Len returns how many keys are configured.
func (ks *KeySet) Len() int {
	if ks == nil {
		return 0
	}
	return len(ks.entries)
}

// Lookup finds the principal of a presented key. It compares against every
// entry in constant time, so timing tells nothing about which key matched.
func (ks *KeySet) Lookup(key string) (Principal, bool) {
	h := sha256.Sum256([]byte(key))
	var found Principal
	ok := 0
	for _, e := range ks.entries {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 {
			found, ok = e.p, 1
		}
	}
	return found, ok == 1
}

// ParseAPIKeys reads "key=tenant[:role[:user]],..." (role defaults to
// writer) into ks; a key with a user serves /mcp only, as that user. Empty
// items are ignored, so a trailing comma is harmless.
func ParseAPIKeys(ks *KeySet, spec string) error {
	for i, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		// The last '=' separates, so base64 keys with '=' padding work.
		eq := strings.LastIndex(item, "=")
		if eq < 0 {
			return fmt.Errorf("api key #%d: want key=tenant[:role[:user]]", i+1)
		}
		key, rest := item[:eq], item[eq+1:]
		parts := strings.Split(rest, ":")
		if len(parts) > 3 {
			return fmt.Errorf("api key #%d: want key=tenant[:role[:user]], not %d parts after '=' (a user name holds no ':')", i+1, len(parts))
		}
		tenant, role, user := parts[0], RoleWriter, ""
		if len(parts) > 1 {
			r, err := ParseRole(parts[1])
			if err != nil {
				return fmt.Errorf("api key #%d: %w", i+1, err)
			}
			role = r
		}
		if len(parts) > 2 {
			// An empty user would make the key tenant-wide, which its
			// writer did not mean: say so rather than grant it.
			if user = parts[2]; user == "" {
				return fmt.Errorf("api key #%d: the user after the role is empty: leave out the ':' for a tenant-wide key", i+1)
			}
			// A key with a user serves /mcp only, and /mcp needs the writer role.
			if role == RoleReader {
				return fmt.Errorf("api key #%d: a key with a user serves /mcp only, which needs the writer role, not reader", i+1)
			}
		}
		if err := ks.AddPrincipal(key, Principal{Tenant: tenant, Role: role, User: user}); err != nil {
			return fmt.Errorf("api key #%d: %w", i+1, err)
		}
	}
	return nil
}

// PrincipalFrom returns the principal an authenticated request acts as.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	if ri, ok := ctx.Value(reqInfoKey{}).(*reqInfo); ok && ri.authed {
		return ri.principal, true
	}
	return Principal{}, false
}

// tenant returns the tenant of an authenticated request. Handlers of /v1
// routes always run after authenticate, so the value is always there.
func tenant(r *http.Request) string {
	p, _ := PrincipalFrom(r.Context())
	return p.Tenant
}

// authenticate resolves the request's principal, or answers 401/403.
func (s *Server) authenticate(r *http.Request, need Role) (Principal, error) {
	if s.keys.Len() == 0 {
		// No keys: loopback only (enforced at listen), one tenant, full rights.
		return Principal{Tenant: DefaultTenant, Role: RoleAdmin}, nil
	}
	if vs := r.Header.Values("Authorization"); len(vs) > 1 {
		// Which of two keys acts? Neither: the first one silently won.
		return Principal{}, newError(problem.Unauthorized, "Authorization is given more than once; send one key")
	}
	h := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return Principal{}, newError(problem.Unauthorized, "an API key is required: Authorization: Bearer <key>")
	}
	p, found := s.keys.Lookup(strings.TrimSpace(key))
	if !found {
		return Principal{}, newError(problem.Unauthorized, "the API key is not valid")
	}
	if p.User != "" {
		return Principal{}, newError(problem.Forbidden, "this API key is bound to one user and serves the MCP endpoint (/mcp) only")
	}
	if p.Role < need {
		return Principal{}, newError(problem.Forbidden, fmt.Sprintf("this route needs the %s role; the key has %s", need, p.Role))
	}
	return p, nil
}

// CheckListenAddr refuses a non-loopback address when no API keys are
// configured: without keys anyone who can connect is the default tenant.
func CheckListenAddr(addr string, keysConfigured bool) error {
	if keysConfigured {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("refusing to listen on %q without API keys: with no keys configured the server only listens on a loopback address (127.0.0.1, [::1], localhost); set MEMENTO_API_KEYS=\"key=tenant[:role],...\" or --api-keys to listen elsewhere", addr)
	}
	return nil
}

// checkLocalRequest guards a keyless server, which listens on loopback only,
// against web pages: a page the developer opens may rebind its own name to
// 127.0.0.1 (DNS rebinding) and would then be the default tenant, so the
// Host must name a loopback address, and a browser's Origin, when sent,
// must be a loopback origin too. A client on the machine sends both right.
// Only a request that came in on a loopback socket is checked (the only
// kind a keyless server accepts; one handed to ServeHTTP directly, as in
// tests, has none).
func checkLocalRequest(r *http.Request) error {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || la == nil || !isLoopbackHost(la.String()) {
		return nil
	}
	if !isLoopbackHost(r.Host) {
		return newError(problem.Forbidden, fmt.Sprintf("the Host %q is not a loopback address: a server without API keys only serves requests addressed to localhost, 127.0.0.1 or [::1]", r.Host))
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !isLoopbackHost(u.Host) {
			return newError(problem.Forbidden, fmt.Sprintf("the Origin %q is not a loopback origin: a server without API keys does not serve web pages of other sites", o))
		}
	}
	return nil
}

// isLoopbackHost tells whether host (a Host header: name or address, with
// an optional port) names the local machine.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
