-- Resharding: a checkpoint saved under one layout loads into another with every parameter and
-- every Adam moment bit-identical, and training continues with the same loss (up to the new
-- layout's reduction order). Layouts: TP N -> one rank alone (N ranks -> 1), TP 2 -> TP 4 and
-- back, ZeRO-3 on N ranks -> DDP on N/2 and plain AdamW -> ZeRO-2, PP 2 -> 1.
-- The reference values are cut from the source layout by this test's own code (the slices the
-- TP layers' marks describe, the pieces ZeRO's shards hold, the layers a stage holds), not by
-- the checkpoint's descriptors, so a wrong descriptor is caught.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local common = require("ckpt_common")
local r, world = lab.dist.rank(), lab.dist.world()
local dir = common.tmpdir("ckpt-reshard")
local path = dir .. "/ckpt"
local cfg = { vocab = 16, d_model = 16, n_layer = 1, n_head = 4, seq_len = 8, tied = false }
local self_group = lab.dist.split(r, 0) -- each rank alone

local function batch(k)
  lab.manual_seed(500 + k)
  return T.place(lab.randint(0, 16, { 2, 8 }))
end
local function lm_step(m, opt, k)
  local ids = batch(k)
  opt:zero_grad()
  local _, loss = m(ids, ids)
  loss:backward()
  opt:step()
  return loss:item()
end
local function lm_loss(m, k)
  local ids = batch(k)
  return lab.no_grad(function() local _, loss = m(ids, ids) return loss:item() end)
end
local function plain()
  lab.manual_seed(99) -- not the source's initial values: only the load can make them equal
  local m = T.place(lab.nn.GPT(cfg))
  return m, lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
end
local function tp_model(tp)
  local grid = lab.dist.grid { tp = tp }
  lab.manual_seed(1)
  local m = T.place(lab.tp.GPT(cfg, { group = grid.tp_group }))
  return m, lab.optim.AdamW(m:parameters(), { lr = 1e-2 }), grid
end

-- name -> {param, m, v} of a model trained by an AdamW over its parameters
local function named_state(m, opt)
  local out = {}
  for i, np in ipairs(m:named_parameters()) do
    local name = np[1]:gsub("qkv_weight$", "qkv.weight"):gsub("qkv_bias$", "qkv.bias")
    out[name] = { p = np[2], m = opt.state[i] and opt.state[i].m, v = opt.state[i] and opt.state[i].v }
  end
  return out
end

