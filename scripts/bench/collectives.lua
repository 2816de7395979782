-- Benchmark: one collective through lab.dist over a range of sizes, printed as nccl-tests'
-- own table (all_reduce_perf and friends), so a line compares with theirs column for column:
--   size (B), count (elements), type, redop, root, then time (us), algbw, busbw (GB/s) and
--   #wrong for the out-of-place and the in-place form.
-- What it measures is whatever backend lab.dist takes for the tensors: MPI on cpu tensors, NCCL
-- on cuda tensors where every rank has a GPU of its own, MPI with host staging where ranks share
-- a GPU (the header says which). As nccl-tests does: `warmup` untimed calls, then `iters` timed
-- calls; time is the average over ranks of each rank's time per call (nccl-tests' default -a 1);
-- algbw = size / time; busbw = algbw x the bus factor of the op (all_reduce 2(n-1)/n; all_gather,
-- reduce_scatter, all_to_all (n-1)/n; broadcast, reduce 1), which makes busbw comparable across
-- rank counts. #wrong: after the timed calls the data is set to rank-dependent values, the op runs
-- once more and every element is compared with its closed form (summed over ranks). lab.dist's
-- all_reduce, broadcast and reduce work in place only, and its all_gather, reduce_scatter and
-- all_to_all out of place only: the other half of each row says n/a rather than a figure not
-- measured. Sizes follow nccl-tests' -b/-e/-f; for all_gather and reduce_scatter size is the
-- large buffer (count x ranks), as theirs.
--   build/llmlab -n 4 scripts/bench/collectives.lua op=all_reduce b=8 e=32M f=2 d=f32 o=sum device=cpu
--   (on a GPU machine: device=cuda at 1 rank is NCCL; at 2 ranks on one GPU, MPI staging)
local dist = lab.dist
local r, n = dist.rank(), dist.world()

local opt = { op = "all_reduce", b = "8", e = "32M", f = "2", d = "f32", o = "sum", device = "cpu", iters = nil,
              warmup = "5", root = "0" }
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.+)$")
  if not k or opt[k] == nil and k ~= "iters" then error("collectives: bad argument '" .. a .. "' (key=value: op b e f d o device iters warmup root)") end
  opt[k] = v
end
local function bytes(s)
  local num, unit = s:match("^(%d+)([KMG]?)$")
  if not num then error("collectives: size '" .. s .. "' is not N, NK, NM or NG") end
  return tonumber(num) * ({ [""] = 1, K = 1024, M = 1024 ^ 2, G = 1024 ^ 3 })[unit]
end
local ops = { all_reduce = { bus = 2 * (n - 1) / n, red = true, place = "in" },
              broadcast = { bus = 1, root = true, place = "in" },
              reduce = { bus = 1, red = true, root = true, place = "in" },
              all_gather = { bus = (n - 1) / n, place = "out" },
              reduce_scatter = { bus = (n - 1) / n, red = true, place = "out" },
              all_to_all = { bus = (n - 1) / n, place = "out" } }
local spec = ops[opt.op] or error("collectives: op must be one of all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all")
local type_names = { f32 = "float", f64 = "double", bf16 = "bfloat16", f16 = "half", i32 = "int32", i64 = "int64" }
local tname = type_names[opt.d] or error("collectives: d must be f32, f64, bf16, f16, i32 or i64")
local esize = ({ f32 = 4, f64 = 8, bf16 = 2, f16 = 2, i32 = 4, i64 = 8 })[opt.d]
local dev, root = opt.device, tonumber(opt.root)
local minb, maxb, factor = bytes(opt.b), bytes(opt.e), tonumber(opt.f)
local warmup = tonumber(opt.warmup)

local function sync() if dev ~= "cpu" then lab.cuda.synchronize(dev) end end

-- the values of the #wrong check: small integers, exact in every dtype
local function fill(t, v) t:copy_(lab.full(t.shape, v, { dtype = opt.d, device = dev })) end

-- run the op once on buffers made for `count` elements per rank block
local function make(count)
  local o = { dtype = opt.d, device = dev }
  if opt.op == "all_gather" then return { out = lab.zeros(count * n, o), inp = lab.zeros(count, o) } end
  if opt.op == "reduce_scatter" then return { out = lab.zeros(count, o), inp = lab.zeros(count * n, o) } end
  if opt.op == "all_to_all" then return { out = lab.zeros(n, count, o), inp = lab.zeros(n, count, o) } end
  return { t = lab.zeros(count, o) }
end
local function run(buf)
  if opt.op == "all_reduce" then dist.all_reduce(buf.t, opt.o)
  elseif opt.op == "broadcast" then dist.broadcast(buf.t, root)
  elseif opt.op == "reduce" then dist.reduce(buf.t, root, opt.o)
  elseif opt.op == "all_gather" then dist.all_gather_into_tensor(buf.out, buf.inp)
  elseif opt.op == "reduce_scatter" then dist.reduce_scatter(buf.out, buf.inp, opt.o)
  else dist.all_to_all(buf.out, buf.inp) end
end

-- closed forms with x_r = r + 1: sum n(n+1)/2, prod n!, max n, min 1, avg (n+1)/2
local function reduced()
  local s = ({ sum = n * (n + 1) / 2, max = n, min = 1, avg = (n + 1) / 2 })[opt.o]
  if opt.o == "prod" then s = 1 for i = 2, n do s = s * i end end
  return s
