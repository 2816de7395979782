-- lab.replicas: the wrappers that keep per-step state (DDP, ZeRO, pipelines, MoE layers, amp)
-- and the replicas of data-parallel models, so that a training step cut short (an error on one
-- rank, Ctrl-C in the middle of a backward, the watchdog, a stepper quit) does not break the
-- session. Every wrapper registers here when it is made (a weak list: forgetting a wrapper
-- frees it) with a function that resets its per-step state, and says when a step starts.
-- After a REPL chunk that ended in an error, the REPL's recovery calls replicas._after_chunk on
-- every rank: each wrapper that saw a step during that chunk on any rank is reset, and the
-- replicas of each data-parallel model among them are compared, one checksum per parameter
-- (t:checksum(), which any flipped bit changes) gathered over its group; a divergence is
-- reported naming the parameters and ranks, with the call that restores them:
--   lab.replicas.check(model[, {group=}])  -> list of {name=, ranks={...}} that differ ({} if none)
--   lab.replicas.restore(model, src[, {group=}])  every parameter broadcast from rank src
local errors = require("lab.errors")
local replicas = {}

local live = setmetatable({}, { __mode = "k" })      -- wrapper -> its entry
local by_serial = setmetatable({}, { __mode = "v" }) -- serial -> wrapper
local made = 0 -- wrappers are made in the same order on every rank (each wrap is collective)

-- kind: "lab.ddp.wrap" etc.; reset(w) clears w's per-step state; opts.model(w) returns the
-- model whose replicas must agree (data parallelism only), opts.group its group
function replicas.register(w, kind, reset, opts)
  local fname = "lab.replicas.register"
  errors.arg(type(w) == "table" or type(w) == "userdata", fname, 1, "the wrapper (a table)", w)
  errors.type(fname, 2, kind, "string", "its kind, a string such as 'lab.ddp.wrap'")
  errors.type(fname, 3, reset, "function", "a function reset(w)")
  errors.opts(fname, 4, opts)
  opts = opts or {}
  errors.arg(opts.model == nil or type(opts.model) == "function", fname, 4, "opts.model: a function model(w) or nil", opts.model)
  errors.group(fname, 4, opts.group, "opts.group: a process group")
  made = made + 1
  live[w] = { serial = made, kind = kind, reset = reset, model = opts.model, group = opts.group, touched = false }
  by_serial[made] = w
  return w
end

-- a step of w starts (cheap: called once per backward)
function replicas.touch(w)
  local e = live[w]
  if e then e.touched = true end
end

