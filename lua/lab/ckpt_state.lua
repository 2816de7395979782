-- What a checkpoint holds and where each piece lives in the running layout.
--
-- Every tensor gets a global name and a shard descriptor (see ckpt_format): a plain module's
-- parameters are whole; a tensor-parallel layer's are the slice its marks describe (the fused
-- QKV weight of ParallelAttention is three slices, described as a box of the weight seen as
-- [3, C, C], and named like lab.nn.GPT's "attn.qkv.weight");
-- a pipeline stage names its layers by their place in the whole model; a ZeRO engine's pieces
-- are ranges of the flattened parameter. Optimizer moments and fp32 masters follow their
-- parameter. The same description serves saving (what to write) and loading (where to copy).
local state = {}

-- ParallelAttention's fused slices carry lab.nn.GPT's names, so TP and plain checkpoints mix
local RENAME = { ParallelAttention = { qkv_weight = "qkv.weight", qkv_bias = "qkv.bias" } }

local function copy(t)
  local o = {}
  for i, v in ipairs(t) do o[i] = v end
  return o
end

local function zeros_like_list(t)
  local o = {}
  for i = 1, #t do o[i] = 0 end
  return o
end

-- The descriptor of tensor t held by module m: whole, or, when a tensor-parallel layer marked
-- it (Megatron's tensor_model_parallel, partition_dim, partition_stride), this rank's slice of
-- the full tensor along that dim; with stride s the full dim is s blocks (q, k, v) each split
-- across the m.p ranks, described as a box of the tensor seen with that dim as [s, blocks].
local function describe(t, m)
  local shape = copy(t.shape)
  local d = { global = copy(shape), offsets = zeros_like_list(shape), box = copy(shape) }
  if not t.tensor_model_parallel or (m.p or 1) == 1 then return d end
  local p, r, dim, stride = m.p, m.r, t.partition_dim, t.partition_stride or 1
  d.global[dim] = shape[dim] * p
  if stride == 1 then
    d.offsets[dim] = r * shape[dim]
    return d
  end
  local per = shape[dim] // stride
  d.box, d.view, d.offsets = {}, {}, {}
  for i = 1, #shape do
    if i == dim then
      table.insert(d.box, stride) table.insert(d.view, stride) table.insert(d.offsets, 0)
      table.insert(d.box, per) table.insert(d.view, per * p) table.insert(d.offsets, r * per)
    else
      table.insert(d.box, shape[i]) table.insert(d.view, shape[i]) table.insert(d.offsets, 0)
    end
  end
  return d
end

-- {tensor, name, desc} for every parameter and buffer of module m (parameters first seen win:
-- a tied weight is saved once); kinds: "param", "buffer" or both
local function walk(m, prefix, out, seen, top)
  local cls = getmetatable(m)
  local rename = RENAME[cls and cls.__name] or {}
  for _, n in ipairs(m._names) do
    local kind, v = m._kinds[n], m[n]
    local name = n
    if top and m.first_layer and tonumber(n) then name = tostring(tonumber(n) + m.first_layer - 1) end
    if (kind == "param" or kind == "buffer") and v ~= nil and not seen[v] then
      seen[v] = true
      out[#out + 1] = { tensor = v, kind = kind, name = prefix .. (rename[n] or name), desc = describe(v, m) }
    elseif kind == "module" then
      walk(v, prefix .. name .. ".", out, seen, false)
    end
  end
  return out
end

-- the model inside DDP wrappers and pipelines; a ZeRO engine is returned as is
local function unwrap(m)
  if type(m) == "table" and m.stage and m.train_step then m = m.stage end -- a pp.Pipeline
  if type(m) == "table" and not m.checkpoint_shards and not lab.nn.is_module(m) and lab.nn.is_module(m.module) then
    m = m.module
  end
  return m
end
state.unwrap = unwrap

local MOMENT_NAMES = { m = "exp_avg", v = "exp_avg_sq" }
local MOMENT_FIELDS = { exp_avg = "m", exp_avg_sq = "v" }

-- The entries {key, tensor, desc} a checkpoint of `st` holds on this rank, and the meta data
-- (optimizer counters and which moments exist, the loss scaler, the layout).
-- With for_load, optimizer moments that do not exist yet are created (zeros, filled by the
-- loader) following `src_optimizer` (the checkpoint's optimizer section).
function state.entries(st, for_load, src_optimizer)
  local entries, meta = {}, { model_keys = {} } -- model_keys: every model tensor, held here or not
  local model = unwrap(st.model)
  local by_tensor = {} -- parameter (or fp32 master) -> its entry
  local function add(key, t, desc)
    local d = {}
    for k, v in pairs(desc) do d[k] = v end
    if key:match("^model%.") then meta.model_keys[key] = true end
    d.dtype = t.dtype
    entries[#entries + 1] = { key = key, tensor = t, desc = d }
  end
  local zero_opt
  if model and model.checkpoint_shards then -- ZeRO: its shards, and the model's buffers
    local shards, info = model:checkpoint_shards()
    meta.layout = { zero = { stage = info.stage, ranks = info.ranks } }
    local kinds = {}
    for _, s in ipairs(shards) do
      local desc = { global = copy(s.shape), offsets = zeros_like_list(s.shape), box = copy(s.shape),
        flat = { s.from, s.to } }
      add("model." .. s.name, s.param, desc)
      if not for_load or src_optimizer then -- a checkpoint without moments leaves them as they are
        add("optim." .. s.name .. ".exp_avg", s.exp_avg, desc)
        add("optim." .. s.name .. ".exp_avg_sq", s.exp_avg_sq, desc)
      end
      kinds[s.name] = { "exp_avg", "exp_avg_sq" }
    end
    -- every parameter has moments, also where this rank holds no piece of it
    for _, np in ipairs(model.module:named_parameters()) do
      kinds[np[1]] = { "exp_avg", "exp_avg_sq" }
      meta.model_keys["model." .. np[1]] = true
    end
    meta.optimizer = { step_count = info.step_count, lr = info.lr, state = kinds }
    for _, e in ipairs(walk(model.module, "", {}, {}, true)) do
      if e.kind == "buffer" then add("model." .. e.name, e.tensor, e.desc) end
    end
    zero_opt = model
  elseif model then
    for _, e in ipairs(walk(model, "", {}, {}, true)) do
      add("model." .. e.name, e.tensor, e.desc)
      by_tensor[e.tensor] = { name = e.name, desc = e.desc }
    end
  end
  if st.amp then -- the fp32 masters are the truth; the 16-bit weights are cast from them
    for _, pr in ipairs(st.amp.pairs) do
      local info = by_tensor[pr.model]
      if not info then error("a mixed-precision parameter is not a parameter of the model", 0) end
      add("master." .. info.name, pr.master, info.desc)
      by_tensor[pr.master] = info
    end
    meta.amp = st.amp:scaler_state()
  end
  local opt = st.optimizer or (st.amp and st.amp.optimizer)
  if opt and opt ~= st.model and opt ~= model and not zero_opt then
    local kinds, new_state = {}, {}
    meta.optimizer = { step_count = opt.step_count, lr = opt.lr, state = kinds }
    meta.new_optimizer_state = new_state -- for_load: the state tables to install once all is read
    for i, p in ipairs(opt.params) do
      local info = by_tensor[p]
      if not info then error(string.format("optimizer parameter %d is not a parameter of the model", i), 0) end
      if for_load then
        local want = src_optimizer and src_optimizer.state[info.name]
        if want then
          local has = {}
          for _, k in ipairs(want) do has[k] = true end
          local need = opt.betas and { "exp_avg", "exp_avg_sq" } or { "momentum_buffer" }
          for _, k in ipairs(need) do
            if not has[k] then
              error(string.format("the checkpoint's optimizer state of %s lacks %s (it holds: %s)", info.name, k,
                table.concat(want, ", ")), 0)
            end
          end
          local s = {}
          for _, k in ipairs(want) do
            local t = lab.mem.tag(lab.zeros(p.shape, { dtype = p.dtype, device = p.device }), "optimizer")
            if k == "momentum_buffer" then s = t else s[MOMENT_FIELDS[k] or k] = t end
            add("optim." .. info.name .. "." .. k, t, info.desc)
          end
          new_state[i] = s
        end
      else
        local s = opt.state[i]
        if lab.is_tensor(s) then
          add("optim." .. info.name .. ".momentum_buffer", s, info.desc)
          kinds[info.name] = { "momentum_buffer" }
        elseif s then
          local ks = {}
          for k, t in pairs(s) do
            ks[#ks + 1] = MOMENT_NAMES[k] or k
            add("optim." .. info.name .. "." .. (MOMENT_NAMES[k] or k), t, info.desc)
          end
          table.sort(ks)
          kinds[info.name] = ks
        end
      end
    end
    meta.optimizer_object = opt
  end
  meta.zero = zero_opt
  return entries, meta
end

return state