end
local function wrong(buf, count)
  local want, got
  if opt.op == "all_reduce" or opt.op == "reduce" then
    fill(buf.t, r + 1)
    run(buf)
    got = buf.t
    want = lab.full({ count }, (opt.op == "all_reduce" or r == root) and reduced() or r + 1, { dtype = "f64" })
  elseif opt.op == "broadcast" then
    fill(buf.t, r + 1)
    run(buf)
    got, want = buf.t, lab.full({ count }, root + 1, { dtype = "f64" })
  elseif opt.op == "all_gather" then
    fill(buf.inp, r + 1)
    run(buf)
    got, want = buf.out, lab.arange(1, n + 1, { dtype = "f64" }):reshape(n, 1):expand(n, count):contiguous():reshape(n * count)
  elseif opt.op == "reduce_scatter" then
    fill(buf.inp, r + 1)
    run(buf)
    got, want = buf.out, lab.full({ count }, reduced(), { dtype = "f64" })
  else -- block q of rank r holds r n + q; afterwards block q holds q n + r
    buf.inp:copy_((lab.arange(0, n, { dtype = "f64" }) + r * n):reshape(n, 1):expand(n, count):to({ device = dev, dtype = opt.d }))
    run(buf)
    got, want = buf.out, (lab.arange(0, n, { dtype = "f64" }) * n + r):reshape(n, 1):expand(n, count)
  end
  sync()
  local bad = (got:cpu():to("f64"):reshape(want:numel()) - want:contiguous():reshape(want:numel())):abs():gt(0):sum():item()
  return math.floor(bad)
end

-- header, as nccl-tests prints it
local backend = dist.backend(lab.ones(1, { device = dev }))
lab.print0(string.format("# %s_perf (lab.dist) minBytes %d maxBytes %d step: %g(factor) warmup iters: %d iters: %s validation: 1",
  opt.op, minb, maxb, factor, warmup, opt.iters or "auto"))
lab.print0(string.format("# ranks %d, device %s, backend: %s", n, dev, backend))
local stat = io.open("/proc/self/stat")
local pid = stat and tonumber(stat:read("l"):match("^(%d+)")) or 0
if stat then stat:close() end
local line = string.format("#  Rank %2d Pid %6d on %10s device %s", r, pid, dist.hostname(), dev)
local lines = {}
for q = 0, n - 1 do
  local t = lab.zeros(128, { dtype = "i32" })
  if q == r then for i = 1, math.min(#line, 128) do t[i] = line:byte(i) end end
  dist.broadcast(t, q)
  local s = {}
  for i = 1, 128 do local c = t[i] if c == 0 then break end s[#s + 1] = string.char(c) end
  lines[#lines + 1] = table.concat(s)
end
for _, l in ipairs(lines) do lab.print0(l) end
lab.print0("#")
lab.print0(string.format("# %10s %12s %8s %6s %6s %27s %27s", "", "", "", "", "", "out-of-place", "in-place"))
lab.print0(string.format("# %10s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s", "size", "count", "type", "redop",
  "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"))
lab.print0(string.format("# %10s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s", "(B)", "(elements)", "", "", "",
  "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""))

local total_bus, rows, total_wrong = 0, 0, 0
local size = minb
while size <= maxb do
  -- per-rank block of count elements; size is the large buffer for all_gather / reduce_scatter
  local block = (opt.op == "all_gather" or opt.op == "reduce_scatter" or opt.op == "all_to_all") and n or 1
  local count = math.max(1, size // (esize * block))
  local real = count * esize * block
  local buf = make(count)
  -- iterations: nccl-tests' 20 by default; fewer for large sizes on CPU so a sweep stays short
  local iters = tonumber(opt.iters) or math.max(3, math.min(20, (256 * 1024 * 1024) // math.max(real, 1) // 4))
  for _ = 1, warmup do run(buf) end
  sync()
  dist.barrier()
  local t0 = lab.clock()
  for _ = 1, iters do run(buf) end
  sync()
  local t = lab.tensor({ (lab.clock() - t0) / iters }, { dtype = "f64" })
  dist.all_reduce(t) -- nccl-tests' default: the average over ranks
  local sec = t[1] / n
  local nwrong = lab.tensor({ wrong(buf, count) }, { dtype = "f64" })
  dist.all_reduce(nwrong)
  total_wrong = total_wrong + nwrong[1]
  local algbw = real / sec / 1e9
  local busbw = algbw * spec.bus
  local measured = string.format("%8.1f %7.2f %7.2f %6d", sec * 1e6, algbw, busbw, nwrong[1])
  local na = string.format("%8s %7s %7s %6s", "n/a", "n/a", "n/a", "n/a")
  lab.print0(string.format("  %10d %12d %8s %6s %6d %s %s", real, count * block, tname, spec.red and opt.o or "none",
    spec.root and root or -1, spec.place == "out" and measured or na, spec.place == "in" and measured or na))
  total_bus, rows = total_bus + busbw, rows + 1
  size = size * factor
end
lab.print0(string.format("# Out of bounds values : %d %s", total_wrong, total_wrong == 0 and "OK" or "WRONG"))
lab.print0(string.format("# Avg bus bandwidth    : %g", total_bus / math.max(rows, 1)))
lab.print0("#")
if total_wrong > 0 then os.exit(1) end
