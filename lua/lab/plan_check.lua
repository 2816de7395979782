-- lab.plan's argument checks: every question and every public helper's arguments are
-- checked before any arithmetic, and each mistake is a Lua error naming the rank, the
-- helper and the value ("rank 0: plan: gpus = 1099511627776 is more than ...").
local M = {}

local function copy(t)
  local o = {}
  for k, v in pairs(t or {}) do o[k] = v end
  return o
end

-- every error names the rank, as the rest of lab does
local function fail(fmt, ...)
  local rank = (lab and lab.dist and lab.dist.rank) and lab.dist.rank() or 0
  error(string.format("rank %d: plan: " .. fmt, rank, ...), 0)
end

-- a model table's sizes, checked before any arithmetic on them
local function check_model(m)
  if type(m) ~= "table" then fail("a model is a table {layers=, hidden=, heads=, vocab=, ...}, got %s", type(m)) end
  for _, k in ipairs({ "layers", "hidden", "heads", "vocab" }) do
    if math.type(m[k]) ~= "integer" or m[k] < 1 then
      fail("the model needs %s (a positive integer), got %s; a custom model gives layers, hidden, heads, vocab "
        .. "and optionally kv_heads, ffn, gated, tied, bias, dropout, experts, top_k", k, tostring(m[k]))
    end
  end
  if m.layers > 100000 or m.hidden > 1 << 24 or m.vocab > 1 << 26 then
    fail("the model is beyond what the planner enumerates (layers %d, hidden %d, vocab %d)", m.layers, m.hidden, m.vocab)
  end
  for _, k in ipairs({ "kv_heads", "ffn", "experts", "top_k", "head_dim" }) do
    if m[k] ~= nil and (math.type(m[k]) ~= "integer" or m[k] < 1 or m[k] > 1 << 26) then
      fail("the model's %s must be a positive integer, got %s", k, tostring(m[k]))
    end
  end
  if m.top_k and m.experts and m.top_k > m.experts then fail("top_k %d exceeds %d experts", m.top_k, m.experts) end
end

local function need(ok, fname, fmt, ...)
  if not ok then fail(fname .. ": " .. fmt, ...) end
end
local function is_int(v, lo) return math.type(v) == "integer" and v >= (lo or 1) end
local function is_num(v, lo) return type(v) == "number" and v >= (lo or 0) and v < math.huge end

-- a model with at least the fields `needs` (nil: a whole model), kv_heads and ffn filled in
local function model_arg(fname, m, needs)
  if needs then
    need(type(m) == "table", fname, "the first argument is a model table, got %s", type(m))
    for _, k in ipairs(needs) do need(is_int(m[k]), fname, "the model needs %s (a positive integer), got %s", k, tostring(m[k])) end
    for _, k in ipairs({ "kv_heads", "experts", "top_k", "head_dim" }) do
      need(m[k] == nil or is_int(m[k]), fname, "the model's %s must be a positive integer, got %s", k, tostring(m[k]))
    end
  else
    check_model(m)
  end
  if m.kv_heads and m.ffn then return m end
  m = copy(m)
  m.kv_heads, m.ffn = m.kv_heads or m.heads, m.ffn or (m.hidden and 4 * m.hidden)
  return m
end

-- the options and layout the traffic helpers read
local function traffic_args(fname, o, c, layers, with_layers)
  need(type(o) == "table" and is_int(o.seq), fname, "options need seq (a positive integer)")
  need(type(c) == "table", fname, "the layout is a table {tp=, mb=, microbatches=, ...}, got %s", type(c))
  for _, k in ipairs({ "tp", "mb", "microbatches" }) do
    need(is_int(c[k]), fname, "layout.%s must be a positive integer, got %s", k, tostring(c[k]))
  end
  for _, k in ipairs({ "cp", "ep", "v", "dp", "zero" }) do
    need(c[k] == nil or is_int(c[k], k == "zero" and 0 or 1), fname, "layout.%s must be a positive integer, got %s", k, tostring(c[k]))
  end
  if with_layers then need(is_int(layers, 0), fname, "layers must be a non-negative integer, got %s", tostring(layers)) end
end

local function positive_integer(o, k, limit)
  local v = o[k]
  if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then v = math.tointeger(v) end
  if math.type(v) ~= "integer" or v < 1 then
    fail("%s must be a positive integer, got %s", k, tostring(o[k]))
  end
  if v > limit then
    fail("%s = %d is more than the planner enumerates (at most %d)", k, v, limit)
  end
  return v
end

-- o[k] as a list of integers from lo to hi (a number or a list), or the default
local function int_list(o, k, default, lo, hi)
  local v = o[k]
  if v == nil then return default end
  if type(v) ~= "table" then v = { v } end
  if #v == 0 then fail("%s is an empty list", k) end
  local out = {}
  for i, x in ipairs(v) do
    if math.type(x) == "float" and x == math.floor(x) and math.abs(x) < 2 ^ 53 then x = math.tointeger(x) end
    if math.type(x) ~= "integer" or x < lo or x > hi then
      fail("%s must be %s from %d to %d, got %s", k, #v > 1 and ("integers (item " .. i .. ")") or "an integer", lo, hi, tostring(v[i]))
    end
    out[i] = x
  end
  return out
end

-- o[k] as a list of words out of `allowed`, or the default
local function word_list(o, k, default, allowed)
  local v = o[k]
  if v == nil then return default end
  if type(v) ~= "table" then v = { v } end
  if #v == 0 then fail("%s is an empty list", k) end
  for _, x in ipairs(v) do
    local ok = false
    for _, a in ipairs(allowed) do if x == a then ok = true end end
    if not ok then fail("%s must be one of %s, got %s", k, table.concat(allowed, ", "), tostring(x)) end
  end
  return v
end


M.copy = copy
M.fail = fail
M.model = check_model
M.need = need
M.is_int = is_int
M.is_num = is_num
M.model_arg = model_arg
M.traffic_args = traffic_args
M.positive_integer = positive_integer
M.int_list = int_list
M.word_list = word_list

return M