-- this TP rank's slice of a full tensor, as tp.lua cuts it (stride blocks, each split p ways)
local function tp_slice(full, marked, p, rank)
  if not marked.tensor_model_parallel or p == 1 then return full end
  local dim, stride = marked.partition_dim, marked.partition_stride or 1
  local block = full.shape[dim] // stride
  local per = block // p
  local parts = {}
  for s = 0, stride - 1 do parts[#parts + 1] = full:narrow(dim, s * block + rank * per + 1, per) end
  return #parts == 1 and parts[1] or lab.cat(parts, dim)
end

-- every parameter and moment of a TP model equals the slice of the full model's
local function check_tp_against_full(what, tm, topt, grid, full, fopt)
  local want = named_state(full, fopt)
  local n = 0
  for name, s in pairs(named_state(tm, topt)) do
    local f = want[name]
    T.ok(f ~= nil, what .. ": " .. name .. " missing in the full model")
    if f then
      for _, k in ipairs({ "p", "m", "v" }) do
        local cut = tp_slice(f[k], s.p, grid.tp, grid.tp_rank)
        T.eq(table.concat(cut.shape, ","), table.concat(s[k].shape, ","), what .. ": shape of " .. name .. "." .. k)
        T.eq(lab.max_abs_diff(cut, s[k]), 0, what .. ": " .. name .. "." .. k)
        n = n + 1
      end
    end
  end
  T.eq(n, 3 * #full:parameters(), what .. ": tensors compared")
end

T.test("TP " .. world .. " -> one rank alone: every parameter and moment, then the same loss", function()
  local tm, topt, grid = tp_model(world)
  for k = 1, 2 do lm_step(tm, topt, k) end
  lab.ckpt.save(path, { model = tm, optimizer = topt, step = 2 })
  local full, fopt = plain()
  T.eq(lab.ckpt.load(path, { model = full, optimizer = fopt, group = self_group }).step, 2)
  T.eq(fopt.step_count, 2)
  check_tp_against_full("TP -> 1", tm, topt, grid, full, fopt)
  T.near(lm_loss(full, 3), lm_loss(tm, 3), 1e-5, "the next batch's loss")
  T.near(lm_step(full, fopt, 3), lm_step(tm, topt, 3), 1e-5, "a step after the load")
end)

local pairs_at = { [2] = { { 2, 1 }, { 1, 2 } }, [4] = { { 2, 4 }, { 4, 2 } } }
for _, ab in ipairs(pairs_at[world] or {}) do
  local a, b = ab[1], ab[2]
  T.test(string.format("TP %d -> TP %d: every slice and moment, then the same loss", a, b), function()
    local am, aopt = tp_model(a)
    for k = 1, 2 do lm_step(am, aopt, k) end
    lab.ckpt.save(path, { model = am, optimizer = aopt, step = 2 })
    local bm, bopt, bgrid = tp_model(b)
    lab.ckpt.load(path, { model = bm, optimizer = bopt })
    -- the full model, loaded alone on this rank, is the reference (checked against TP above)
    local full, fopt = plain()
    lab.ckpt.load(path, { model = full, optimizer = fopt, group = self_group })
    check_tp_against_full(string.format("TP %d -> %d", a, b), bm, bopt, bgrid, full, fopt)
    T.near(lm_step(bm, bopt, 3), lm_step(am, aopt, 3), 1e-5, "a step after the load")
  end)
end

T.test("ZeRO-3 on " .. world .. " ranks -> DDP on " .. math.max(1, world // 2) .. ", and plain AdamW -> ZeRO-2", function()
  local zcfg = { vocab = 16, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8, tied = false }
  lab.manual_seed(1)
  local z = lab.zero.wrap(T.place(lab.nn.GPT(zcfg)), { stage = 3, lr = 1e-2 })
  for k = 1, 2 do lm_step(z, z, 10 * k + r) end -- each rank its own data
  lab.ckpt.save(path, { model = z, step = 2 })
  local half = math.max(1, world // 2)
  local g = lab.dist.split(r // half, r % half)
  lab.manual_seed(99)
  local d = lab.ddp.wrap(T.place(lab.nn.GPT(zcfg)), { group = g })
  local dopt = lab.optim.AdamW(d:parameters(), { lr = 1e-2 })
  lab.ckpt.load(path, { model = d, optimizer = dopt, group = g })
  T.eq(dopt.step_count, 2)
  -- every piece of ZeRO's shards (as the engine holds them) inside the DDP model's full tensors
  local by_name = named_state(d.module, dopt)
  local shards = z:checkpoint_shards()
  T.ok(#shards > 0, "this rank holds ZeRO pieces")
  for _, s in ipairs(shards) do
    local f = by_name[s.name]
    for k, zt in pairs({ p = s.param, m = s.exp_avg, v = s.exp_avg_sq }) do
      T.eq(lab.max_abs_diff(f[k]:reshape(-1):narrow(1, s.from + 1, s.to - s.from), zt), 0, s.name .. "." .. k)
    end
  end
  -- and back: the DDP model's state (the same on every rank) into a ZeRO-2 engine over the world
  lab.ckpt.save(path, { model = d, optimizer = dopt, step = 3 })
  lab.manual_seed(98)
  local z2 = lab.zero.wrap(T.place(lab.nn.GPT(zcfg)), { stage = 2, lr = 1e-2 })
  lab.ckpt.load(path, { model = z2 })
  T.eq(z2.step_count, 2)
  for _, s in ipairs(z2:checkpoint_shards()) do
    local f = by_name[s.name]
    for k, zt in pairs({ p = s.param, m = s.exp_avg, v = s.exp_avg_sq }) do
      T.eq(lab.max_abs_diff(f[k]:reshape(-1):narrow(1, s.from + 1, s.to - s.from), zt), 0, "ZeRO-2 " .. s.name .. "." .. k)
    end
  end
  T.near(lm_step(z2, z2, 7), lm_step(d, dopt, 7), 1e-5, "a step after the load (the same batch everywhere)")
end)

if world >= 2 then
  T.test("PP 2 -> 1: every layer of both stages in the whole model, moments too", function()
    local W = 8
    local function layers()
      lab.manual_seed(21)
      local ls = {}
      for i = 1, 4 do ls[i] = T.place(lab.nn.Linear(W, W)) end
      return ls
    end
    local pg = lab.dist.split(r // 2, r % 2) -- pipelines of two stages (replicas when world = 4)
    local s = lab.dist.rank(pg)
    local stages = lab.pp.partition(layers(), 2)
    local mse = function(y, t) return ((y - t) ^ 2):mean() end
    local pipe = lab.pp.Pipeline(stages[s + 1], { group = pg, micro_batches = 2, loss = mse,
      activation_shape = function(mb) return { mb, W } end })
    local opt = lab.optim.AdamW(pipe:parameters(), { lr = 1e-2 })
    lab.manual_seed(5)
    local X, Y = T.place(lab.randn(4, W)), T.place(lab.randn(4, W))
    for _ = 1, 2 do
      opt:zero_grad()
      pipe:train_step(X, Y)
      opt:step()
    end
    lab.ckpt.save(path, { model = pipe, optimizer = opt, step = 2 })
    lab.manual_seed(77)
    local whole = T.place(lab.nn.Sequential(layers()))
    for _, p in ipairs(whole:parameters()) do p:normal_() end
    local wopt = lab.optim.AdamW(whole:parameters(), { lr = 1e-2 })
    lab.ckpt.load(path, { model = whole, optimizer = wopt, group = self_group })
    local mine = named_state(stages[s + 1], opt)
    local all = named_state(whole, wopt)
    local first = stages[s + 1].first_layer
    local n = 0
    for name, st in pairs(mine) do
      local k, rest = name:match("^(%d+)%.(.*)$")
      local w = all[(tonumber(k) + first - 1) .. "." .. rest]
      for _, f in ipairs({ "p", "m", "v" }) do
        T.eq(lab.max_abs_diff(w[f], st[f]), 0, "layer " .. name .. " of stage " .. s .. " " .. f)
        n = n + 1
      end
    end
    T.eq(n, 3 * 2 * 2, "tensors compared on this stage")
    T.near(mse(whole(X), Y):item(), pipe:train_step(X, Y), 1e-6, "the whole model's loss is the pipeline's")
  end)
end

common.remove(dir)
T.finish()
