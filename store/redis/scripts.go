package redis

import (
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mementohq/memento/session"
)

// Key layout (P = prefix, T/S/U = escaped tenant, session and user ids):
//
//	P{t:T:s:S}    hash    one session: its record and its messages
//	P{t:T:u:U}:ix zset    the user's sessions; score >= the session's expiry (ms)
//	P{t:T:v:ID}   string  one vault value (JSON)
//
// A session is ONE key, so one native expiry covers all of it and every
// script touches a single slot. Record fields: u user, a app, st state,
// r revision, sm summary JSON, su summary time, n message count, ls last
// seq, lt last message time, ttl (ms), c created, la last activity, x expiry
// (times in unix µs), ix the score last written to the user index, g the
// generation: a random token set at creation, so a session closed and
// created again is told apart from the old one at the same revision. Message
// seq s is field "#s" = "s|created_us|json"; seqs are consecutive and the
// cap drops the oldest, so the live messages are exactly #(ls-n+1) .. #ls,
// and every read goes by that window. The fields of dropped messages are
// deleted in blocks of 16 seqs (appendScript), so up to 15 of them may stay
// below the window until the next block goes or the key expires; sessions
// written before the blocks (each dropped field deleted at once) are the
// same layout with no such fields. No record field starts with '#'.

// prelude is shared by the session scripts. Numbers go to redis.call as
// they are (converted exactly); only string concatenation needs fmt, since
// tostring would write large numbers with an exponent.
const prelude = `
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%d', n) end
-- RECORD lists the record fields a script reads back; Go mirrors it.
local RECORD = {'u', 'x', 'a', 'r', 'sm', 'su', 'n', 'ls', 'lt', 'ttl', 'c', 'la', 'ix', 'g'}
-- record reads RECORD (plus extra fields) into a table; nil if the session
-- is missing, another user's or past its expiry.
local function record(user, now, ...)
  local v = redis.call('HMGET', KEYS[1], unpack(RECORD))
  if not v[1] or v[1] ~= user or tonumber(v[2]) <= now then return nil end
  local m = {}
  for i, f in ipairs(RECORD) do m[f] = v[i] end
  return m
end
-- reply is {"ok", flag, index_score, RECORD values...} after the changes in m.
local function reply(m, flag, score)
  local out = {'ok', flag, score}
  for i, f in ipairs(RECORD) do out[3 + i] = m[f] or false end
  return out
end
-- index_score returns the new user-index score when the expiry outgrew the
-- last one written (0 otherwise); the slack makes that rare for active
-- sessions. It updates m.ix and returns the HSET arguments to add.
local function index_score(m, x, ttl)
  local xms = math.ceil(x / 1000)
  if xms <= (tonumber(m.ix) or 0) then return 0 end
  local score = xms + math.max(math.floor(ttl / 2), 1000)
  m.ix = score
  return score
end
`

// putScript creates or replaces a session.
// KEYS: session. ARGV: user, app, state, ttl_ms, expected_rev, generation (for a creation).
// Returns {"nf"} | {"stale", rev} | {"ok", created, index_score, record...}.
var putScript = newScript(prelude + `
local now = now_us()
local ttl = tonumber(ARGV[4])
local x = now + ttl * 1000
local v = redis.call('HMGET', KEYS[1], 'u', 'x', 'r')
local created = 0
local m
if not v[1] or tonumber(v[2]) <= now then
  if ARGV[5] ~= '0' then return {'stale', '0'} end
  redis.call('DEL', KEYS[1])
  m = {u = ARGV[1], r = 1, n = 0, ls = 0, lt = 0, c = now, ix = 0, g = ARGV[6]}
  created = 1
else
  if v[1] ~= ARGV[1] then return {'nf'} end
  if ARGV[5] ~= '0' and v[3] ~= ARGV[5] then return {'stale', v[3]} end
  m = record(ARGV[1], now)
  m.r = tonumber(m.r) + 1
end
m.a, m.ttl, m.la, m.x = ARGV[2], ttl, now, x
local score = index_score(m, x, ttl)
redis.call('HSET', KEYS[1], 'u', m.u, 'a', m.a, 'st', ARGV[3], 'r', m.r, 'n', m.n, 'ls', m.ls, 'lt', m.lt,
  'ttl', ttl, 'c', m.c, 'la', now, 'x', x, 'ix', m.ix)
if created == 1 then redis.call('HSET', KEYS[1], 'g', m.g) end
redis.call('PEXPIRE', KEYS[1], ttl)
return reply(m, created, score)
`)

