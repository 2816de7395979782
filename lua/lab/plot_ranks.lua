-- lab.plot(values, opts): one chart from every rank of a group, as the REPL groups text.
-- Every rank of the chunk (the world, the %on group, or opts.group) calls it with its own
-- values, like a collective: the values travel by all_gather (f64, padded to the longest),
-- every rank checks that all called it alike, and the group's first rank draws one chart
-- with a series per set of ranks whose values agree ("ranks 0-3" when all do, "rank 1" ...),
-- sized and coloured for rank 0's terminal (lab/plot_term.lua).
--   opts.kind = 'line' (default: values against opts.x or 1..n), 'bar' (opts.labels name the
--   values) or 'hist' (the values counted into bins); the other options are the kind's.
local errors = require("lab.errors")
local M = {}
local plot
local KIND_CODE = { line = 1, bar = 2, hist = 3 }
local KIND_NAME = { "line", "bar", "hist" }
local EXTRA = { kind = "string", group = "any", x = "table", labels = "table" }

function M.install(p) plot = p end

-- "rank 2", "ranks 0-3", "ranks 0,2-3": the REPL's way of naming a set of ranks
function M.rank_set(rs)
  table.sort(rs)
  local parts, i = {}, 1
  while i <= #rs do
    local j = i
    while j < #rs and rs[j + 1] == rs[j] + 1 do j = j + 1 end
    parts[#parts + 1] = j == i and tostring(rs[i]) or (rs[i] .. "-" .. rs[j])
    i = j + 1
  end
  return (#rs == 1 and "rank " or "ranks ") .. table.concat(parts, ",")
end

local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] and not (a[i] ~= a[i] and b[i] ~= b[i]) then return false end
  end
  return true
end

-- this rank's arguments, checked: kind, options, y, x
local function prepare(values, opts)
  local fname = "lab.plot"
  errors.opts(fname, 2, opts)
  local kind = opts and opts.kind or "line"
  if not KIND_CODE[kind] then errors.raise(fname, "option kind must be 'line', 'bar' or 'hist', got %s", tostring(kind)) end
  local o = plot._check_opts(fname, kind, opts, EXTRA)
  errors.group(fname, 2, o.group, "option group: a process group")
  local y = plot._numbers(fname, values, "the values")
  local x = o.x and plot._numbers(fname, o.x, "option x") or nil
  if x and #x ~= #y then errors.raise(fname, "option x has %d values for %d values", #x, #y) end
  return kind, o, y, x
end

function M.plot(values, opts)
  local fname = "lab.plot"
  -- a rank whose arguments are refused must not leave the others waiting in the exchange:
  -- all agree first, and every rank raises (the refused one with its own reason)
  local ok, kind, o, y, x = pcall(prepare, values, opts)
  local group = type(opts) == "table" and pcall(errors.group, fname, 2, opts.group) and opts.group or nil
  local refused = lab.tensor({ ok and 0 or lab.dist.rank() + 1 }, { dtype = "i64" })
  lab.dist.all_reduce(refused, { op = "max", group = group })
  if not ok then error(kind, 0) end
  if refused[1] > 0 then
    errors.raise(fname, "rank %d's arguments were refused (its error says why); no chart was drawn", refused[1] - 1)
  end
  -- [world rank, kind, n, has x, y..., x...]
  local mine = { lab.dist.rank(), KIND_CODE[kind], #y, x and 1 or 0 }
  table.move(y, 1, #y, 5, mine)
  if x then table.move(x, 1, #x, 5 + #y, mine) end
  local len = lab.tensor({ #mine }, { dtype = "i64" })
  lab.dist.all_reduce(len, { op = "max", group = o.group })
  for i = #mine + 1, len[1] do mine[i] = 0 end
  local all = lab.dist.all_gather(lab.tensor(mine, { dtype = "f64" }), { group = o.group })
  local got = {}
  for i, t in ipairs(all) do
    local v = t:tolist()
    local n, has_x = math.floor(v[3]), v[4] == 1
    got[i] = { rank = math.floor(v[1]), kind = KIND_NAME[math.floor(v[2])], y = table.move(v, 5, 4 + n, 1, {}),
      x = has_x and table.move(v, 5 + n, 4 + 2 * n, 1, {}) or nil }
    if got[i].kind ~= got[1].kind then
      errors.raise(fname, "rank %d drew a %s chart and rank %d a %s chart: every rank of the group must call lab.plot alike",
        got[1].rank, got[1].kind, got[i].rank, got[i].kind)
    end
  end
  if lab.dist.rank() ~= got[1].rank then return end
  -- ranks with the same values share a series
  local groups = {}
  for _, g in ipairs(got) do
    local home
    for _, h in ipairs(groups) do
      if same(h.y, g.y) and ((h.x == nil and g.x == nil) or (h.x and g.x and same(h.x, g.x))) then home = h; break end
    end
    if home then home.ranks[#home.ranks + 1] = g.rank
    else groups[#groups + 1] = { y = g.y, x = g.x, ranks = { g.rank } } end
  end
  local o2 = {}
  for k, v in pairs(o) do if not EXTRA[k] then o2[k] = v end end
  local st = plot._settings(o, true) -- sized for this rank's label alone ("[1] ")
  o2.width, o2.colour = st.width, st.colour
  if kind == "line" then
    local series = {}
    for i, h in ipairs(groups) do series[i] = { name = M.rank_set(h.ranks), y = h.y, x = h.x } end
    return plot.line(series, o2)
  elseif kind == "bar" then
    local n = 0
    for _, h in ipairs(groups) do n = math.max(n, #h.y) end
    local labels = {}
    for i = 1, n do labels[i] = o.labels and o.labels[i] and tostring(o.labels[i]) or tostring(i) end
    local series = {}
    for i, h in ipairs(groups) do
      local v = {}
      for k = 1, n do v[k] = h.y[k] or 0 end
      series[i] = { name = M.rank_set(h.ranks), values = v }
    end
    return plot.bar({ labels = labels, series = series }, o2)
  else
    local series = {}
    for i, h in ipairs(groups) do series[i] = { name = M.rank_set(h.ranks), values = h.y } end
    return plot.hist(series, o2)
  end
end

return M
