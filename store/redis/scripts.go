package redis

import goredis "github.com/redis/go-redis/v9"

// Key layout (P = prefix, T/S/U = escaped tenant, session and user ids):
//
//	P{t:T:s:S}:m   hash   session record (fields below)
//	P{t:T:s:S}:l   list   messages, oldest first, each "seq|created_us|json"
//	P{t:T:u:U}:ix  zset   the user's sessions; score >= the session's expiry (ms)
//	P{t:T:v:ID}    string one vault value (JSON)
//
// Session hash fields: u user, a app, st state, r revision, sm summary JSON,
// su summary time, n message count, ls last seq, lt last message time,
// ttl (ms), c created, la last activity, x expiry (times in unix µs),
// ix the score last written to the user index.
//
// Every script checks owner and expiry itself and moves the native expiry
// of both session keys to the same instant, so the keys vanish together.

// prelude is shared by the session scripts.
const prelude = `
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%d', n) end
-- live reads the given fields plus u and x; nil if missing, foreign or expired.
local function live(user, now, ...)
  local m = redis.call('HMGET', KEYS[1], 'u', 'x', ...)
  if not m[1] or m[1] ~= user or tonumber(m[2]) <= now then return nil end
  return m
end
local function expire_at(x)
  local ms = fmt(math.ceil(x / 1000))
  redis.call('PEXPIREAT', KEYS[1], ms)
  redis.call('PEXPIREAT', KEYS[2], ms)
end
-- index_score returns the new user-index score when the expiry outgrew the
-- last one written (0 otherwise); the slack makes that rare for active sessions.
local function index_score(ix, x, ttl)
  local xms = math.ceil(x / 1000)
  if xms <= (tonumber(ix) or 0) then return 0 end
  local score = xms + math.max(math.floor(ttl / 2), 1000)
  redis.call('HSET', KEYS[1], 'ix', fmt(score))
  return score
end
local SCALARS = {'u', 'a', 'r', 'sm', 'su', 'n', 'ls', 'ttl', 'c', 'la', 'x'}
local function scalars() return redis.call('HMGET', KEYS[1], unpack(SCALARS)) end
`

// putScript creates or replaces a session.
// KEYS: meta, list. ARGV: user, app, state, ttl_ms, expected_rev.
// Returns {"nf"} | {"stale", rev} | {"ok", created, index_score, scalars...}.
var putScript = goredis.NewScript(prelude + `
local now = now_us()
local ttl = tonumber(ARGV[4])
local x = now + ttl * 1000
local m = redis.call('HMGET', KEYS[1], 'u', 'x', 'r', 'ix')
local created = 0
if not m[1] or tonumber(m[2]) <= now then
  if ARGV[5] ~= '0' then return {'stale', '0'} end
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('HSET', KEYS[1], 'u', ARGV[1], 'a', ARGV[2], 'st', ARGV[3], 'r', '1', 'ttl', ARGV[4],
    'c', fmt(now), 'la', fmt(now), 'x', fmt(x), 'n', '0', 'ls', '0', 'lt', '0', 'ix', '0')
  created = 1
  m[4] = '0'
else
  if m[1] ~= ARGV[1] then return {'nf'} end
  if ARGV[5] ~= '0' and m[3] ~= ARGV[5] then return {'stale', m[3]} end
  redis.call('HSET', KEYS[1], 'a', ARGV[2], 'st', ARGV[3], 'ttl', ARGV[4], 'la', fmt(now), 'x', fmt(x))
  redis.call('HINCRBY', KEYS[1], 'r', 1)
end
expire_at(x)
return {'ok', created, index_score(m[4], x, ttl), unpack(scalars())}
`)

// setStateScript is the compare-and-set of a state under an expected revision.
// KEYS: meta, list. ARGV: user, expected_rev, state.
var setStateScript = goredis.NewScript(prelude + `
local now = now_us()
local m = live(ARGV[1], now, 'r', 'ttl', 'ix')
if not m then return {'nf'} end
if m[3] ~= ARGV[2] then return {'stale', m[3]} end
local ttl = tonumber(m[4])
local x = now + ttl * 1000
redis.call('HSET', KEYS[1], 'st', ARGV[3], 'r', fmt(tonumber(m[3]) + 1), 'la', fmt(now), 'x', fmt(x))
expire_at(x)
return {'ok', 0, index_score(m[5], x, ttl), unpack(scalars())}
`)