// The two hot scripts (set state, append) stand alone, without the
// prelude: defining its helpers on every call costs about 15% of Redis's
// throughput for a script, and each redis.call costs more again, so they
// make as few calls as they can.

// setStateScript is the compare-and-set of a state under an expected
// revision and, unless it is "", generation ("-" for a session created
// without one).
// KEYS: session. ARGV: user, expected_rev, state, generation.
// Returns {"nf"} | {"stale", rev} | {"gen"} | {"ok", 0, index_score, record...}.
var setStateScript = newScript(`
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- the record fields, in the order of RECORD / recordFields
local v = redis.call('HMGET', KEYS[1], 'u', 'x', 'a', 'r', 'sm', 'su', 'n', 'ls', 'lt', 'ttl', 'c', 'la', 'ix', 'g')
if v[1] ~= ARGV[1] or tonumber(v[2]) <= now then return {'nf'} end
if v[4] ~= ARGV[2] then return {'stale', v[4]} end
if ARGV[4] ~= '' and (v[14] or '-') ~= ARGV[4] then return {'gen'} end
local ttl = tonumber(v[10])
local x = now + ttl * 1000
local rev = v[4] + 1
local fmt = string.format
local sx, srev = fmt('%d', x), fmt('%d', rev)
local xms = math.ceil(x / 1000)
local score = 0
if xms > (tonumber(v[13]) or 0) then
  score = xms + math.max(math.floor(ttl / 2), 1000)
  v[13] = fmt('%d', score)
  redis.call('HSET', KEYS[1], 'st', ARGV[3], 'r', srev, 'la', fmt('%d', now), 'x', sx, 'ix', v[13])
else
  redis.call('HSET', KEYS[1], 'st', ARGV[3], 'r', srev, 'la', fmt('%d', now), 'x', sx)
end
redis.call('PEXPIRE', KEYS[1], v[10])
v[2], v[4], v[12] = sx, srev, now
return {'ok', 0, score, unpack(v)}
`)

// appendScript adds messages and drops the oldest beyond the cap, atomically.
// KEYS: session. ARGV: user, cap, message JSON...
// Returns {"nf"} | {"ok", trimmed, count, first_seq, first_us, expiry_us, index_score}.
//
// It is a chat's hot path, so its work does not grow with what the session
// holds: TIME, an HMGET of seven small fields, one HSET of the new fields
// and messages, PEXPIRE, and at the cap an HDEL per 16 appends; no stored
// JSON is read. Measured one call at a time against an empty script, the
// calls cost most of it (about 0.5 to 2 µs each) and the Lua around them
// little; a Lua number given to redis.call is printed with %.17g, which
// costs more than string.format('%d'), so numbers go as strings. A message
// the cap drops in the same call (a batch larger than the cap) is never
// written. One message, the common case, takes a path with no table.
var appendScript = newScript(appendSrc)

