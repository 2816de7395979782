-- Checkpoints across hosts: a checkpoint directory is read and written by every rank, so on a
-- job that spans machines it must be one shared directory (the same path mounted on every
-- host). Two checks make a directory that is not shared fail loudly instead of silently:
--   visible(op, dir, made, g)  a save: every rank looks for the step directory rank 0 just
--                              made; hosts that cannot see it are named
--   agree(op, dir, ok, src, g) a load: every rank reports the step and a hash of every rank's
--                              index it read (or that it could not read them); when hosts
--                              differ (per-host copies of different steps, or a copy on some
--                              hosts only), every rank raises with each host's view, before
--                              any model changes
-- Both are collective over g and cost one gather of short strings.
local hosts = {}
local C = lab._ckpt

-- "host1 (ranks 0, 1) <what>; host2 (ranks 2, 3) <what>" for the views gathered from every rank
local function by_host(views, what)
  local order, seen = {}, {}
  for q, v in ipairs(views) do
    local host, rest = v:match("^(.-)\t(.*)$")
    local key = host .. "\t" .. rest
    if not seen[key] then
      seen[key] = { host = host, rest = rest, ranks = {} }
      order[#order + 1] = key
    end
    table.insert(seen[key].ranks, q - 1)
  end
  local parts = {}
  for _, key in ipairs(order) do
    local s = seen[key]
    parts[#parts + 1] = string.format("%s (rank%s %s) %s", s.host, #s.ranks > 1 and "s" or "",
      table.concat(s.ranks, ", "), what(s.rest))
  end
  return table.concat(parts, "; ")
end

function hosts.visible(op, dir, made, g)
  local me = lab.dist.hostname() .. "\t" .. (C.is_dir(made) and "sees" or "cannot see")
  local views = lab.dist.gather_strings(me, g)
  local blind = {}
  for _, v in ipairs(views) do
    if v:match("\tcannot see$") then blind[#blind + 1] = v end
  end
  if #blind == 0 then return end
  if lab.dist.rank(g) == 0 then pcall(C.remove_tree, made) end
  local missing = {}
  for _, v in ipairs(blind) do missing[#missing + 1] = v:match("^(.-)\t") end
  local names, seen = {}, {}
  for _, h in ipairs(missing) do
    if not seen[h] then seen[h] = true; names[#names + 1] = h end
  end
  error(string.format("rank %d: %s: %s cannot see rank 0's files in %s (%s): a checkpoint directory must be shared, "
    .. "the same path mounted on every host; nothing was written", lab.dist.rank(), op, table.concat(names, ", "), dir,
    by_host(views, function(r) return r end)), 0)
end

-- ok: whether this rank read the checkpoint; src: what it read (fmt.open's), or its error
function hosts.agree(op, dir, ok, src, g)
  local seen
  if ok then
    local crcs = {}
    for r = 0, src.world - 1 do crcs[#crcs + 1] = string.format("%08x", C.crc32(src.text[r] or "")) end
    seen = string.format("sees step %d, indexes %08x", src.step, C.crc32(table.concat(crcs)))
  else
    seen = "cannot read it: " .. tostring(src):gsub("^rank %d+: ", ""):gsub("%s+", " "):sub(1, 160)
  end
  local views = lab.dist.gather_strings(lab.dist.hostname() .. "\t" .. seen, g)
  -- only a difference between hosts is theirs to explain; one inside a host (a damaged file
  -- on one rank) is the load's own error, which agree() reports
  local of_host, distinct = {}, {}
  for _, v in ipairs(views) do
    local host, rest = v:match("^(.-)\t(.*)$")
    if of_host[host] and of_host[host] ~= rest then return end
    of_host[host] = rest
    distinct[rest] = true
  end
  if next(distinct, next(distinct)) == nil then return end
  error(string.format("rank %d: %s: the hosts do not see the same checkpoint at %s: %s. A checkpoint directory must "
    .. "be shared, the same path mounted on every host (per-host copies can differ); nothing was changed",
    lab.dist.rank(), op, dir, by_host(views, function(r) return r end)), 0)
end

return hosts
