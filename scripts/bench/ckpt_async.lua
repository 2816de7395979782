-- Step time of a GPT training loop that checkpoints every N steps: no saving vs synchronous
-- saves vs asynchronous saves (lab.ckpt.save{async=true}: a host snapshot, then a writer thread
-- computes checksums, writes and fsyncs while training goes on), measured side by side in one
-- run: R rounds, each running one block per mode (K saves, each followed by N steps) in a
-- rotated order, so load from other work on the machine falls on every mode alike. Target
-- (issue 16): async at most 10% over no saving, where sync costs more.
--   build/llmlab [-n ranks] scripts/bench/ckpt_async.lua [N=5] [K=3] [R=3] [dir=/tmp]
-- Prints per mode the median wall ms/step over rounds and its ratio to no saving; the CPU
-- ms/step of the process (all its threads: BLAS, the writer) and its ratio, which stays
-- meaningful on a machine loaded by other work where wall time does not (an fsync waits
-- without CPU: only the wall figure sees what sync saves cost in I/O); the time training stood
-- still in each save call (sync: the whole save; async: preparing the index, the host
-- snapshot, rank 0 making the step directory, and waiting for the previous write); async's
-- untimed wait after a block; and the checkpoint size per rank.
local N, K, R = tonumber(arg[1]) or 5, tonumber(arg[2]) or 3, tonumber(arg[3]) or 3
local root = (arg[4] or "/tmp") .. string.format("/llmlab-bench-ckpt-%d", os.time())
local rank, world = lab.dist.rank(), lab.dist.world_size()

lab.manual_seed(0)
local cfg = { vocab = 512, d_model = 192, n_layer = 3, n_head = 4, seq_len = 64 }
local B = 4
local model = lab.ddp.wrap(lab.nn.GPT(cfg))
local opt = lab.optim.AdamW(model:parameters(), { lr = 3e-4 })
local ids = lab.randint(0, cfg.vocab, { B, cfg.seq_len })
local function train_step()
  local _, loss = model(ids, ids)
  opt:zero_grad()
  loss:backward()
  opt:step()
end
for _ = 1, 3 do train_step() end -- warm-up: allocator, BLAS buffers, optimizer state

local step_no = 0
local stalls, tail = { none = {}, sync = {}, async = {} }, {}
-- one block: K times a save (at a step boundary) then N steps; returns wall and CPU seconds
-- per step. An async block's last write overlaps its last N steps; whatever of it is left is
-- waited for after the clock stops (reported apart), so it does not fall into the next block.
local function block(mode)
  lab.dist.barrier()
  local t0, c0 = lab.clock(), lab.dist.cpu_time()
  for _ = 1, K do
    step_no = step_no + 1
    if mode ~= "none" then
      local s0 = lab.clock()
      lab.ckpt.save(root .. "/" .. mode, { model = model, optimizer = opt, step = step_no, async = mode == "async" })
      stalls[mode][#stalls[mode] + 1] = lab.clock() - s0
    end
    for _ = 1, N do train_step() end
  end
  local wall, cpu = lab.clock() - t0, lab.dist.cpu_time() - c0
  if mode == "async" then
    local s0 = lab.clock()
    lab.ckpt.wait()
    tail[#tail + 1] = lab.clock() - s0
  end
  lab.dist.barrier()
  return wall / (N * K), cpu / (N * K)
end

local modes = { "none", "sync", "async" }
local times, cpus = { none = {}, sync = {}, async = {} }, { none = {}, sync = {}, async = {} }
for r = 1, R do
  for i = 0, #modes - 1 do
    local mode = modes[(r - 1 + i) % #modes + 1]
    local t = lab.tensor({ block(mode) }, { dtype = "f64" })
    lab.dist.all_reduce(t, { op = "max" }) -- a step is as slow as its slowest rank
    times[mode][#times[mode] + 1], cpus[mode][#cpus[mode] + 1] = t[1], t[2]
  end
end

local function median(xs)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

local bytes = 0
do -- this rank's checkpoint files of the newest sync step
  local latest = lab._ckpt.read_file(root .. "/sync/latest", 4096)
  local sdir = root .. "/sync/" .. latest:gsub("\n", "")
  for _, n in ipairs(lab._ckpt.list_dir(sdir) or {}) do
    if n:match(string.format("^rank%05d%%.", rank)) then
      local f = io.open(sdir .. "/" .. n, "rb")
      bytes = bytes + f:seek("end")
      f:close()
    end
  end
end

local nparams = 0
for _, p in ipairs(model:parameters()) do nparams = nparams + p:numel() end
local base = median(times.none)
if rank == 0 then
  print(string.format("GPT %d layers d_model %d (%.2fM parameters), batch %dx%d, AdamW, %d rank(s); a save every %d steps, "
    .. "%d saves per block, %d rounds; checkpoint %.1f MiB per rank in %s", cfg.n_layer, cfg.d_model,
    nparams / 1e6, B, cfg.seq_len, world, N, K, R, bytes / 2 ^ 20, root))
  local cbase = median(cpus.none)
  print(string.format("%-6s %10s %7s %12s %7s %14s   %s", "mode", "wall ms/st", "ratio", "cpu ms/step", "ratio",
    "ms in save", "wall ms/step per round"))
  for _, mode in ipairs(modes) do
    local per = {}
    for i, t in ipairs(times[mode]) do per[i] = string.format("%.1f", t * 1e3) end
    print(string.format("%-6s %10.1f %7.3f %12.1f %7.3f %14s   %s", mode, median(times[mode]) * 1e3,
      median(times[mode]) / base, median(cpus[mode]) * 1e3, median(cpus[mode]) / cbase,
      mode == "none" and "-" or string.format("%.1f", median(stalls[mode]) * 1e3), table.concat(per, " ")))
  end
  local a, s = median(times.async) / base, median(times.sync) / base
  print(string.format("wall: async costs %.1f%% over no saving (target <= 10%%), sync %.1f%%: %s", (a - 1) * 100,
    (s - 1) * 100, (a <= 1.10 and s > a) and "target met" or "target NOT met"))
  print(string.format("cpu:  async %.1f%%, sync %.1f%% over no saving; async's untimed wait after a block: %.1f ms",
    (median(cpus.async) / cbase - 1) * 100, (median(cpus.sync) / cbase - 1) * 100, median(tail) * 1e3))
  os.execute("rm -rf '" .. root .. "'")
end