const appendSrc = `
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local v = redis.call('HMGET', KEYS[1], 'u', 'x', 'ttl', 'ls', 'lt', 'n', 'ix')
if v[1] ~= ARGV[1] or tonumber(v[2]) <= now then return {'nf'} end
local ttl, ls, count = tonumber(v[3]), tonumber(v[4]), tonumber(v[6])
local k = #ARGV - 2
-- times strictly increase within a session even if the clock steps back
local t0 = v[5] + 1
if now > t0 then t0 = now end
local x = now + ttl * 1000
local trimmed = count + k - tonumber(ARGV[2])
if trimmed < 0 then trimmed = 0 end
local kept = count + k - trimmed
local score = 0
local xms = math.ceil(x / 1000)
if xms > (tonumber(v[7]) or 0) then score = xms + math.max(math.floor(ttl / 2), 1000) end
local fmt = string.format
local sx, snow = fmt('%d', x), fmt('%d', now)
if k == 1 and score == 0 and kept > 0 then
  local s, ts = fmt('%d', ls + 1), fmt('%d', t0)
  local msg = s .. '|' .. ts .. '|' .. ARGV[3]
  if kept == count then
    -- at the cap the count stays: one field less to write
    redis.call('HSET', KEYS[1], 'ls', s, 'lt', ts, 'la', snow, 'x', sx, '#' .. s, msg)
  else
    redis.call('HSET', KEYS[1], 'n', fmt('%d', kept), 'ls', s, 'lt', ts, 'la', snow, 'x', sx, '#' .. s, msg)
  end
else
  local args = {'n', fmt('%d', kept), 'ls', fmt('%d', ls + k), 'lt', fmt('%d', t0 + k - 1), 'la', snow, 'x', sx}
  if score > 0 then
    args[11] = 'ix'
    args[12] = fmt('%d', score)
  end
  -- the first seq kept; new ones before it are dropped at once, unwritten
  local keep = ls + k - kept + 1
  for i = math.max(1, keep - ls), k do
    local s = fmt('%d', ls + i)
    args[#args + 1] = '#' .. s
    args[#args + 1] = s .. '|' .. fmt('%d', t0 + i - 1) .. '|' .. ARGV[i + 2]
  end
  -- unpack refuses more than ~8000 values: write in slices of pairs (the
  -- script is atomic all the same)
  for i = 1, #args, 1000 do
    redis.call('HSET', KEYS[1], unpack(args, i, math.min(i + 999, #args)))
  end
end
if trimmed > 0 then
  -- The cap drops the seqs first .. keep-1 from the window at once; their
  -- fields go in whole blocks of 16 seqs, when the window's first seq
  -- enters a new block: the block of the old first seq and every one up to
  -- the new (an HDEL per 16 appends at the cap instead of one per append).
  -- So at most 15 dropped messages stay stored, out of every read's reach.
  -- A field already gone (dropped one by one, as before the blocks) is
  -- no matter to HDEL.
  local first = ls - count + 1
  local keep = first + trimmed
  local from = first - (first - 1) % 16
  if keep - (keep - 1) % 16 > from then
    local old = {}
    for s = from, math.min(keep - 1, ls) do old[#old + 1] = '#' .. fmt('%d', s) end
    for i = 1, #old, 1000 do
      redis.call('HDEL', KEYS[1], unpack(old, i, math.min(i + 999, #old)))
    end
  end
end
redis.call('PEXPIRE', KEYS[1], v[3])
return {'ok', trimmed, kept, ls + 1, t0, x, score}
`

// appendKeyedScript is appendScript under an idempotency key: field "ik"
// holds the session's latest keyed appends, [[key, digest, first seq,
// count], ...] (at most session.MaxAppendKeys, oldest first). A key found
// with its digest answers {"replay", first, count}, with another
// {"mismatch"}; a new key is added and the append goes on as appendScript
// (same atomic call). The key list is in the session's hash, so it goes
// with the session.
// KEYS: session. ARGV: as appendScript's, then key, digest.
// Returns {"nf"} | {"mismatch"} | {"replay", first, count} | appendScript's reply.
var appendKeyedScript = newScript(`
local ikey, idig = ARGV[#ARGV - 1], ARGV[#ARGV]
ARGV[#ARGV] = nil
ARGV[#ARGV] = nil
local h = redis.call('HMGET', KEYS[1], 'u', 'x', 'ls', 'ik')
local tk = redis.call('TIME')
if h[1] ~= ARGV[1] or tonumber(h[2]) <= tk[1] * 1000000 + tk[2] then return {'nf'} end
local ks = {}
if h[4] then ks = cjson.decode(h[4]) end
for _, e in ipairs(ks) do
  if e[1] == ikey then
    if e[2] ~= idig then return {'mismatch'} end
    return {'replay', e[3], e[4]}
  end
end
ks[#ks + 1] = {ikey, idig, string.format('%d', tonumber(h[3]) + 1), string.format('%d', #ARGV - 2)}
while #ks > ` + strconv.Itoa(session.MaxAppendKeys) + ` do table.remove(ks, 1) end
redis.call('HSET', KEYS[1], 'ik', cjson.encode(ks))
` + appendSrc)

