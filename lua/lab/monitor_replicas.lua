-- The cross-rank checks of lab.monitor: every rank's checksum of each tensor, gathered by
-- lab.replicas.gather_checksums (the REPL's recovery compares replicas with it too), and the
-- ranks that disagree with the majority named (at 2 ranks, or a tie, every rank of the split:
-- a monitor reports, and does not guess which side is right; the recovery, which must pick a
-- rank to restore from, takes the first). Data-parallel replicas hold bit-equal weights, optimizer
-- states and, after the all-reduce, gradients: any difference is a fault.
local errors = require("lab.errors")
local gather_checksums = require("lab.replicas").gather_checksums
local replicas = {}

-- values: a list indexed by group rank (1-based) -> {majority = value, minority = {r, ...}}
-- (group positions, 1-based); without a strict majority every rank is in the minority
function replicas.majority(values)
  local count, best, best_n = {}, nil, 0
  local function key(v) return v ~= v and "nan" or v end
  for _, v in ipairs(values) do count[key(v)] = (count[key(v)] or 0) + 1 end
  for k, n in pairs(count) do
    if n > best_n then best, best_n = k, n end
  end
  local out = { majority = best, minority = {} }
  local distinct = 0
  for _ in pairs(count) do distinct = distinct + 1 end
  if distinct == 1 then return out end
  local strict = best_n * 2 > #values
  for r, v in ipairs(values) do
    if not strict or key(v) ~= best then out.minority[#out.minority + 1] = r end
  end
  return out
end

-- (name, tensor) pairs -> list of {name =, ranks = {global ranks}} that differ
function replicas.compare(named, group)
  local fname = "lab.monitor.compare"
  errors.type(fname, 1, named, "table", "a list of {name, tensor} pairs")
  for i, nt in ipairs(named) do
    errors.arg(type(nt) == "table" and lab.is_tensor(nt[2]), fname, 1, string.format("entry %d: a {name, tensor} pair", i), nt)
  end
  errors.group(fname, 2, group)
  local tensors = {}
  for i, nt in ipairs(named) do tensors[i] = nt[2] end
  local rows, ranks = gather_checksums(tensors, group)
  local out = {}
  for i = 0, #named do -- entry 0: how many tensors each rank compared
    local col = {}
    for r = 1, #rows do col[r] = rows[r][i + 1] end
    local m = replicas.majority(col)
    if #m.minority > 0 then
      local rs = {}
      for j, r in ipairs(m.minority) do rs[j] = ranks[r] end
      out[#out + 1] = { name = i == 0 and "(the number of tensors compared)" or named[i][1], ranks = rs }
      if i == 0 then return out end -- the rest cannot be compared one to one
    end
  end
  return out
end

-- check_replicas(model[, {group =, optimizer =, amp =}]): every parameter (with amp, a
-- lab.amp.MixedPrecision, its fp32 masters "master.<name>"; with an optimizer, or amp's, its
-- state tensors "optimizer.<param>.m") compared across the group; {} when all agree
function replicas.check_replicas(model, opts)
  opts = opts or {}
  local root = type(model) == "table" and model.module or model
  lab.nn.check_module(root, "lab.monitor.check_replicas")
  if type(opts) ~= "table" then
    error(string.format("rank %d: lab.monitor.check_replicas: options must be a table {group=, optimizer=, amp=}, got %s",
      lab.dist.rank(), type(opts)), 0)
  end
  local named = {}
  for _, np in ipairs(root:named_parameters()) do named[#named + 1] = np end
  local name_of = {}
  for _, np in ipairs(root:named_parameters()) do name_of[np[2]] = np[1] end
  if opts.amp then -- mixed precision: the fp32 masters are the weights that persist
    for _, pr in ipairs(opts.amp.pairs) do
      local n = "master." .. (name_of[pr.model] or "?")
      named[#named + 1] = { n, pr.master }
      name_of[pr.master] = n
    end
  end
  local opt = opts.optimizer or (opts.amp and opts.amp.optimizer)
  if opt and opt.state then
    for i, p in ipairs(opt.params or {}) do
      local st = opt.state[i]
      if type(st) == "table" then
        local keys = {}
        for k, v in pairs(st) do if lab.is_tensor(v) then keys[#keys + 1] = k end end
        table.sort(keys)
        for _, k in ipairs(keys) do
          named[#named + 1] = { string.format("optimizer.%s.%s", name_of[p] or ("param" .. i), k), st[k] }
        end
      end
    end
  end
  return replicas.compare(named, opts.group or model.group)
end

-- the DDP wrapper's buckets after the all-reduce: {bucket = i, params = "first..last", ranks =}
function replicas.compare_buckets(ddp, group)
  local named = {}
  for i, b in ipairs(ddp.buckets) do named[i] = { i, b.buffer } end
  local out = replicas.compare(named, group)
  for _, m in ipairs(out) do
    local b = ddp.buckets[m.name]
    m.bucket = m.name
    m.name = string.format("bucket %d (%s .. %s)", m.bucket, ddp.names[b.params[1]], ddp.names[b.params[#b.params]])
  end
  return out
end

return replicas
