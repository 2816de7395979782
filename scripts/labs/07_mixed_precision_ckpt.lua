-- Lab 07: mixed precision and checkpoint/resume.
--
-- What it shows: what bf16 and f16 can and cannot represent (measured by casting, not
-- quoted), the two problems that follow (a 16-bit weight ignores small updates; small f16
-- gradients flush to zero) and the two fixes (fp32 master weights; a dynamic loss scale).
-- Then a data-parallel GPT trained in fp32, bf16 and f16 side by side, with what each
-- costs in memory per parameter, and a mixed-precision checkpoint: saved mid-run
-- asynchronously (training goes on while a writer thread writes), resumed in a fresh model
-- bit for bit, a save that dies half-way (synchronous, and in an async writer thread) leaving
-- the previous checkpoint whole, and a damaged checkpoint refused on every rank.
--   scripts/llmlab -n 4 scripts/labs/07_mixed_precision_ckpt.lua
local dist = lab.dist
local rank, world = dist.rank(), dist.world()
local check, finish = lab.checker(62)
lab.print0(string.format("== Lab 07: mixed precision and checkpoint/resume, %d ranks ==", world))

-- 1. The formats, probed: the gap above 1 (epsilon), the smallest positive value that
-- survives the cast, and the first power of two that overflows.
local function probe(dt)
  local function cast(x) return lab.tensor({ x }, { dtype = "f64" }):to(dt):to("f64")[1] end
  local eps_k = 0
  while cast(1 + 2.0 ^ -(eps_k + 1)) ~= 1 do eps_k = eps_k + 1 end
  local tiny_k = 0
  while cast(2.0 ^ -(tiny_k + 1)) ~= 0 and tiny_k < 200 do tiny_k = tiny_k + 1 end
  local big_k = 0
  while cast(2.0 ^ (big_k + 1)) ~= math.huge and big_k < 200 do big_k = big_k + 1 end
  return eps_k, tiny_k, big_k + 1
end
lab.print0("\n1. What each format holds (probed by casting):")
lab.print0(string.format("   %-5s %-14s %-22s %s", "dtype", "1 + eps, eps=", "smallest nonzero", "overflows at"))
local formats = {}
for _, dt in ipairs({ "f32", "bf16", "f16" }) do
  local e, t, b = probe(dt)
  formats[dt] = { eps = e, tiny = t, big = b }
  lab.print0(string.format("   %-5s 2^-%-11d 2^-%-19d %s", dt, e, t, b > 200 and "beyond 2^200" or "2^" .. b))
end
check("bf16 keeps 8 significant bits, f16 11 (eps 2^-7, 2^-10)", formats.bf16.eps == 7 and formats.f16.eps == 10)
check("bf16 has f32's range, f16 overflows at 2^16 (max 65504)", formats.bf16.big > 120 and formats.f16.big == 16)

-- 2. Problem one: a weight of 1.0 in bf16 cannot take a step of 1e-4 (the next value down
-- is 1 - 2^-8 = 0.9961): each step rounds back to 1. The fix keeps an fp32 master copy,
-- updates it, and casts it down; the steps add up in the master until the copy moves.
lab.print0("\n2. A hundred SGD updates of -1e-4 to a weight of 1.0:")
local w16 = lab.full({ 1 }, 1.0, { dtype = "bf16" })
for _ = 1, 100 do w16:sub_(lab.full({ 1 }, 1e-4, { dtype = "bf16" })) end
local Scalar = lab.nn.class("Scalar")
function Scalar:init() self:param("w", lab.full({ 1 }, 1.0, { dtype = "f32" })) end
function Scalar:forward(c) return (self.w * c):sum() end
local s = Scalar()
local mp = lab.amp.MixedPrecision(s, { dtype = "bf16",
  optimizer = function(ps) return lab.optim.SGD(ps, { lr = 1e-4 }) end })
for _ = 1, 100 do
  mp:zero_grad()
  mp:backward(s(lab.ones(1, { dtype = "bf16" })))
  mp:step()
end
lab.print0(string.format("   bf16 weight updated in place:     %.6f", w16[1]))
lab.print0(string.format("   fp32 master:                      %.6f  (its bf16 copy: %.6f)",
  mp.master_params[1][1], s.w[1]))
check("plain bf16 SGD does not move; the master moves by 1e-2",
  w16[1] == 1.0 and math.abs(mp.master_params[1][1] - 0.99) < 1e-5 and s.w[1] < 1)

-- 3. Problem two: f16 gradients under 2^-24 become 0. Here each gradient is 2^-26. A
-- loss scale of 2^16 lifts it to 2^-10 during backward; dividing by 2^16 in fp32 after
-- gives back the exact value.
lab.print0("\n3. A gradient of 2^-26 through an f16 model:")
local function grad_with(opts)
  local m = Scalar()
  opts.dtype, opts.optimizer = "f16", function(ps) return lab.optim.SGD(ps, { lr = 1 }) end
  local p = lab.amp.MixedPrecision(m, opts)
  local inner = m(lab.full({ 1 }, 2.0 ^ -12, { dtype = "f16" }))
  p:backward(inner:float() * 2.0 ^ -14)
  p:unscale()
  return p.master_params[1].grad[1]
