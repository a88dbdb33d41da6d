package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mementohq/memento/mcp"
	"github.com/mementohq/memento/run"
)

// HeaderUser names the end user of an MCP connection made with a
// tenant-wide key (or with no keys configured): the app that holds the key
// vouches for the user, and sets the header in its MCP client config, out
// of the model's reach. A user-bound key fixes the user itself.
const HeaderUser = "X-Memento-User"

// DefaultUser is the user of an MCP connection to a server without keys
// that names none: the one local user of a development setup.
const DefaultUser = "default"

// mcpBinding resolves the tenant and user every tool call of a request acts as.
func (s *Server) mcpBinding(h http.Header) (mcp.Binding, error) {
	named := strings.TrimSpace(h.Get(HeaderUser))
	if named != "" {
		if err := run.ValidID(HeaderUser, named); err != nil {
			return mcp.Binding{}, err
		}
	}
	if s.keys.Len() == 0 {
		if named == "" {
			named = DefaultUser
		}
		return mcp.Binding{Tenant: DefaultTenant, User: named}, nil
	}
	if len(h.Values("Authorization")) > 1 {
		return mcp.Binding{}, errors.New("Authorization is given more than once; send one key")
	}
	scheme, key, ok := strings.Cut(h.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return mcp.Binding{}, errors.New("an API key is required: Authorization: Bearer <key>")
	}
	p, found := s.keys.Lookup(strings.TrimSpace(key))
	if !found {
		return mcp.Binding{}, errors.New("the API key is not valid")
	}
	if p.Role < RoleWriter {
		return mcp.Binding{}, fmt.Errorf("%w: the MCP tools need the writer role; the key has %s", mcp.ErrForbidden, p.Role)
	}
	switch {
	case p.User == "":
		return mcp.Binding{Tenant: p.Tenant, User: named}, nil
	case named != "" && named != p.User:
		return mcp.Binding{}, fmt.Errorf("%w: this API key is bound to another user than %s names", mcp.ErrForbidden, HeaderUser)
	}
	return mcp.Binding{Tenant: p.Tenant, User: p.User}, nil
}

// mcpSessionIdle ends an MCP session nobody used for this long.
const mcpSessionIdle = 30 * time.Minute

// mcpHandler serves the MCP endpoint: streamable HTTP, every request
// authenticated, tool calls bound to the request's credentials.
//
// Sessions are kept (the protocol's Mcp-Session-Id, its several streams)
// but hold nothing an agent needs: every tool reads and writes the stores.
// They live in the instance that opened them: behind a load balancer
// without affinity a request reaching another instance gets 404 (and a
// client that starts again may land elsewhere again), so such deployments
// serve /mcp stateless (Options.MCPStateless: no sessions, each request
// stands alone). An idle session ends after mcpSessionIdle. DNS-rebinding protection (a localhost request with a foreign Host) is
// what guards a keyless loopback server from web pages; with keys every
// request needs a bearer key a page cannot know, and a reverse proxy on
// the same host must be able to pass its public Host through.
func (s *Server) mcpHandler(m *mcp.Server, stateless bool) http.Handler {
	return m.Handler(s.mcpBinding, &gomcp.StreamableHTTPOptions{
		Stateless:                  stateless,
		SessionTimeout:             mcpSessionIdle,
		Logger:                     s.log,
		MaxRequestBodyBytes:        s.maxBody,
		DisableLocalhostProtection: s.keys.Len() > 0,
	})
}
