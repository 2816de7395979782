-- Damaged checkpoints are refused, on every rank, before anything changes: flipped data and
-- moment bytes (checksums), dtypes changed in the safetensors header or in the index, the step
-- changed, a moment missing, an index that is Lua code (`while true do end`: parsed as JSON,
-- never run), truncated files, a bad `latest`. Damaging only the last rank's file makes every
-- rank raise, naming that rank and file. The model and optimizer are unchanged after each.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local common = require("ckpt_common")
local r, world = lab.dist.rank(), lab.dist.world()
local dir = common.tmpdir("ckpt-corrupt")
local path = dir .. "/ckpt"
local cfg = { vocab = 16, d_model = 8, n_layer = 1, n_head = 2, seq_len = 4 }

local function trained(seed)
  lab.manual_seed(seed)
  local m = lab.nn.GPT(cfg)
  local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
  local ids = lab.randint(0, 16, { 2, 4 })
  local _, loss = m(ids, ids)
  loss:backward()
  opt:step()
  return m, opt
end

local src, src_opt = trained(1)
local dst, dst_opt = trained(2) -- what a refused load must leave alone
local function dst_state()
  local out = {}
  for i, p in ipairs(dst:parameters()) do out[#out + 1] = p:clone() out[#out + 1] = dst_opt.state[i].m:clone() end
  return out
end

-- save a good checkpoint, let rank `who` damage it with fn(step_dir), and expect every rank
-- to refuse it with messages containing the fragments
local function refused(what, who, fn, ...)
  local frags = { ... }
  T.test(what, function()
    local step_dir = lab.ckpt.save(path, { model = src, optimizer = src_opt, step = 1 })
    lab.dist.barrier()
    if r == who then fn(step_dir) end
    lab.dist.barrier()
    local before = dst_state()
    local ok, err = pcall(lab.ckpt.load, path, { model = dst, optimizer = dst_opt })
    T.ok(not ok, what .. ": the load was not refused")
    err = tostring(err)
    T.ok(err:find("ckpt.load", 1, true) ~= nil, "no op name in: " .. err)
    for _, f in ipairs(frags) do
      if type(f) == "function" then f = f() end
      T.ok(err:find(f, 1, true) ~= nil, string.format("error %q does not mention %q", err, f))
    end
    T.ok(err:find("nothing was changed", 1, true) ~= nil, "error does not say nothing changed: " .. err)
    for i, t in ipairs(dst_state()) do T.eq(lab.max_abs_diff(t, before[i]), 0, "tensor " .. i .. " unchanged") end
  end)
end

local function st(step_dir, rank) return string.format("%s/rank%05d.safetensors", step_dir or "", rank or 0) end
local function js(step_dir, rank) return string.format("%s/rank%05d.json", step_dir or "", rank or 0) end
local function edit(p, from, to)
  local s = common.read(p)
  local a, b = s:find(from, 1, true)
  assert(a, "no " .. from .. " in " .. p)
  common.write(p, s:sub(1, a - 1) .. to .. s:sub(b + 1))
end

refused("a flipped data byte", 0, function(d)
  local at = common.data_range(st(d), "model.wte.weight")
  common.flip(st(d), { at + 5 })
end, "model.wte.weight", "fails its checksum", st(nil, 0):sub(2))

refused("many flipped data bytes", 0, function(d)
  local at = common.data_range(st(d), "model.wte.weight")
  local size = #common.read(st(d))
  local offs = {}
  for o = at, size - 1, 97 do offs[#offs + 1] = o end
  common.flip(st(d), offs)
end, "fails its checksum")

refused("a flipped optimizer-moment byte", 0, function(d)
  local at, n = common.data_range(st(d), "optim.blocks.1.mlp.fc.weight.exp_avg")
  common.flip(st(d), { at + n - 1 })
end, "optim.blocks.1.mlp.fc.weight.exp_avg", "fails its checksum")

refused("F32 changed to I32 in the safetensors header", 0, function(d) edit(st(d), '"dtype":"F32"', '"dtype":"I32"') end,
  "is i32 in the file, f32 in the index")

refused("F32 changed to F16 in the safetensors header", 0, function(d) edit(st(d), '"dtype":"F32"', '"dtype":"F16"') end,
  "shape and dtype F16 need")

refused("f32 changed to bf16 in the index", 0, function(d) edit(js(d), '"dtype":"f32"', '"dtype":"bf16"') end,
  "the index was changed")

refused("the step changed in the index", 0, function(d) edit(js(d), '"step":1', '"step":2') end,
  "says step 2; the directory is step 1")

refused("a moment entry removed from the index", 0, function(d)
  local s = common.read(js(d))
  local entry = '"optim%.wte%.weight%.exp_avg_sq":{[^}]*}'
  local cut = s:gsub(entry .. ",", "")
  if cut == s then cut = s:gsub("," .. entry, "") end
  assert(cut ~= s)
  common.write(js(d), cut)
end, "the index was changed")

refused("an index that is Lua code is parsed as data, never run", 0,
  function(d) common.write(js(d), "while true do end") end, "rank00000.json is not valid JSON")

refused("a truncated tensor file", 0, function(d)
  local s = common.read(st(d))
  common.write(st(d), s:sub(1, #s // 2))
end, "rank00000.safetensors")

refused("a latest pointer that names no step", 0, function() common.write(path .. "/latest", "../../etc\n") end,
  "latest does not name a step directory")

refused("damage to the last rank's file only: every rank raises, naming it", world - 1, function(d)
  local at = common.data_range(st(d, world - 1), "model.ln_f.weight")
  common.flip(st(d, world - 1), { at })
end, string.format("rank%05d.safetensors", world - 1), "fails its checksum",
  function() return r == world - 1 and "model.ln_f.weight" or string.format("rank %d failed", world - 1) end)

T.test("a checkpoint missing a moment is refused at load, not at the next opt:step()", function()
  local m, opt = trained(3)
  opt.state[2].v = nil -- a state with exp_avg only
  lab.ckpt.save(path, { model = m, optimizer = opt, step = 1 })
  local before = dst_state()
  T.raises(function() lab.ckpt.load(path, { model = dst, optimizer = dst_opt }) end, "ckpt.load", "lacks exp_avg_sq",
    "nothing was changed")
  for i, t in ipairs(dst_state()) do T.eq(lab.max_abs_diff(t, before[i]), 0, "tensor " .. i .. " unchanged") end
end)

T.test("the undamaged checkpoint loads (the checks above are not refusing everything)", function()
  lab.ckpt.save(path, { model = src, optimizer = src_opt, step = 1 })
  T.eq(lab.ckpt.load(path, { model = dst, optimizer = dst_opt }).step, 1)
  for i, p in ipairs(dst:parameters()) do T.eq(lab.max_abs_diff(p, src:parameters()[i]), 0, "parameter " .. i) end
end)

common.remove(dir)
T.finish()
