-- lab.ckpt: checkpoints that survive crashes and resume bit for bit.
--
--   lab.ckpt.save("run/ckpt", {model = m, optimizer = opt, step = 1000})
--   lab.ckpt.save("run/ckpt", {model = m, amp = mp, step = 1000})   -- mixed precision: masters too
--   lab.ckpt.save("run/ckpt", {model = zero_model, step = 1000})    -- ZeRO: each rank its shards
--   local state = lab.ckpt.load("run/ckpt", {model = m, optimizer = opt})  -- state.step
--
-- A checkpoint is a directory: one .npy per tensor (parameters, buffers, optimizer
-- moments) and a manifest (step, RNG state, optimizer counters, names, shapes, dtypes).
-- Every rank writes its own part (rank<r>/), since under ZeRO or tensor parallelism each
-- holds different tensors. It is written under a temporary name, each file synced to disk, and
-- renamed into place only when complete, so a crash mid-save leaves the previous
-- checkpoint whole. Loading checks every name, shape and dtype against the model.
local ckpt = {}

local function sh(cmd) return os.execute(cmd) end
local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function serialize(v, indent)
  indent = indent or ""
  if type(v) == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local parts = {}
    for _, k in ipairs(keys) do
      local key = type(k) == "number" and ("[" .. k .. "]") or string.format("[%q]", k)
      parts[#parts + 1] = indent .. "  " .. key .. " = " .. serialize(v[k], indent .. "  ")
    end
    return "{\n" .. table.concat(parts, ",\n") .. "\n" .. indent .. "}"
  elseif type(v) == "string" then return string.format("%q", v)
  elseif math.type(v) == "integer" then return string.format("%d", v)
  elseif type(v) == "number" then return string.format("%.17g", v)
  elseif type(v) == "boolean" then return tostring(v) end
  error("ckpt: cannot store a " .. type(v) .. " in the manifest", 3)
end

-- the tensors to write: model state, optimizer moments
local function collect(state)
  local tensors, meta = {}, { step = state.step or 0, rng = lab.get_rng_state(), extra = state.extra,
    world = lab.dist.world() }
  local model = state.model
  if model and model.checkpoint_state then -- sharded (ZeRO): the model saves its own shards
    local ts
    ts, meta.sharded = model:checkpoint_state()
    for name, t in pairs(ts) do tensors[name] = t end
  elseif model then
    for name, t in pairs(model:state_dict()) do tensors["model." .. name] = t end
  end
  local opt = state.optimizer or (state.amp and state.amp.optimizer)
  if opt and opt ~= model then
    meta.optimizer = { step_count = opt.step_count, lr = opt.lr }
    for i, s in pairs(opt.state) do
      if lab.is_tensor(s) then tensors["optim." .. i .. ".buf"] = s
      else
        for k, t in pairs(s) do tensors["optim." .. i .. "." .. k] = t end
      end
    end
  end
  if state.amp then -- the fp32 masters are the truth; the 16-bit weights are cast from them
    for i, pr in ipairs(state.amp.pairs) do tensors["amp.master." .. i] = pr.master end
    meta.amp = state.amp:scaler_state()
  end
  meta.tensors = {}
  for name, t in pairs(tensors) do meta.tensors[name] = { shape = t.shape, dtype = t.dtype } end
  return tensors, meta
end

-- Writes the checkpoint; collective over the ranks (every rank writes its part, rank 0
-- swaps the complete directory into place after all parts are written).
-- the arguments every entry point takes: a directory name and a table of what to save
local function check_args(op, dir, state)
  local r = lab.dist.rank()
  if type(dir) ~= "string" or dir == "" then
    error(string.format("rank %d: %s: the first argument is the checkpoint directory, got %s", r, op, type(dir)), 0)
  end
  if type(state) ~= "table" then
    error(string.format("rank %d: %s: the second argument is a table {model=, optimizer=, amp=, step=}, got %s",
      r, op, type(state)), 0)
  end
  local m = state.model
  if m == nil or lab.nn.is_module(m) or m.checkpoint_state then return state end
  if type(m) == "table" and lab.nn.is_module(m.module) then -- a DDP wrapper: its module is the model
    local unwrapped = {}
    for k, v in pairs(state) do unwrapped[k] = v end
    unwrapped.model = m.module
    return unwrapped
  end
  error(string.format("rank %d: %s: model must be a lab.nn module (or a DDP or ZeRO wrapper), got %s", r, op,
    lab.is_tensor(m) and "a tensor" or type(m)), 0)
end

function ckpt.save(dir, state)
  state = check_args("ckpt.save", dir, state)
  local r = lab.dist.rank()
  local tmp = dir .. ".incomplete"
  if r == 0 then sh("rm -rf " .. quote(tmp) .. " && mkdir -p " .. quote(tmp)) end
  lab.dist.barrier()
  local mine = string.format("%s/rank%d", tmp, r)
  sh("mkdir -p " .. quote(mine))
  local tensors, meta = collect(state)
  -- fault injection for tests: fail after this many files (LLMLAB_CKPT_FAIL_AFTER or the
  -- field ckpt.fail_after, which is cleared after one use)
  local fail_after = ckpt.fail_after or tonumber(os.getenv("LLMLAB_CKPT_FAIL_AFTER") or "")
  ckpt.fail_after = nil
  local written = 0
  local ok, err = pcall(function()
    for name, t in pairs(tensors) do
      if fail_after and written >= fail_after then error("ckpt: injected failure after " .. written .. " files", 0) end
      t:save_npy(mine .. "/" .. name .. ".npy")
      written = written + 1
    end
    local f = assert(io.open(mine .. "/manifest.lua.tmp", "w"))
    f:write("return ", serialize(meta), "\n")
    f:close()
    assert(os.rename(mine .. "/manifest.lua.tmp", mine .. "/manifest.lua"))
    -- this rank's files and their directory on disk before it reports success
    assert(sh("sync " .. quote(mine) .. "/* " .. quote(mine)), "ckpt: cannot sync " .. mine)
  end)
  -- every rank must know whether every part was written before anything is swapped
  local bad = lab.tensor({ ok and 0 or 1 }, { dtype = "i32" })
  lab.dist.all_reduce(bad)
  if bad[1] > 0 then
    lab.dist.barrier()
    if r == 0 then sh("rm -rf " .. quote(tmp)) end
    error(string.format("rank %d: ckpt.save: %s; the previous checkpoint in %s is untouched", r,
      ok and "another rank failed to write its part" or tostring(err), dir), 0)
  end
  if r == 0 then
    sh("sync " .. quote(tmp)) -- the rank directories' entries
    local old = dir .. ".previous"
    sh("rm -rf " .. quote(old))
    os.rename(dir, old) -- may not exist yet
    assert(os.rename(tmp, dir), "ckpt.save: cannot move the new checkpoint into place")
    sh("rm -rf " .. quote(old))
  end
  lab.dist.barrier()
end

-- Loads into the model (and optimizer) what save wrote; restores the RNG stream. Returns
-- {step=, extra=}. Collective, like save: every rank loads its own part.
function ckpt.load(dir, state)
  state = check_args("ckpt.load", dir, state)
  local r = lab.dist.rank()
  local part = string.format("%s/rank%d", dir, r)
  -- every rank must find its part before any rank changes its model (and before ZeRO's
  -- collectives inside the load): a missing part, a damaged manifest or another world size
  -- raises on every rank together
  local chunk, err = loadfile(part .. "/manifest.lua", "t", {})
  local meta, problem
  if not chunk then
    problem = string.format("no complete checkpoint at %s (%s)", dir, err)
  else
    local ok, m = pcall(chunk)
    if not ok or type(m) ~= "table" or type(m.tensors) ~= "table" then
      problem = string.format("the manifest of %s is damaged", part)
    elseif m.world and m.world ~= lab.dist.world() then
      problem = string.format("%s was saved by %d ranks; this world has %d", dir, m.world, lab.dist.world())
    else
      meta = m
    end
  end
  local bad = lab.tensor({ problem and 1 or 0 }, { dtype = "i32" })
  lab.dist.all_reduce(bad)
  if bad[1] > 0 then
    error(string.format("rank %d: ckpt.load: %s", r, problem or string.format(
      "%d other rank(s) cannot read their part of %s", bad[1], dir)), 0)
  end
  local function read(name)
    local want = meta.tensors[name]
    if not want then error(string.format("rank %d: ckpt.load: %s is not in the checkpoint", r, name), 0) end
    local t = lab.load_npy(part .. "/" .. name .. ".npy")
    if table.concat(t.shape, ",") ~= table.concat(want.shape, ",") then
      error(string.format("rank %d: ckpt.load: %s has shape [%s] in its file, the manifest says [%s]", r, name,
        table.concat(t.shape, ", "), table.concat(want.shape, ", ")), 0)
    end
    return t:to(want.dtype)
  end
  local model = state.model
  if model and model.load_checkpoint_state then
    model:load_checkpoint_state(read, meta.sharded)
  elseif model then
    if meta.sharded then
      error(string.format("rank %d: ckpt.load: %s holds ZeRO-%d shards; load it into a model wrapped the same way",
        r, dir, meta.sharded.stage), 0)
    end
    local sd = {}
    for name in pairs(model:state_dict()) do sd[name] = read("model." .. name) end
    model:load_state_dict(sd)
  end
  local opt = state.optimizer or (state.amp and state.amp.optimizer)
  if opt and opt ~= model and meta.optimizer then
    opt.step_count = meta.optimizer.step_count
    opt.lr = meta.optimizer.lr
    opt.state = {}
    for name in pairs(meta.tensors) do
      local i, k = name:match("^optim%.(%d+)%.(%w+)$")
      if i then
        i = tonumber(i)
        local t = lab.mem.tag(read(name), "optimizer")
        if k == "buf" then opt.state[i] = t
        else
          opt.state[i] = opt.state[i] or {}
          opt.state[i][k] = t
        end
      end
    end
  end
  if state.amp then
    if not meta.amp then
      error(string.format("rank %d: ckpt.load: %s was saved without mixed precision (no fp32 masters)", r, dir), 0)
    end
    lab.no_grad(function()
      for i, pr in ipairs(state.amp.pairs) do pr.master:copy_(read("amp.master." .. i)) end
    end)
    state.amp:load_scaler_state(meta.amp)
    state.amp:sync_model()
  end
  lab.set_rng_state(meta.rng)
  return { step = meta.step, extra = meta.extra }
end

return ckpt