-- the group ranks' world ranks
local function world_ranks(group)
  if not group then
    local out = {}
    for r = 0, lab.dist.world_size() - 1 do out[#out + 1] = r end
    return out
  end
  return group:ranks()
end

local function rank_list(ranks)
  local parts, i = {}, 1
  while i <= #ranks do
    local j = i
    while j < #ranks and ranks[j + 1] == ranks[j] + 1 do j = j + 1 end
    parts[#parts + 1] = j > i and string.format("%d-%d", ranks[i], ranks[j]) or tostring(ranks[i])
    i = j + 1
  end
  return table.concat(parts, ",")
end

-- Every rank's checksums of tensors (t:checksum(): any flipped bit changes it, even a zero's
-- sign), gathered over the group: rows[r] = {count, sum 1, sum 2, ...} for the group's r-th rank,
-- and the group's world ranks in order. The counts are gathered first: where they differ
-- (ranks holding different models), rows hold the counts alone. lab.monitor's checks use it too.
function replicas.gather_checksums(tensors, group)
  local fname = "lab.replicas.gather_checksums"
  errors.type(fname, 1, tensors, "table", "a list of tensors")
  for i, t in ipairs(tensors) do errors.arg(lab.is_tensor(t), fname, 1, string.format("tensors[%d]: a tensor", i), t) end
  errors.group(fname, 2, group)
  local n = #tensors
  local counts = lab.dist.all_gather(lab.tensor({ n }, { dtype = "i64" }), { group = group })
  local rows, same = {}, true
  for r, c in ipairs(counts) do
    rows[r] = { c[1] }
    same = same and c[1] == counts[1][1]
  end
  if same and n > 0 then
    local mine = {}
    for i, t in ipairs(tensors) do mine[i] = t:checksum() end
    for r, x in ipairs(lab.dist.all_gather(lab.tensor(mine, { dtype = "i64" }), { group = group })) do
      table.move(x:tolist(), 1, n, 2, rows[r])
    end
  end
  return rows, world_ranks(group)
end

-- a module, or a wrapper that lists its module's parameters (DDP, ZeRO, a pipeline stage)
local function check_model(fname, model)
  local ok = type(model) == "table" and (lab.nn.is_module(model) or type(model.named_parameters) == "function")
  errors.arg(ok, fname, 1, "a lab.nn module or a wrapper of one (lab.ddp.wrap, lab.zero.wrap)", model)
end

-- The parameters of model whose replicas differ across the group: {name=, ranks=, agree=} per
-- parameter, ranks (world ranks) those whose value is not the one most ranks hold (on a tie,
-- the value that reached the top count first in rank order: rank 0's at 2 ranks), agree those
-- that hold it: the REPL's recovery restores from one of them.
function replicas.check(model, opts)
  check_model("lab.replicas.check", model)
  errors.opts("lab.replicas.check", 2, opts)
  opts = opts or {}
  errors.group("lab.replicas.check", 2, opts.group, "opts.group: a process group")
  local named = model:named_parameters()
  local tensors = {}
  for i, np in ipairs(named) do tensors[i] = np[2] end
  local rows, ranks = replicas.gather_checksums(tensors, opts.group)
  local out = {}
  for i = 1, #named + 1 do -- the count first: the rest cannot be compared where it differs
    local count, best, best_n = {}, nil, 0
    for r = 1, #rows do
      local k = rows[r][i]
      count[k] = (count[k] or 0) + 1
      if count[k] > best_n then best, best_n = k, count[k] end
    end
    if best_n < #rows then
      local differ, agree = {}, {}
      for r = 1, #rows do
        if rows[r][i] ~= best then differ[#differ + 1] = ranks[r] else agree[#agree + 1] = ranks[r] end
      end
      out[#out + 1] = { name = i == 1 and "(the number of parameters)" or named[i - 1][1], ranks = differ, agree = agree }
      if i == 1 then return out end
    end
  end
  return out
end

-- Every parameter of model broadcast from src (a rank of the group): the replicas agree again.
function replicas.restore(model, src, opts)
  check_model("lab.replicas.restore", model)
  errors.arg(math.type(src) == "integer", "lab.replicas.restore", 2, "the rank to copy from (an integer)", src)
  errors.opts("lab.replicas.restore", 3, opts)
  opts = opts or {}
  errors.group("lab.replicas.restore", 3, opts.group, "opts.group: a process group")
  lab.no_grad(function()
    for _, np in ipairs(model:named_parameters()) do lab.dist.broadcast(np[2], src, { group = opts.group }) end
  end)
end

-- the name of a global holding w (sorted, so every rank picks the same), or nil
local function global_name(w)
  local names = {}
  for k, v in pairs(_G) do
    if rawequal(v, w) and type(k) == "string" then names[#names + 1] = k end
  end
  table.sort(names)
  return names[1]
end

-- the report for one data-parallel wrapper whose replicas differ
local function describe_divergence(w, e, diffs)
  local name = global_name(w)
  local ranks = world_ranks(e.group)
  local bad = {}
  for _, d in ipairs(diffs) do
    for _, r in ipairs(d.ranks) do bad[r] = true end
  end
  local src = ranks[1] -- the lowest rank that agrees with the majority everywhere
  for _, r in ipairs(ranks) do
    if not bad[r] then src = r break end
  end
  local lines = { string.format("replicas of %s (%s) differ after the aborted chunk:", name or "a wrapped model", e.kind) }
  for i, d in ipairs(diffs) do
    if i > 8 then
      lines[#lines + 1] = string.format("  ... and %d more parameters", #diffs - 8)
      break
    end
    lines[#lines + 1] = string.format("  %s: rank%s %s differ%s from rank%s %s", d.name, #d.ranks > 1 and "s" or "",
      rank_list(d.ranks), #d.ranks > 1 and "" or "s", #d.agree > 1 and "s" or "", rank_list(d.agree))
  end
  local group_rank = src
  if e.group then
    for i, r in ipairs(ranks) do
      if r == src then group_rank = i - 1 end
    end
  end
  lines[#lines + 1] = string.format("restore them from rank %d with: lab.replicas.restore(%s, %d%s)", src,
    name or "model", group_rank, e.group and ", {group = ...}" or "")
  return table.concat(lines, "\n")
end

-- Every rank, after every REPL chunk (aborted: the chunk ended in an error on some rank, the
-- same on every rank). Returns the report to show, or nil.
function replicas._after_chunk(aborted)
  if not aborted then
    for _, e in pairs(live) do e.touched = false end
    return nil
  end
  local n = lab.dist._agree_max(made)
  if n == 0 then return nil end
  -- which wrappers saw a step on some rank, and exist on every rank (else no collective on them)
  local touched, alive = lab.zeros(n, { dtype = "f32" }), lab.zeros(n, { dtype = "f32" })
  for _, e in pairs(live) do
    if e.serial <= n then
      alive[e.serial] = 1
      if e.touched then touched[e.serial] = 1 end
    end
    e.touched = false
  end
  lab.dist.all_reduce(touched, { op = "max" })
  lab.dist.all_reduce(alive, { op = "min" })
  local lines = {}
  for s = 1, n do
    local w = by_serial[s]
    local e = w and live[w]
    if e and touched[s] > 0 and alive[s] > 0 then
      local ok, err = pcall(e.reset, w)
      if not ok then lines[#lines + 1] = string.format("%s: could not reset its step: %s", e.kind, tostring(err)) end
      local said = string.format("(%s (%s): the step cut short was reset", global_name(w) or "a wrapper", e.kind)
      if e.model then
        local ok2, diffs = pcall(replicas.check, e.model(w), { group = e.group })
        if not ok2 then
          lines[#lines + 1] = string.format("%s: could not compare its replicas: %s", e.kind, tostring(diffs))
        elseif #diffs > 0 then
          lines[#lines + 1] = describe_divergence(w, e, diffs)
        else
          lines[#lines + 1] = said .. "; its replicas agree)"
        end
      elseif ok then
        lines[#lines + 1] = said .. ")"
      end
    end
  end
  return #lines > 0 and table.concat(lines, "\n") or nil
end

-- Waits for a wrapper's pending asynchronous collective after recovery has matched it on every
-- rank; one that still does not complete is kept referenced for good (MPI's rule: its buffers
-- must outlive it) and reported. Returns nil.
local stuck = {}
function replicas.settle(handle)
  if not handle then return nil end
  local mt = getmetatable(handle)
  errors.arg(type(handle) == "userdata" and type(mt) == "table" and rawget(mt, "__name") == "lab.dist.Work",
    "lab.replicas.settle", 1, "an asynchronous collective's handle (async = true) or nil", handle)
  local t0 = lab.clock()
  while not handle:test() do
    if lab.clock() - t0 > 5 then
      stuck[#stuck + 1] = handle
      error(string.format("rank %d: a pending collective did not complete after recovery; it is kept (never freed)",
        lab.dist.rank()), 0)
    end
  end
  return nil
end

-- "Title" and the wrapped module's tree under it, indented: how a wrapper prints at the REPL
function replicas.tree(title, module)
  errors.type("lab.replicas.tree", 1, title, "string", "a title")
  local body = tostring(module):gsub("\n", "\n  ")
  return title .. "\n  " .. body
end

return replicas