end
local lost, kept = grad_with({ loss_scale = 1 }), grad_with({})
lab.print0(string.format("   without a loss scale: %g;  with 2^16: %g (2^-26 = %g)", lost, kept, 2.0 ^ -26))
check("the loss scale recovers a gradient f16 would flush to zero", lost == 0 and kept == 2.0 ^ -26)

-- 4. A GPT, data parallel over every rank, trained three ways from the same start on the
-- same data. The loss is computed in fp32 even for 16-bit models (as autocast does).
local cfg = { vocab = 64, d_model = 64, n_layer = 2, n_head = 4, seq_len = 32 }
local steps = 30
local function train(dtype)
  collectgarbage()
  collectgarbage() -- the previous run's tensors, so the memory columns are this run's
  local base = lab.mem.stats().tags
  lab.manual_seed(7)
  local gpt = lab.nn.GPT(cfg)
  local adamw = function(ps) return lab.optim.AdamW(ps, { lr = 3e-3 }) end
  local amp, opt
  if dtype ~= "f32" then amp = lab.amp.MixedPrecision(gpt, { dtype = dtype, optimizer = adamw }) end
  local model = lab.ddp.wrap(gpt) -- after the cast: DDP reduces the 16-bit gradients
  if not amp then opt = adamw(model:parameters()) end
  lab.mem.reset_peak()
  local losses = {}
  for k = 1, steps do
    lab.manual_seed(1000 * k + rank) -- each rank its own batch
    local ids = lab.randint(0, cfg.vocab // 4, { 4, cfg.seq_len }) * 4 -- a learnable pattern
    local _, loss = model(ids, ids)
    if amp then
      amp:zero_grad()
      amp:backward(loss)
      amp:step()
    else
      opt:zero_grad()
      loss:backward()
      opt:step()
    end
    local l = lab.tensor({ loss:item() }, { dtype = "f64" })
    dist.all_reduce(l)
    losses[k] = l[1] / world
  end
  local now = lab.mem.stats().tags
  local added = { param = now.param.current - base.param.current,
    optimizer = now.optimizer.current - base.optimizer.current }
  return losses, added, amp
end
lab.print0(string.format("\n4. GPT (%d parameters), %d ranks x 4 sequences, %d AdamW steps:",
  lab.nn.GPT(cfg):num_parameters(), world, steps))
lab.print0(string.format("   %-5s %9s %9s %9s %12s %14s %8s", "dtype", "loss 1", "loss 10", "loss 30",
  "param B/p", "optimizer B/p", "skipped"))
local ref
local n_params = lab.nn.GPT(cfg):num_parameters()
for _, dt in ipairs({ "f32", "bf16", "f16" }) do
  local losses, stats, amp = train(dt)
  ref = ref or losses
  lab.print0(string.format("   %-5s %9.4f %9.4f %9.4f %12.1f %14.1f %8s", dt, losses[1], losses[10], losses[steps],
    stats.param / n_params, stats.optimizer / n_params, amp and amp.skipped or "-"))
  local pb, ob = stats.param / n_params, stats.optimizer / n_params
  check(string.format("%s: %g B/param in weights, %g in the optimizer", dt, pb, ob),
    dt == "f32" and pb == 4 and ob == 8 or dt ~= "f32" and pb == 2 and ob == 12)
  if dt ~= "f32" then
    check(string.format("%s final loss within 0.05 of fp32 (%.4f vs %.4f)", dt, losses[steps], ref[steps]),
      math.abs(losses[steps] - ref[steps]) < 0.05)
  end
end
lab.print0("   (16-bit params cost 2 B each; the optimizer holds the 4 B master plus two 4 B moments)")

-- 5. Checkpoint and resume. Train 8 steps straight; separately train 4, save, throw the
-- model away, build a fresh one, load, train 4 more: the losses must match bit for bit.
local run_id = lab.tensor({ os.time() % 100000 * 1000 + math.random(0, 999) }, { dtype = "i64" })
dist.broadcast(run_id, 0) -- one directory name for every rank, unique to this run
local dir = string.format("/tmp/llmlab-lab07-%d/ckpt", run_id[1])
local function fresh()
  lab.manual_seed(7)
  local gpt = lab.nn.GPT(cfg)
  local amp = lab.amp.MixedPrecision(gpt, { dtype = "f16", init_scale = 2.0 ^ 12, growth_interval = 3,
    optimizer = function(ps) return lab.optim.AdamW(ps, { lr = 3e-3 }) end })
  return lab.ddp.wrap(gpt), gpt, amp
end
local function run(model, amp, from, to, out)
  for k = from, to do
    lab.manual_seed(1000 * k + rank)
    local ids = lab.randint(0, cfg.vocab // 4, { 4, cfg.seq_len }) * 4
    local _, loss = model(ids, ids)
    amp:zero_grad()
    amp:backward(loss)
    amp:step()
    out[k] = loss:item()
  end
end
lab.print0("\n5. Checkpoint at step 4, resume in a fresh model, compare with an unbroken run:")
local straight, resumed = {}, {}
do
  local model, _, amp = fresh()
  run(model, amp, 1, 8, straight)
end
local continued = {}
do
  local model, gpt, amp = fresh()
  run(model, amp, 1, 4, {})
  -- asynchronous: save() takes a host snapshot and returns; a writer thread computes the
  -- checksums, writes and fsyncs while steps 5 and 6 train; wait() joins it and commits
  local t0 = lab.clock()
  local step_dir = lab.ckpt.save(dir, { model = gpt, amp = amp, step = 4, async = true })
  local t_save = lab.clock() - t0
  run(model, amp, 5, 6, continued)
  local t1 = lab.clock()
  lab.ckpt.wait()
  local t_wait = lab.clock() - t1
  -- the same state saved synchronously, for comparison (into a directory of its own)
  local t2 = lab.clock()
  lab.ckpt.save(dir .. "-sync", { model = gpt, amp = amp, step = 6 })
  local t_sync = lab.clock() - t2
  lab.print0(string.format("   async save returned after %.1f ms (rank %d); steps 5-6 trained while the thread", t_save * 1e3, rank))
  lab.print0(string.format("   wrote; wait() then took %.1f ms more; a synchronous save of the same model: %.1f ms", t_wait * 1e3,
    t_sync * 1e3))
  lab.print0("   saved " .. step_dir .. ": per rank a .safetensors (16-bit weights, fp32 masters, Adam")
  lab.print0("   moments, each with a crc32) and a JSON index (global shapes, step, loss scale, RNG);")
  lab.print0("   " .. dir .. "/latest names it")
end
check("steps 5-6, trained during the async write, equal the unbroken run's",
  continued[5] == straight[5] and continued[6] == straight[6])
local model, gpt, amp = fresh()
local state = lab.ckpt.load(dir, { model = gpt, amp = amp })
run(model, amp, state.step + 1, 8, resumed)
for k = 5, 8 do
  lab.print0(string.format("   step %d  unbroken %.10f  resumed %.10f", k, straight[k], resumed[k]))
end
local same = true
for k = 5, 8 do same = same and straight[k] == resumed[k] end
check("resumed losses equal the unbroken run's bit for bit", same)

-- 6. A save that fails half-way (injected: the last rank's 3rd file operation fails) must
-- not touch the checkpoint already there. (tests/lua/single/test_ckpt_crash.lua kills the
-- process at every file operation of a save and loads what is left.)
lab.print0("\n6. A save that fails half-way:")
if rank == world - 1 then lab.ckpt.fail_at = 3 end
local ok, err = pcall(lab.ckpt.save, dir, { model = gpt, amp = amp, step = 8 })
lab.print0("   save raised: " .. tostring(err):gsub("\n.*", ""))
local _, gpt2, amp2 = fresh()
local kept = lab.ckpt.load(dir, { model = gpt2, amp = amp2 })
lab.print0(string.format("   the checkpoint on disk is still step %d", kept.step))
check("the failed save raised on every rank and step 4 is still loadable", not ok and kept.step == 4)
-- the same in an async save: save() returns, the last rank's writer thread fails at its first
-- file operation (rank 0 first makes the step directory: its 3rd), and wait() raises everywhere
if rank == world - 1 then lab.ckpt.fail_at = world == 1 and 3 or 1 end
local aok = pcall(lab.ckpt.save, dir, { model = gpt, amp = amp, step = 8, async = true })
local wok, werr = pcall(lab.ckpt.wait)
lab.print0("   async: save returned " .. tostring(aok) .. "; wait raised: " .. tostring(werr):gsub("\n.*", ""))
local kept2 = lab.ckpt.load(dir, { model = gpt2, amp = amp2 })
check("an async writer's failure raised at wait on every rank; step 4 still loads", aok and not wok and kept2.step == 4)

-- 7. A damaged checkpoint is refused on every rank before anything changes: one flipped bit
-- in the last rank's tensor file fails its crc32.
lab.print0("\n7. One flipped bit in the last rank's tensor file:")
dist.barrier()
if rank == world - 1 then
  local p = string.format("%s/rank%05d.safetensors", kept.path, world - 1)
  local f = assert(io.open(p, "r+b"))
  local size = f:seek("end")
  f:seek("set", size - 1)
  local b = f:read(1):byte()
  f:seek("set", size - 1)
  f:write(string.char(b ~ 1))
  f:close()
end
dist.barrier()
local ok3, err3 = pcall(lab.ckpt.load, dir, { model = gpt2, amp = amp2 })
lab.print0("   load raised: " .. tostring(err3):gsub("\n.*", ""))
check("the damaged checkpoint is refused on every rank", not ok3 and tostring(err3):find("checksum", 1, true) ~= nil)
dist.barrier()
if rank == 0 then os.execute("rm -rf '" .. dir:gsub("/ckpt$", "") .. "'") end -- ckpt and ckpt-sync
finish("lab 07")
