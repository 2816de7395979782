-- lab.ckpt: checkpoints that are refused when damaged, never lost, and load into any layout.
--
--   lab.ckpt.save("run/ckpt", {model = m, optimizer = opt, step = 1000})
--   lab.ckpt.save("run/ckpt", {model = m, amp = mp, step = 1000})    -- mixed precision: masters too
--   lab.ckpt.save("run/ckpt", {model = zero_engine, step = 1000})    -- ZeRO: each rank its shards
--   lab.ckpt.save("run/ckpt", {model = m, optimizer = opt, step = 1000, async = true}) -- written
--       in a background thread while training goes on; lab.ckpt.wait() (or the next save or
--       load) waits for it, commits it and raises on every rank if it failed
--   local st = lab.ckpt.load("run/ckpt", {model = m, optimizer = opt})  -- st.step, st.extra
--
-- Layout on disk: run/ckpt/step_00001000/rank<r>.safetensors + rank<r>.json per rank (see
-- ckpt_format.lua), and run/ckpt/latest naming the newest complete step directory. A save
-- writes into step_N.incomplete/ (each file to a temporary name, fsynced, renamed, its
-- directory fsynced), then rank 0 renames the directory into place, replaces `latest`
-- atomically and only then removes older steps: at every instant `latest` names a complete
-- checkpoint. Everything that cannot be stored faithfully (NaN in extra, a step that is not
-- an integer) is refused before anything on disk changes.
-- Loading reads and checks everything on every rank (indexes, checksums, dtypes, shapes, the
-- model's names) and the ranks agree before any model or optimizer changes: all load, or all
-- raise naming the rank and the file at fault. Shards are described by global shapes and
-- offsets, so a checkpoint saved under one layout (TP, PP, DP, ZeRO stage, world size) loads
-- into another. Options: group = the ranks taking part (default: the world).
local errors = require("lab.errors")
local ckpt = {}
local C = lab._ckpt
local fmt = require("lab.ckpt_format")
local S = require("lab.ckpt_state")
local hf = require("lab.ckpt_hf")
local hosts = require("lab.ckpt_hosts") -- a directory every host must see

local pending -- the asynchronous save in flight

local function rank_of(g) return lab.dist.rank(g) end

-- the arguments every entry point takes: a directory name and a table of what to save
local function check_args(op, dir, st)
  local r = lab.dist.rank()
  if type(dir) ~= "string" or dir == "" then
    error(string.format("rank %d: %s: the first argument is the checkpoint directory, got %s", r, op, type(dir)), 0)
  end
  if dir:find("\0", 1, true) then -- (C would see only the part before it)
    error(string.format("rank %d: %s: the directory name %q holds a NUL byte", r, op, dir), 0)
  end
  if type(st) ~= "table" then
    error(string.format("rank %d: %s: the second argument is a table {model=, optimizer=, amp=, step=}, got %s",
      r, op, type(st)), 0)
  end
  if st.optimizer ~= nil and type(st.optimizer) ~= "table" then
    error(string.format("rank %d: %s: optimizer must be a lab.optim optimizer (or a ZeRO wrapper), got %s", r, op,
      type(st.optimizer)), 0)
  end
  local m = S.unwrap(st.model)
  if m ~= nil and not lab.nn.is_module(m) and not m.checkpoint_shards then
    error(string.format("rank %d: %s: model must be a lab.nn module (or a DDP, ZeRO or pipeline wrapper), got %s", r,
      op, lab.is_tensor(m) and "a tensor" or type(m)), 0)
  end
  return st
end

-- Every rank's problem (a string or nil) is gathered on every rank; if any rank has one, all
-- raise: their own problem, or the first failing rank's (naming it). Collective over g.
local MSG = 400
local function agree(op, problem, g, suffix)
  local world, r = lab.dist.world(g), rank_of(g)
  local buf = lab.zeros(world * MSG, { dtype = "i32" })
  if problem then
    local s = tostring(problem):gsub("^rank %d+: ", ""):sub(1, MSG)
    if s == "" then s = "failed" end
    buf:narrow(1, r * MSG + 1, #s):copy_(lab.tensor({ s:byte(1, -1) }, { dtype = "i32" }))
  end
  lab.dist.all_reduce(buf, { group = g })
  local failed = {}
  for q = 0, world - 1 do
    if buf[q * MSG + 1] ~= 0 then failed[#failed + 1] = q end
  end
  if #failed == 0 then return end
  local function text(q)
    local row, chars = buf:narrow(1, q * MSG + 1, MSG), {}
    for i = 1, MSG do
      local c = row[i]
      if c == 0 then break end
      chars[#chars + 1] = string.char(c)
    end
    return table.concat(chars)
  end
  local msg
  if problem then
    msg = tostring(problem):gsub("^rank %d+: ", "")
  else
    msg = string.format("rank %d failed: %s", failed[1], text(failed[1]))
  end
  if #failed > 1 then msg = msg .. string.format(" (%d ranks failed: %s)", #failed, table.concat(failed, ", ")) end
  error(string.format("rank %d: %s: %s%s", lab.dist.rank(), op, msg, suffix or ""), 0)
end


-- the step directory a load reads: the one `latest` names, or dir itself when it is one
local function resolve(dir)
  local latest = C.read_file(dir .. "/latest", 4096)
  if latest then
    local name = latest:match("^(step_%d+[%-%d]*)\n?$")
    if not name then error(string.format("%s/latest does not name a step directory", dir), 0) end
    return dir .. "/" .. name
  end
  local names = C.list_dir(dir)
  if names then
    for _, n in ipairs(names) do
      if n == fmt.rank_file(0, "json") then return dir end
    end
  end
  error(string.format("no complete checkpoint at %s (no %s/latest)", dir, dir), 0)
end

-- The last step of a save: every rank says whether its part is written; rank 0 renames the
-- directory into place, replaces `latest` and removes what is older; then all agree again.
local function commit(p, ok, err)
  local g = p.group
  for _, t in ipairs(p.snapshots or {}) do t:close() end
  local aok, aerr = pcall(agree, "ckpt.save", not ok and err or nil, g,
    string.format("; the previous checkpoint in %s is untouched", p.dir))
  if not aok then
    if rank_of(g) == 0 then pcall(C.remove_tree, p.tmp) end
    if p.armed then C.fault() end
    error(aerr, 0)
  end
  local problem
  if rank_of(g) == 0 then
    local cok, cerr = pcall(function()
      C.rename(p.tmp, p.dir .. "/" .. p.name)
      C.write_file(p.dir .. "/latest", p.name .. "\n")
      for _, n in ipairs(C.list_dir(p.dir) or {}) do
        if n:match("^step_") and n ~= p.name then C.remove_tree(p.dir .. "/" .. n) end
      end
    end)
    if not cok then problem = "rank 0 could not put the checkpoint in place: " .. tostring(cerr) end
  end
  if p.armed then C.fault() end
  agree("ckpt.save", problem, g)
end

-- Finishes the asynchronous save in flight, if any: waits for this rank's writer thread, then
-- commits as a synchronous save does (collective). A failure on any rank raises on every rank.
function ckpt.wait()
  local p = pending
  if not p then return end
  pending = nil
  local ok, err = p.job:wait()
  commit(p, ok, err)
end

-- fault injection for tests: the save's k-th file operation on this rank fails
-- (ckpt.fail_at = k, cleared after one use; fail_after = n is fail_at = n + 1)
local function arm_fault()
  local at = ckpt.fail_at or (ckpt.fail_after and ckpt.fail_after + 1)
  ckpt.fail_at, ckpt.fail_after = nil, nil
  if at then C.fault(at, "fail") end
  return at ~= nil
end

-- Saves; returns the step directory (complete when this returns, unless async). Collective.
function ckpt.save(dir, st)
  st = check_args("ckpt.save", dir, st)
  local g = st.group
  ckpt.wait() -- the previous asynchronous save is committed (or its failure raised) first
  local r, world = rank_of(g), lab.dist.world(g)
  local index, by_key, snapshots
  -- everything that can be refused is refused before anything on disk changes
  local ok, err = pcall(function()
    local step = st.step or 0
    if math.type(step) == "float" and step == math.floor(step) and math.abs(step) < 2 ^ 53 then
      step = math.tointeger(step)
    end
    if math.type(step) ~= "integer" or step < 0 then
      error(string.format("step must be an integer >= 0, got %s", tostring(st.step)), 0)
    end
    local entries, meta = S.entries(st, false)
    meta.rng, meta.extra = lab.get_rng_state(), st.extra
    index = fmt.make_index(r, world, step, meta, entries)
    fmt.encode(index, "checkpoint") -- raises naming a value it cannot store (extra.loss is nan)
    by_key, snapshots = {}, {}
    for _, e in ipairs(entries) do
      if by_key[e.key] then error(string.format("two tensors are named %s", e.key), 0) end
      local t = e.tensor
      if st.async then -- a host copy the writer thread reads while training changes the original
        -- (a device tensor is copied to the host once, here, not cloned on the device first)
        t = lab.mem.tag(t.device == "cpu" and t:clone() or t:cpu(), "other")
        snapshots[#snapshots + 1] = t
      elseif not t:is_contiguous() then
        t = t:contiguous()
      end
      by_key[e.key] = t
    end
  end)
  agree("ckpt.save", not ok and err or nil, g, "; nothing was written")
  -- rank 0 makes the step directory (under a new name if a directory of this step exists)
  local name = string.format("step_%08d", index.step)
  local info = lab.tensor({ 0, 0 }, { dtype = "i64" })
  local armed = false
  if r == 0 then
    local pok, perr = pcall(function()
      armed = arm_fault()
      fmt.mkdir_p(dir)
      local n, k = name, 1
      while C.is_dir(dir .. "/" .. n) do
        k = k + 1
        n = name .. "-" .. k
      end
      if C.is_dir(dir .. "/" .. n .. ".incomplete") then C.remove_tree(dir .. "/" .. n .. ".incomplete") end
      C.mkdir(dir .. "/" .. n .. ".incomplete")
      info[2] = k
    end)
    if not pok then info[1] = 1 end
    err = perr
  end
  lab.dist.broadcast(info, 0, { group = g })
  if info[1] ~= 0 then
    agree("ckpt.save", r == 0 and err or "rank 0 could not create the step directory", g,
      string.format("; the previous checkpoint in %s is untouched", dir))
  end
  if info[2] > 1 then name = name .. "-" .. info[2] end
  hosts.visible("ckpt.save", dir, dir .. "/" .. name .. ".incomplete", g)
  if r ~= 0 then armed = arm_fault() end
  local p = { dir = dir, name = name, tmp = dir .. "/" .. name .. ".incomplete", group = g, snapshots = snapshots,
    armed = armed }
  local files = fmt.files(p.tmp, r, index, by_key)
  if st.async then
    local jok, job = pcall(C.write, files, true)
    if jok then
      p.job = job
      pending = p
      return p.dir .. "/" .. p.name
    end
    commit(p, false, job)
  end
  commit(p, pcall(C.write, files, false))
  return p.dir .. "/" .. p.name
end

-- Loads into the model (and optimizer, masters, loss scaler) what save wrote, in this run's
-- layout; restores the RNG stream. Returns {step=, extra=, path=}. Collective.
function ckpt.load(dir, st)
  st = check_args("ckpt.load", dir, st)
  local g = st.group
  ckpt.wait()
  local r = rank_of(g)
  local src, dests, meta, values, path
  local ok, err = pcall(function()
    path = resolve(dir)
    src = fmt.open(path)
    local i0 = src.index[0]
    if st.amp and not i0.amp then
      error(string.format("%s was saved without mixed precision (no fp32 masters)", path), 0)
    end
    if st.amp then st.amp:check_scaler_state(i0.amp) end
    dests, meta = S.entries(st, true, src.optimizer)
    local unexpected = {}
    for key in pairs(src.shards) do
      if (key:match("^model%.") and st.model) and not meta.model_keys[key] then unexpected[#unexpected + 1] = key end
    end
    if #unexpected > 0 then
      table.sort(unexpected)
      error(string.format("%s holds %s, which the model does not have (%d such)", path, unexpected[1], #unexpected), 0)
    end
    values = {}
    for i, e in ipairs(dests) do values[i] = src:values(e.key, e.desc, r) end
    src:verify(r) -- this rank's own files are checked even where this layout needs none of them
  end)
  hosts.agree("ckpt.load", dir, ok, ok and src or err, g) -- hosts that see different checkpoints are named
  agree("ckpt.load", not ok and err or nil, g, "; nothing was changed")
  local i0 = src.index[0]
  lab.no_grad(function()
    for i, e in ipairs(dests) do
      local v = values[i] -- a box cut through a view has the box's shape: same elements, same order
      if table.concat(v.shape, ",") ~= table.concat(e.tensor.shape, ",") then v = v:reshape(e.tensor.shape) end
      e.tensor:copy_(v)
    end
  end)
  local opt, so = meta.optimizer_object, src.optimizer
  if opt and so then
    opt.state = meta.new_optimizer_state
    opt.step_count, opt.lr = so.step_count, so.lr
  end
  if meta.zero and so then
    meta.zero:load_checkpoint_done(so.step_count, so.lr)
  elseif meta.zero then
    meta.zero:load_checkpoint_done(meta.zero.step_count, meta.zero.lr)
  end
  if st.amp then
    st.amp:load_scaler_state(i0.amp)
    st.amp:sync_model()
  end
  lab.set_rng_state((src.index[r] or i0).rng)
  return { step = src.step, extra = i0.extra, path = path }
end

-- Hugging Face GPT-2 interchange (see ckpt_hf.lua)
-- (a save in flight is finished first: its writer thread and these writes share the fault points)
function ckpt.export_hf(...)
  ckpt.wait()
  return hf.export_hf(...)
end
function ckpt.import_hf(...)
  ckpt.wait()
  return hf.import_hf(...)
end

return ckpt