// appendScript pushes messages and trims the oldest beyond the cap, atomically.
// KEYS: meta, list. ARGV: user, cap, message JSON...
// Returns {"nf"} | {"ok", trimmed, count, first_seq, first_us, expiry_us, index_score}.
var appendScript = goredis.NewScript(prelude + `
local now = now_us()
local m = live(ARGV[1], now, 'ttl', 'ls', 'lt', 'ix')
if not m then return {'nf'} end
local ttl, ls, lt = tonumber(m[3]), tonumber(m[4]), tonumber(m[5])
-- times strictly increase within a session even if the clock steps back
local t0 = math.max(now, lt + 1)
local n = #ARGV - 2
local elems = {}
for i = 1, n do
  elems[i] = fmt(ls + i) .. '|' .. fmt(t0 + i - 1) .. '|' .. ARGV[i + 2]
end
local len = redis.call('RPUSH', KEYS[2], unpack(elems))
local cap = tonumber(ARGV[2])
local trimmed = 0
if len > cap then
  trimmed = len - cap
  redis.call('LTRIM', KEYS[2], trimmed, -1)
end
local x = now + ttl * 1000
redis.call('HSET', KEYS[1], 'n', fmt(len - trimmed), 'ls', fmt(ls + n), 'lt', fmt(t0 + n - 1), 'la', fmt(now), 'x', fmt(x))
expire_at(x)
return {'ok', trimmed, len - trimmed, fmt(ls + 1), fmt(t0), fmt(x), index_score(m[6], x, ttl)}
`)

// messagesScript returns the newest messages matching the filter, newest first.
// KEYS: meta, list. ARGV: user, limit, since_us, after_seq.
var messagesScript = goredis.NewScript(prelude + `
local m = live(ARGV[1], now_us())
if not m then return {'nf'} end
local limit, since, after = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {'ok'}
local hi = redis.call('LLEN', KEYS[2]) - 1
local step = math.min(limit, 128)
while hi >= 0 do
  local lo = math.max(0, hi - step + 1)
  local chunk = redis.call('LRANGE', KEYS[2], lo, hi)
  for i = #chunk, 1, -1 do
    local e = chunk[i]
    local p1 = string.find(e, '|', 1, true)
    local p2 = string.find(e, '|', p1 + 1, true)
    if tonumber(string.sub(e, 1, p1 - 1)) <= after or tonumber(string.sub(e, p1 + 1, p2 - 1)) <= since then
      return out
    end
    out[#out + 1] = e
    if #out > limit then return out end
  end
  hi = lo - 1
end
return out
`)

// summaryScript sets the summary slot.
// KEYS: meta, list. ARGV: user, summary JSON.
var summaryScript = goredis.NewScript(prelude + `
local now = now_us()
local m = live(ARGV[1], now, 'ttl', 'ix')
if not m then return {'nf'} end
local ttl = tonumber(m[3])
local x = now + ttl * 1000
redis.call('HSET', KEYS[1], 'sm', ARGV[2], 'su', fmt(now), 'la', fmt(now), 'x', fmt(x))
expire_at(x)
local out = {'ok', 0, index_score(m[4], x, ttl), unpack(scalars())}
out[#out + 1] = redis.call('HGET', KEYS[1], 'st')
return out
`)

// deleteScript closes a session: returns its record and deletes both keys.
// KEYS: meta, list. ARGV: user.
var deleteScript = goredis.NewScript(prelude + `
local m = live(ARGV[1], now_us())
if not m then return {'nf'} end
local all = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2])
return {'ok', all}
`)

// indexScript raises a member's score in the user index and keeps the index
// alive at least as long as its longest-lived session.
// KEYS: index. ARGV: score_ms, session id.
var indexScript = goredis.NewScript(`
redis.call('ZADD', KEYS[1], 'GT', ARGV[1], ARGV[2])
local cur = redis.call('PEXPIRETIME', KEYS[1])
if cur < 0 or cur < tonumber(ARGV[1]) then redis.call('PEXPIREAT', KEYS[1], ARGV[1]) end
return 1
`)

var allScripts = []*goredis.Script{putScript, setStateScript, appendScript, messagesScript, summaryScript, deleteScript, indexScript}
