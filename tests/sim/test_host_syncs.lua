-- Issue 23: a GPT training step on the GPU path makes no host synchronization other than the
-- loss read-back. Counted on the sim device (runtime/cuda's device over runtime/simrt, where
-- lab.cuda.sim_host_syncs() counts every wait of the host for a stream), and the device-side
-- id checks that replaced the host's: a bad id is raised at the next synchronization, naming
-- the op, the id and the range, and the session goes on.
-- Run: build/llmlab --device sim tests/sim/test_host_syncs.lua (ctest: sim.test_host_syncs)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")

local cfg = { vocab = 32, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8 }

local function batch(dev)
  lab.manual_seed(3)
  local ids = lab.randint(0, cfg.vocab, { 2, cfg.seq_len }, { device = "cpu" })
  local tg = lab.randint(0, cfg.vocab, { 2, cfg.seq_len }, { device = "cpu" })
  return ids:to(dev), tg:to(dev)
end

local function model(dev)
  lab.manual_seed(1)
  local m = lab.nn.GPT(cfg)
  m:to(dev)
  return m, lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
end

local function step(m, opt, ids, tg)
  opt:zero_grad()
  local _, loss = m(ids, tg)
  loss:backward()
  opt:step()
  return loss:item()
end

T.test("a GPT step (forward, backward, AdamW, loss:item()) makes 1 host sync on sim, = cpu", function()
  local mc, oc = model("cpu")
  local ms, os_ = model("sim")
  local ic, tc = batch("cpu")
  local is, ts = batch("sim")
  for k = 1, 3 do
    local want = step(mc, oc, ic, tc)
    local s0 = lab.cuda.sim_host_syncs()
    local got = step(ms, os_, is, ts)
    T.eq(lab.cuda.sim_host_syncs() - s0, 1, "host syncs in step " .. k .. " (the loss read-back)")
    T.near(got, want, 1e-5, "loss of step " .. k .. " = cpu")
  end
  local pc, ps = mc:parameters(), ms:parameters()
  T.eq(#ps, #pc, "parameter count")
  for i = 1, #pc do
    local d = (ps[i]:to("cpu"):to("f64") - pc[i]:to("f64")):abs():max():item()
    T.ok(d < 1e-4, "parameter " .. i .. " after 3 steps = cpu (max diff " .. d .. ")")
  end
end)

-- gradient clipping and amp's dynamic loss scaling read one value each for the whole model:
-- clip_grad_norm read each parameter's norm (1 + 16 syncs a step for this GPT before), amp's
-- overflow check each gradient's sum (1 + 16 more)
local function step_clip(m, opt, ids, tg)
  opt:zero_grad()
  local _, loss = m(ids, tg)
  loss:backward()
  local norm = lab.optim.clip_grad_norm(m:parameters(), 0.05)
  opt:step()
  return loss:item(), norm
end

T.test("a GPT step with clip_grad_norm makes 2 host syncs on sim (loss, norm), = cpu", function()
  local mc, oc = model("cpu")
  local ms, os_ = model("sim")
  local ic, tc = batch("cpu")
  local is, ts = batch("sim")
  T.ok(#ms:parameters() > 2, "a model of several parameters: " .. #ms:parameters())
  for k = 1, 2 do
    local want, wnorm = step_clip(mc, oc, ic, tc)
    local s0 = lab.cuda.sim_host_syncs()
    local got, norm = step_clip(ms, os_, is, ts)
    T.eq(lab.cuda.sim_host_syncs() - s0, 2, "host syncs in step " .. k .. " (the loss and the total norm)")
    T.near(got, want, 1e-5, "loss of step " .. k .. " = cpu")
    T.near(norm, wnorm, 1e-5 * wnorm, "norm of step " .. k .. " = cpu")
    T.ok(wnorm > 0.05, "the norm is clipped (" .. wnorm .. ")")
  end
  local pc, ps = mc:parameters(), ms:parameters()
  for i = 1, #pc do
    local d = (ps[i]:to("cpu"):to("f64") - pc[i]:to("f64")):abs():max():item()
    T.ok(d < 1e-4, "parameter " .. i .. " after 2 clipped steps = cpu (max diff " .. d .. ")")
  end
end)

local function amp_model(dev)
  local m = model(dev)
  local mp = lab.amp.MixedPrecision(m, { dtype = "f16", growth_interval = 1, init_scale = 16,
    optimizer = function(ps) return lab.optim.AdamW(ps, { lr = 1e-2 }) end })
  return m, mp
end

T.test("an f16 GPT step with dynamic loss scaling makes 2 host syncs on sim (loss, found_inf), = cpu", function()
  local mc, pc = amp_model("cpu")
  local ms, ps = amp_model("sim")
  local ic, tc = batch("cpu")
  local is, ts = batch("sim")
  local function run(m, mp, ids, tg, clip)
    mp:zero_grad()
    local _, loss = m(ids, tg)
    mp:backward(loss)
    local ok = mp:step(clip and { clip = clip } or nil)
    return loss:item(), ok
  end
  for k = 1, 2 do
    local want, wok = run(mc, pc, ic, tc)
    local s0 = lab.cuda.sim_host_syncs()
    local got, ok = run(ms, ps, is, ts)
    T.eq(lab.cuda.sim_host_syncs() - s0, 2, "host syncs in step " .. k .. " (the loss and the overflow check)")
    T.eq(ok, wok, "step " .. k .. " taken as on the cpu")
    T.near(got, want, 1e-2, "loss of step " .. k .. " = cpu (f16)")
  end
  T.eq(ps.scale, pc.scale, "the loss scale grew as on the cpu")
  local s0 = lab.cuda.sim_host_syncs()
  local _, taken = run(ms, ps, is, ts, 0.05)
  T.eq(taken, true, "the clipped step is taken")
  T.eq(lab.cuda.sim_host_syncs() - s0, 3, "with clipping: the loss, the overflow check, the norm")
  -- an overflow is still found: a gradient made infinite skips the step and lowers the scale
  ps:zero_grad()
  local _, loss = ms(is, ts)
  ps:backward(loss * 1e30)
  local scale = ps.scale
  T.eq(ps:step(), false, "an infinite gradient skips the step")
  T.eq(ps.scale, scale * 0.5, "and halves the scale")
end)

-- a bad id no longer stops the host at the op: the check runs on the device, its record comes
-- back with the next wait, which raises it (as CUDA's device-side assert)
local function ids(t, dev) return lab.tensor(t):to("cpu"):to("i64"):to(dev) end

T.test("an out-of-range token id on sim raises at the next sync, naming the op, id and range", function()
  local w = lab.randn(10, 4, { device = "sim" })
  local bad_ids = ids({ 1, 12, 3 }, "sim")
  local out = lab.embedding(bad_ids, w) -- queued: no error yet, no wait
  local ok, err = pcall(function() return out:sum():item() end)
  T.ok(not ok, "the read-back raises")
  T.ok(tostring(err):find("embedding: id 12 at position 2 is outside [0, 10)", 1, true), tostring(err))
  T.ok(tostring(err):find("rank", 1, true), "names the rank: " .. tostring(err))
  -- the session goes on: the record was cleared, the next ops and reads are right
  local good = lab.embedding(ids({ 1, 9 }, "sim"), w)
  local want = lab.embedding(ids({ 1, 9 }, "cpu"), w:to("cpu"))
  T.eq((good:to("cpu") - want):abs():max():item(), 0, "rows after the error = cpu")
  -- cross-entropy's targets, with ignore_index accepted
  local logits = lab.randn(3, 5):to("sim")
  local l = lab.cross_entropy(logits, ids({ 4, -100, 0 }, "sim"))
  T.near(l:item(), lab.cross_entropy(logits:to("cpu"), ids({ 4, -100, 0 }, "cpu")):item(), 1e-6, "ignored")
  local bad = lab.cross_entropy(logits, ids({ 4, 5, 0 }, "sim"))
  ok, err = pcall(function() return bad:item() end)
  T.ok(not ok and tostring(err):find("cross_entropy: id 5 at position 2 is outside [0, 5)", 1, true), tostring(err))
  T.near(lab.cross_entropy(logits, ids({ 4, 1, 0 }, "sim")):item(),
    lab.cross_entropy(logits:to("cpu"), ids({ 4, 1, 0 }, "cpu")):item(), 1e-6, "after the error = cpu")
  -- any wait raises it, here a copy of another tensor to the host; then that copy works again
  lab.embedding(ids({ 0, -1 }, "sim"), w)
  local other = lab.ones(3, { device = "sim" })
  ok, err = pcall(function() return other:to("cpu") end)
  T.ok(not ok and tostring(err):find("embedding: id -1 at position 2 is outside [0, 10)", 1, true), tostring(err))
  T.eq(other:to("cpu"):sum():item(), 3, "the next copy")
end)

T.finish()