// messagesScript returns the newest messages matching the filter, newest first.
// KEYS: session. ARGV: user, limit, since_us, after_seq, before_seq (0: none).
var messagesScript = newScript(prelude + `
local m = record(ARGV[1], now_us())
if not m then return {'nf'} end
local limit, since, after, before = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local ls, n = tonumber(m.ls), tonumber(m.n)
local hi = ls
if before > 0 and before - 1 < hi then hi = before - 1 end
local lo = math.max(ls - n + 1, after + 1, hi - limit + 1)
if since > 0 and lo <= hi then
  -- times grow with seq: find the first seq created after since
  local a, b = lo, hi + 1
  while a < b do
    local mid = math.floor((a + b) / 2)
    local e = redis.call('HGET', KEYS[1], '#' .. fmt(mid))
    local p1 = string.find(e, '|', 1, true)
    local p2 = string.find(e, '|', p1 + 1, true)
    if tonumber(string.sub(e, p1 + 1, p2 - 1)) > since then b = mid else a = mid + 1 end
  end
  lo = a
end
local out = {'ok'}
if lo > hi then return out end
local fields = {}
for s = hi, lo, -1 do fields[#fields + 1] = '#' .. fmt(s) end
local vals = redis.call('HMGET', KEYS[1], unpack(fields))
for i = 1, #vals do out[i + 1] = vals[i] end
return out
`)

// summaryScript sets the summary slot.
// KEYS: session. ARGV: user, summary JSON.
var summaryScript = newScript(prelude + `
local now = now_us()
local m = record(ARGV[1], now)
if not m then return {'nf'} end
local ttl = tonumber(m.ttl)
local x = now + ttl * 1000
m.sm, m.su, m.la, m.x = ARGV[2], now, now, x
local score = index_score(m, x, ttl)
redis.call('HSET', KEYS[1], 'sm', ARGV[2], 'su', now, 'la', now, 'x', x, 'ix', m.ix)
redis.call('PEXPIRE', KEYS[1], ttl)
local out = reply(m, 0, score)
out[#out + 1] = redis.call('HGET', KEYS[1], 'st')
return out
`)

// deleteScript closes a session: returns its record and state, deletes the key.
// KEYS: session. ARGV: user.
var deleteScript = newScript(prelude + `
local m = record(ARGV[1], now_us())
if not m then return {'nf'} end
local out = reply(m, 0, 0)
out[#out + 1] = redis.call('HGET', KEYS[1], 'st')
redis.call('DEL', KEYS[1])
return out
`)

// indexScript raises a member's score in the user index and keeps the index
// alive at least as long as its longest-lived session.
// KEYS: index. ARGV: score_ms, session id.
var indexScript = newScript(`
redis.call('ZADD', KEYS[1], 'GT', ARGV[1], ARGV[2])
local cur = redis.call('PEXPIRETIME', KEYS[1])
if cur < 0 or cur < tonumber(ARGV[1]) then redis.call('PEXPIREAT', KEYS[1], ARGV[1]) end
return 1
`)

// scriptSources holds the source of every script, for the test that checks
// each touches KEYS[1] only (one cluster slot).
var scriptSources []string

func newScript(src string) *goredis.Script {
	scriptSources = append(scriptSources, src)
	return goredis.NewScript(src)
}

// recordFields mirrors RECORD in the prelude.
var recordFields = []string{"u", "x", "a", "r", "sm", "su", "n", "ls", "lt", "ttl", "c", "la", "ix", "g"}

// Positions in recordFields (and getFields).
const (
	fUser = iota
	fExpiry
	fApp
	fRev
	fSummary
	fSummaryAt
	fCount
	fLastSeq
	fLastTime
	fTTL
	fCreated
	fActivity
	fIndex
	fGen
	fState // getFields only
)

// listFields are what a list item needs: the record without the summary
// (and never the state or the messages), so a listing reads a few small
// fields per session whatever the size of its documents.
var listFields = []string{"u", "x", "a", "r", "n", "ls", "ttl", "c", "la"}

// getFields are what Get reads: the record and the state, never the messages.
var getFields = append(append([]string(nil), recordFields...), "st")

var allScripts = []*goredis.Script{putScript, setStateScript, appendScript, appendKeyedScript, messagesScript, summaryScript, deleteScript, indexScript}
